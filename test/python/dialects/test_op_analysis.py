"""Per-op analysis of the graph dialect (docs/design.md#operator-analysis): properties,
FLOPs, bytes, params; and the two halves of the flag mask (docs/design.md#op-flags).

Expected values are written by hand from the op's math, not computed by the
code under test.
"""

from __future__ import annotations

from aicfc.dialects.autodiff import Autodiff
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import STATIC_MASK, OpFlag, derived_flags, static_flags
from aicfc.dialects.graph import Graph
from aicfc.ir import parse_module

LINEAR_RELU = """
func.func @f(%x: tensor<4x10xf32> {aicfc.role = "input", aicfc.name = "x"},
             %w: tensor<20x10xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
             %b: tensor<20xf32> {aicfc.role = "param", aicfc.name = "fc.bias"})
    -> tensor<4x20xf32> {
  %mm = graph.matmul %x, %w transpose_b
      : (tensor<4x10xf32>, tensor<20x10xf32>) -> tensor<4x20xf32>
  %z = graph.bias_add %mm, %b : (tensor<4x20xf32>, tensor<20xf32>) -> tensor<4x20xf32>
  %y = graph.relu %z : tensor<4x20xf32>
  %e0 = graph.gemm_epilogue %x, %w transpose_b
      : (tensor<4x10xf32>, tensor<20x10xf32>) -> tensor<4x20xf32>
  %e1 = graph.gemm_epilogue %x, %w bias %b transpose_b
      : (tensor<4x10xf32>, tensor<20x10xf32>, tensor<20xf32>) -> tensor<4x20xf32>
  %e2 = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
      : (tensor<4x10xf32>, tensor<20x10xf32>, tensor<20xf32>) -> tensor<4x20xf32>
  %t = graph.tanh %y : tensor<4x20xf32>
  %r = graph.reshape %t : tensor<4x20xf32> -> tensor<80xf32>
  func.return %y : tensor<4x20xf32>
}
"""


def ops() -> dict[str, AicfcOp]:
    module = parse_module(LINEAR_RELU)
    found: dict[str, AicfcOp] = {}
    for op in module.walk():
        if isinstance(op, AicfcOp):
            found[op.results[0].name_hint or op.name] = op
    return found


def test_semantic_properties_of_each_op() -> None:
    o = ops()
    assert o["mm"].semantic_properties() == ["linear", "trainable"]
    assert o["z"].semantic_properties() == ["affine", "trainable"]
    assert o["y"].semantic_properties() == ["nonlinear", "irreversible", "collapse-producing"]
    assert o["e0"].semantic_properties() == ["linear", "trainable"]
    assert o["e1"].semantic_properties() == ["affine", "trainable"]
    assert o["e2"].semantic_properties() == [
        "trainable",
        "nonlinear",
        "irreversible",
        "collapse-producing",
    ]
    assert o["t"].semantic_properties() == ["nonlinear"]
    assert o["r"].semantic_properties() == ["linear", "shape-only"]


def test_counts() -> None:
    o = ops()
    assert o["mm"].flops() == 2 * 4 * 20 * 10
    assert o["mm"].param_count() == 200
    assert o["z"].param_count() == 20
    assert o["e1"].param_count() == 220
    assert o["e2"].flops() == 2 * 4 * 20 * 10 + 2 * 4 * 20
    # x (4*10) + w (20*10) read, y (4*20) written, 4 bytes each
    assert o["mm"].bytes_moved() == 4 * (40 + 200 + 80)


def test_derived_flags() -> None:
    o = ops()
    mm = derived_flags(o["mm"])
    assert mm & OpFlag.DTYPE_F32 and mm & OpFlag.LAYOUT_CONTIG and mm & OpFlag.SAFE_NODE
    assert mm & OpFlag.SINGLE_USE  # %mm feeds only the bias_add
    assert not derived_flags(o["y"]) & OpFlag.SINGLE_USE  # tanh and return read %y


DERIVED = {
    "DTYPE_F32",
    "DTYPE_F16",
    "DTYPE_BF16",
    "DTYPE_F64",
    "LAYOUT_CONTIG",
    "SINGLE_USE",
    "SAFE_NODE",
}
"""The derived flags, written out by hand."""


def test_static_and_derived_flags_keep_their_halves() -> None:
    """Static bits are 0-31 and derived bits 32-63: an op class never sets a derived bit,
    derived_flags never sets a static one, and everything fits in 64 bits."""
    assert STATIC_MASK == 0xFFFF_FFFF
    for flag in OpFlag:
        if flag.value:
            assert flag.value < 1 << 64, flag.name
            assert bool(flag.value & ~STATIC_MASK) == (flag.name in DERIVED), flag.name
    for op in (*Graph.operations, *Autodiff.operations):
        assert not static_flags(op) & ~STATIC_MASK, op.name
    for name, op in ops().items():
        assert not derived_flags(op) & STATIC_MASK, name
