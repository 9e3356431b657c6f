"""Graph canonicalization (dialects/canonicalization): differential tests and structure checks.

Each case runs a function before and after xDSL's `canonicalize` with
runtime/interpreter.py on fresh random inputs (standard normal float32) and
compares every result. Layout rewrites move the same floats and constant
folding evaluates the same NumPy reference, so the comparison is exact
(`np.testing.assert_array_equal`); the broadcast-add -> bias_add -> fused
epilogue chain computes x @ W^T + b in the same order and is compared with
rtol = 1e-6, atol = 1e-6. Each case also checks that the rewrite happened
(which ops are left), against expectations written here, not derived from
the patterns.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from aicfc.execute import run_pipeline
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, run_func
from support import random_args


def canonicalize(module: ModuleOp, then: tuple[str, ...] = ()) -> ModuleOp:
    """A copy of `module` after xDSL's canonicalize and then the passes `then`, verified."""
    out = run_pipeline(module.clone(), ",".join(("canonicalize", *then)))
    out.verify()
    return out


def run_both(text: str, then: tuple[str, ...] = (), seed: int = 0):
    before = parse_module(text)
    after = canonicalize(before, then)
    fb, fa = find_func(before), find_func(after)
    args = random_args(fb, np.random.default_rng(seed))
    return run_func(fb, args), run_func(fa, args), fa


def op_names(fn: func.FuncOp) -> list[str]:
    return [op.name for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]


