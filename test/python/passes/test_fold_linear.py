"""aicfc-fold-linear: differential tests on random inputs, the size rule, and the refusal.

Each case builds two (or three) linear layers in every weight layout, with and
without biases, unfused (matmul + bias_add) and fused (gemm_epilogue), runs the
function before and after the pass with runtime/interpreter.py on fresh random
float32 inputs and weights, and compares with

    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-5)

Folding reassociates x (W2 W1)^T versus (x W1^T) W2^T, so the results differ
by float32 rounding (about K * eps = 16 * 1.2e-7 relative for these sizes);
1e-4 leaves headroom while a wrong transpose or a lost bias is off by O(1).
The size rule is checked against out*in <= h*in + out*h computed here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from aicfc.context import make_context
from aicfc.dialects.diagnostics import IRWarning
from aicfc.ir import parse_module
from aicfc.passes.aicfc_fold_linear import AicfcFoldLinearPass
from aicfc.runtime.interpreter import find_func, run_func
from support import random_args

RTOL, ATOL = 1e-4, 1e-5


def t(*shape: int) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def layer(
    idx: int, x: str, x_shape: tuple[int, int], out: int, transpose_w: bool, bias: bool, fused: bool
) -> tuple[list[str], list[str], str, tuple[int, int]]:
    """(arg decls, op lines, result name, result shape) of y = x op(W) (+ b)."""
    m, k = x_shape
    w_shape = (out, k) if transpose_w else (k, out)
    args = [f'%w{idx}: {t(*w_shape)} {{aicfc.role = "param", aicfc.name = "l{idx}.weight"}}']
    flag = " transpose_b" if transpose_w else ""
    y = f"%y{idx}"
    if bias:
        args.append(f'%b{idx}: {t(out)} {{aicfc.role = "param", aicfc.name = "l{idx}.bias"}}')
    if fused:
        bias_part = f" bias %b{idx}" if bias else ""
        types = f"{t(m, k)}, {t(*w_shape)}" + (f", {t(out)}" if bias else "")
        ops = [
            f"{y} = graph.gemm_epilogue {x}, %w{idx}{bias_part}{flag} : ({types}) -> {t(m, out)}"
        ]
    else:
        mm = f"%m{idx}" if bias else y
        ops = [
            f"{mm} = graph.matmul {x}, %w{idx}{flag} : ({t(m, k)}, {t(*w_shape)}) -> {t(m, out)}"
        ]
        if bias:
            ops.append(
                f"{y} = graph.bias_add {mm}, %b{idx} : ({t(m, out)}, {t(out)}) -> {t(m, out)}"
            )
    return args, ops, y, (m, out)


def network(sizes: list[int], layouts, biases, fused: bool, batch: int = 5, between: str = ""):
    """A @predict with len(sizes)-1 linear layers; `between` is an op put after layer 0."""
    args = [f'%x: {t(batch, sizes[0])} {{aicfc.role = "input", aicfc.name = "x"}}']
    body: list[str] = []
    x, shape = "%x", (batch, sizes[0])
    for i, (out, tw, b) in enumerate(zip(sizes[1:], layouts, biases, strict=True)):
        a, ops, x, shape = layer(i, x, shape, out, tw, b, fused)
        args += a
        body += ops
        if i == 0 and between:
            body.append(f"%act = graph.{between} {x} : {t(*shape)}")
            x = "%act"
    return (
        f"func.func @predict({', '.join(args)}) -> {t(*shape)} {{\n  "
        + "\n  ".join(body)
        + f"\n  func.return {x} : {t(*shape)}\n}}"
    )


def fold(module: ModuleOp, force: bool = False) -> ModuleOp:
    out = module.clone()
    AicfcFoldLinearPass(force=force).apply(make_context(), out)
    out.verify()
    return out


def compare(text: str, force: bool = False, seed: int = 0) -> func.FuncOp:
    before = parse_module(text)
    after = fold(before, force)
    fb, fa = find_func(before), find_func(after)
    args = random_args(fb, np.random.default_rng(seed))
    want, got = run_func(fb, args), run_func(fa, args)
    np.testing.assert_allclose(got[0], want[0], rtol=RTOL, atol=ATOL)
    return fa


def data_gemms(fn: func.FuncOp) -> list[str]:
    """GEMMs whose operands depend on the input x (the per-sample work; the folded
    weight and bias are computed from params only and do not count)."""
    live = {fn.body.block.args[0]}
    out = []
    for op in fn.body.block.ops:
        if any(v in live for v in op.operands):
            live.update(op.results)
            if op.name in ("graph.matmul", "graph.gemm_epilogue"):
                out.append(op.name)
    return out


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("biases", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("layouts", list(itertools.product([False, True], repeat=2)))
def test_two_layers_fold_to_one(layouts, biases, fused):
    fn = compare(network([4, 6, 8], layouts, biases, fused))
    assert data_gemms(fn) == ["graph.gemm_epilogue" if fused else "graph.matmul"]


def test_three_layers_fold_to_one():
    fn = compare(network([4, 5, 6, 3], [True] * 3, [True] * 3, fused=False), seed=3)
    assert data_gemms(fn) == ["graph.matmul"]


@pytest.mark.parametrize("act", ["relu", "gelu", "tanh"])
def test_dont_fold_with_activation_between(act):
    text = network([4, 6, 8], [True, True], [True, True], fused=False, between=act)
    fn = compare(text)
    assert data_gemms(fn) == ["graph.matmul", "graph.matmul"]


@pytest.mark.parametrize(
    ("sizes", "folds"),
    [
        ([4, 6, 8], True),  # 8*4 = 32 <= 6*4 + 8*6 = 72
        ([32, 4, 32], False),  # 32*32 = 1024 > 4*32 + 32*4 = 256
        ([8, 4, 8], True),  # 64 <= 32 + 32: equal sizes fold
        ([9, 4, 8], False),  # 72 > 36 + 32
    ],
)
def test_size_rule_and_force(sizes, folds):
    i, h, o = sizes
    assert (o * i <= h * i + o * h) == folds  # the rule, restated here
    text = network(sizes, [True, True], [True, True], fused=False)
    fn = compare(text)
    assert len(data_gemms(fn)) == (1 if folds else 2)
    forced = compare(text, force=True, seed=1)
    assert len(data_gemms(forced)) == 1


def test_refuses_in_a_training_function():
    text = network([4, 6, 8], [True, True], [False, False], fused=False)
    text = text.replace("@predict", "@train_step").replace(
        '%x: tensor<5x4xf32> {aicfc.role = "input", aicfc.name = "x"}',
        '%x: tensor<5x4xf32> {aicfc.role = "input", aicfc.name = "x"}, '
        '%s: tensor<f32> {aicfc.role = "state", aicfc.name = "l0.weight.step"}',
    )
    with pytest.warns(IRWarning, match=r'"l0.weight.step"\) of @train_step is never updated'):
        module = parse_module(text)
    with pytest.raises(DiagnosticException) as e:
        fold(module)
    msg = str(e.value)
    assert "training function @train_step" in msg
    assert "'l0.weight.step' is optimizer state" in msg
    assert "'l0.weight' and 'l1.weight'" in msg


def test_training_function_without_a_pair_is_left_alone():
    text = network([4, 6, 8], [True, True], [False, False], fused=False, between="relu")
    text = text.replace("@predict", "@train_step").replace(
        '%x: tensor<5x4xf32> {aicfc.role = "input", aicfc.name = "x"}',
        '%x: tensor<5x4xf32> {aicfc.role = "input", aicfc.name = "x"}, '
        '%s: tensor<f32> {aicfc.role = "state", aicfc.name = "l0.weight.step"}',
    )
    with pytest.warns(IRWarning, match="never updated"):
        module = parse_module(text)
    assert str(fold(module)) == str(module)


@pytest.mark.parametrize("fused", [False, True])
def test_two_layers_on_btd_fold_to_one(fused: bool) -> None:
    """Layers applied to every position of [B, T, D] fold as on [N, D] (the leading dims
    fold into M; the folded weight is the same matrix)."""
    text = network([4, 6, 3], [True, True], [True, True], fused, batch=5)
    text = text.replace("tensor<5x", "tensor<2x5x")  # x, the hidden and the output: [2, 5, *]
    fn = compare(text, seed=5)
    assert data_gemms(fn) == ["graph.gemm_epilogue" if fused else "graph.matmul"]
    (x,) = [a for a in fn.body.block.args if len(a.type.get_shape()) == 3]  # type: ignore[attr-defined]
    assert x.type.get_shape() == (2, 5, 4)  # type: ignore[attr-defined]
