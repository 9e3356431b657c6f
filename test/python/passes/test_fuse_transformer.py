"""aicfc-fuse's transformer patterns: differential tests and the matcher's rules.

Every function of test/passes/aicfc-fuse-transformer.mlir runs before and after the
pass through the interpreter on fresh random inputs (floats standard normal, integer
labels uniform in [0, 4), the dropout offset likewise) and the results must agree within
rtol 1e-5, atol 1e-6 (the fused references compose the unfused ones, so beyond rounding
a difference is a wrong rewrite). Which functions fuse is asserted from their names
(fuse_* changes the IR, dont_* leaves it as it was), not from the pass's own matcher.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, f32, f64, i64
from xdsl.ir import Block

from aicfc.context import make_context
from aicfc.dialects import graph as g
from aicfc.ir import parse_module
from aicfc.passes.aicfc_fuse import AicfcFusePass
from aicfc.passes.dataflow import DataFlowGraph
from aicfc.passes.fusion.matcher import find_matches
from aicfc.passes.fusion.patterns import ADD_LAYER_NORM, ATTENTION
from aicfc.runtime.interpreter import numpy_dtype, run_func

RTOL, ATOL = 1e-5, 1e-6
LIT_FILE = Path(__file__).resolve().parents[2] / "passes" / "aicfc-fuse-transformer.mlir"
TEXT = LIT_FILE.read_text()
NAMES = [fn.sym_name.data for fn in parse_module(TEXT).walk() if isinstance(fn, func.FuncOp)]


def _args(fn: func.FuncOp, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for t in fn.function_type.inputs.data:
        assert isinstance(t, TensorType)
        dtype = numpy_dtype(t.element_type)
        shape = tuple(t.get_shape())
        if np.issubdtype(dtype, np.integer):
            out.append(rng.integers(0, 4, size=shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _fn(module: ModuleOp, name: str) -> func.FuncOp:
    return next(
        op for op in module.walk() if isinstance(op, func.FuncOp) and op.sym_name.data == name
    )


@pytest.mark.parametrize("name", NAMES)
def test_fusion_keeps_the_results(name: str) -> None:
    before = parse_module(TEXT)
    after = before.clone()
    AicfcFusePass().apply(make_context(), after)
    after.verify()
    fb, fa = _fn(before, name), _fn(after, name)
    changed = [op.name for op in fb.walk()] != [op.name for op in fa.walk()]
    assert changed == name.startswith("fuse_"), (name, [op.name for op in fa.walk()])
    for seed in range(3):
        args = _args(fb, np.random.default_rng(seed))
        want, got = run_func(fb, args), run_func(fa, args)
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            assert a.dtype == b.dtype and a.shape == b.shape, (name, k)
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"{name} #{k}")


def _unverified_chain(probs: TensorType) -> Block:
    """An attention chain (scores, scale, softmax, values) whose softmax and final product
    have the type `probs` (made with `create`, bypassing the verifiers, which would
    refuse a dtype change inside the chain)."""
    q = TensorType(f32, [1, 1, 4, 2])
    block = Block(arg_types=[q, q, q])
    s = g.MatmulOp(block.args[0], block.args[1], transpose_b=True)
    sc = g.ScaleOp(s.result, 0.5)
    axis = {"axis": IntegerAttr(-1, i64)}
    p = g.SoftmaxOp.create(operands=[sc.result], result_types=[probs], properties=axis)
    o = g.MatmulOp.create(operands=[p.results[0], block.args[2]], result_types=[q])
    block.add_ops([s, sc, p, o, func.ReturnOp(o.results[0])])
    return block


def test_attention_chain_with_a_dtype_mismatch_does_not_match() -> None:
    same = _unverified_chain(TensorType(f32, [1, 1, 4, 4]))
    mixed = _unverified_chain(TensorType(f64, [1, 1, 4, 4]))
    assert [m.pattern for m in find_matches(DataFlowGraph.of_block(same), [ATTENTION])] == [
        ATTENTION
    ]
    assert find_matches(DataFlowGraph.of_block(mixed), [ATTENTION]) == []


def test_add_layer_norm_with_a_dtype_mismatch_does_not_match() -> None:
    def block_with(add_type: TensorType) -> Block:
        x = TensorType(f64, [4, 3])
        block = Block(arg_types=[x, x])
        add = g.AddOp.create(operands=list(block.args), result_types=[add_type])
        norm = g.LayerNormOp.create(
            operands=[add.results[0]],
            result_types=[x, TensorType(f64, [4]), TensorType(f64, [4])],
            properties=dict(g.LayerNormOp(block.args[0]).properties),
        )
        block.add_ops([add, norm, func.ReturnOp(norm.results[0])])
        return block

    mixed = block_with(TensorType(f32, [4, 3]))  # the add's result claims f32
    assert find_matches(DataFlowGraph.of_block(mixed), [ADD_LAYER_NORM]) == []
    same = block_with(TensorType(f64, [4, 3]))
    assert len(find_matches(DataFlowGraph.of_block(same), [ADD_LAYER_NORM])) == 1