def tensor(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + ("x" if shape else "") + "f32>"


# --- transpose of a transpose -----------------------------------------------

PERMS = list(itertools.permutations(range(3)))


@pytest.mark.parametrize(("p", "q"), list(itertools.product(PERMS, PERMS)))
def test_transpose_of_transpose_matches_and_leaves_at_most_one(p, q):
    shape = (2, 3, 4)
    mid = tuple(shape[i] for i in p)
    out = tuple(mid[i] for i in q)
    text = f"""
    func.func @f(%x: {tensor(shape)}) -> {tensor(out)} {{
      %0 = graph.transpose %x perm = {list(p)} : {tensor(shape)} -> {tensor(mid)}
      %1 = graph.transpose %0 perm = {list(q)} : {tensor(mid)} -> {tensor(out)}
      func.return %1 : {tensor(out)}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    # The pair is the identity exactly when numpy's x.transpose(p).transpose(q) is x itself.
    x = np.arange(24).reshape(shape)
    identity = np.array_equal(x.transpose(p).transpose(q), x)
    assert op_names(fn) == ([] if identity else ["graph.transpose"])


def test_transpose_of_transpose_keeps_inner_with_other_users():
    text = f"""
    func.func @f(%x: {tensor((2, 3))}) -> ({tensor((2, 3))}, {tensor((3, 2))}) {{
      %0 = graph.transpose %x perm = [1, 0] : {tensor((2, 3))} -> {tensor((3, 2))}
      %1 = graph.transpose %0 perm = [1, 0] : {tensor((3, 2))} -> {tensor((2, 3))}
      func.return %1, %0 : {tensor((2, 3))}, {tensor((3, 2))}
    }}"""
    want, got, fn = run_both(text)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert op_names(fn) == ["graph.transpose"]


# --- reshapes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "left"),
    [
        (((2, 3, 4), (6, 4), (4, 6)), 1),
        (((2, 3, 4), (24,), (2, 3, 4)), 0),
        (((2, 3, 4), (2, 3, 4), (2, 3, 4)), 0),
        (((2, 3, 4), (4, 3, 2), (24,)), 1),
    ],
)
def test_reshape_chains(shapes, left):
    a, b, c = shapes
    text = f"""
    func.func @f(%x: {tensor(a)}) -> {tensor(c)} {{
      %0 = graph.reshape %x : {tensor(a)} -> {tensor(b)}
      %1 = graph.reshape %0 : {tensor(b)} -> {tensor(c)}
      func.return %1 : {tensor(c)}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    assert op_names(fn) == ["graph.reshape"] * left


def test_identity_layout_ops_are_removed():
    s = tensor((3, 4))
    text = f"""
    func.func @f(%x: {s}) -> {s} {{
      %0 = graph.reshape %x : {s} -> {s}
      %1 = graph.transpose %0 perm = [0, 1] : {s} -> {s}
      %2 = graph.broadcast_to %1 : {s} -> {s}
      %3 = graph.relu %2 : {s}
      func.return %3 : {s}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    assert op_names(fn) == ["graph.relu"]


# --- constant folding ------------------------------------------------------------


def dense(a: np.ndarray) -> str:
    return "dense<" + np.array2string(a, separator=", ", threshold=10**6, floatmode="unique") + ">"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constant_folding_of_a_graph_matches_the_interpreter(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    text = f"""
    func.func @f(%x: {tensor((3, 5))}) -> ({tensor((3, 5))}, {tensor((5,))}, {tensor((5, 3))}) {{
      %a = graph.constant {dense(a)} : {tensor((3, 4))}
      %w = graph.constant {dense(w)} : {tensor((5, 4))}
      %b = graph.constant {dense(b)} : {tensor((5,))}
      %m = graph.matmul %a, %w transpose_b
             : ({tensor((3, 4))}, {tensor((5, 4))}) -> {tensor((3, 5))}
      %z = graph.bias_add %m, %b : ({tensor((3, 5))}, {tensor((5,))}) -> {tensor((3, 5))}
      %g = graph.gelu %z : {tensor((3, 5))}
      %s = graph.softmax %g axis = 1 : {tensor((3, 5))}
      %r = graph.reduce_sum %s axes = [0] : {tensor((3, 5))} -> {tensor((5,))}
      %t = graph.transpose %s perm = [1, 0] : {tensor((3, 5))} -> {tensor((5, 3))}
      %y = graph.add %x, %s : {tensor((3, 5))}
      func.return %y, %r, %t : {tensor((3, 5))}, {tensor((5,))}, {tensor((5, 3))}
    }}"""
    want, got, fn = run_both(text, then=("aicfc-fold-constants",), seed=seed)
    for k, (g_, w_) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(g_, w_, err_msg=f"result #{k}")
    # Only the add reads an argument; everything else became two constants (s, r, t: three).
    names = op_names(fn)
    assert names.count("graph.add") == 1
    assert set(names) == {"graph.constant", "graph.add"}


def test_constant_folding_keeps_values_through_print_and_parse():
    # The folded f32 constant must survive the textual round trip bit for bit.
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    text = f"""
    func.func @f() -> {tensor((4, 4))} {{
      %a = graph.constant {dense(a)} : {tensor((4, 4))}
      %t = graph.tanh %a : {tensor((4, 4))}
      func.return %t : {tensor((4, 4))}
    }}"""
    from aicfc.ir import print_module

    after = canonicalize(parse_module(text), then=("aicfc-fold-constants",))
    again = parse_module(print_module(after))
    got = run_func(find_func(again), [])[0]
    np.testing.assert_array_equal(got, np.tanh(a))


def test_dialect_import_does_not_load_the_runtime():
    code = (
        "import sys, aicfc.dialects.graph, aicfc.dialects.canonicalization; "
        "bad = [m for m in sys.modules if m.startswith('aicfc.runtime')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- broadcast add -> bias_add -> gemm_epilogue ----------------------------------------


@pytest.mark.parametrize("bias_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu", None])
def test_broadcast_add_becomes_bias_add_and_fuses(bias_first, act):
    x, w, b, y = tensor((6, 4)), tensor((5, 4)), tensor((5,)), tensor((6, 5))
    operands = "%bb, %m" if bias_first else "%m, %bb"
    act_line = f"%r = graph.{act} %y : {y}" if act else ""
    result = "%r" if act else "%y"
    text = f"""
    func.func @f(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
      %m = graph.matmul %x, %w transpose_b : ({x}, {w}) -> {y}
      %bb = graph.broadcast_to %b : {b} -> {y}
      %y = graph.add {operands} : {y}
      {act_line}
      func.return {result} : {y}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    assert op_names(fn) == ["graph.matmul", "graph.bias_add"] + ([f"graph.{act}"] if act else [])
    want, got, fn = run_both(text, then=("aicfc-fuse",))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    assert op_names(fn) == ["graph.gemm_epilogue"]
    # aicfc-fuse keeps GELU's pre-activation for the backward; a second canonicalize drops it.
    assert len(fn.body.block.first_op.results) == (2 if act == "gelu" else 1)
    want, got, fn = run_both(text, then=("aicfc-fuse", "canonicalize"))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    assert op_names(fn) == ["graph.gemm_epilogue"]
    assert len(fn.body.block.first_op.results) == 1


def test_unused_pre_act_is_dropped():
    x, w, b, y = tensor((6, 4)), tensor((5, 4)), tensor((5,)), tensor((6, 5))
    text = f"""
    func.func @f(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
      %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b
                 : ({x}, {w}, {b}) -> ({y}, {y})
      func.return %y : {y}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    (op,) = list(fn.body.block.ops)[:-1]
    assert op.name == "graph.gemm_epilogue" and len(op.results) == 1
    assert op.properties["act"].data.value == "gelu"


# --- products by a scalar ----------------------------------------------------------


@pytest.mark.parametrize("constant_first", [False, True])
@pytest.mark.parametrize("value", [0.125, -1.0, 3.0e-3])
def test_mul_by_splat_becomes_an_exact_scale(constant_first: bool, value: float) -> None:
    s = tensor((2, 3, 4))
    operands = "%c, %x" if constant_first else "%x, %c"
    text = f"""
    func.func @f(%x: {s}) -> {s} {{
      %c = graph.constant dense<{value}> : {s}
      %y = graph.mul {operands} : {s}
      func.return %y : {s}
    }}"""
    want, got, fn = run_both(text)
    np.testing.assert_array_equal(got[0], want[0])
    assert op_names(fn) == ["graph.scale"]
