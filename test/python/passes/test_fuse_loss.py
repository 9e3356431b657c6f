"""The loss-with-gradient fusion of aicfc-fuse and its op, autodiff.cross_entropy_with_grad.

- Differential: every function of test/passes/aicfc-fuse-loss.mlir runs before
  and after the pass through runtime/interpreter.py on fresh random inputs
  (logits N(0, 3^2), labels uniform in [0, C), dloss N(0, 1)); every result
  agrees within rtol 1e-5 (the fused reference evaluates the same NumPy
  expressions, so more than rounding would be a wrong rewrite).
- Gradient check (the op has no VJP: its gradient is a result): grad_logits
  equals dloss times the central finite difference of its own loss result,
  in float64 (step 1e-6, tolerance 1e-6 relative), and grad_bias is its column sum.
  The loss result itself equals mean(logsumexp(x) - x[y]) computed here with
  scipy (relative error 1e-12), so a loss off by a constant cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, TensorType

from aicfc.context import make_context
from aicfc.ir import parse_module
from aicfc.passes.aicfc_fuse import AicfcFusePass
from aicfc.runtime import reference
from aicfc.runtime.interpreter import numpy_dtype, run_func

LIT_FILE = Path(__file__).resolve().parents[2] / "passes" / "aicfc-fuse-loss.mlir"
MODULE = parse_module(LIT_FILE.read_text(), LIT_FILE.name)
FUNCS = [op for op in MODULE.ops if isinstance(op, func.FuncOp)]


def random_args(fn: func.FuncOp, rng: np.random.Generator) -> list[np.ndarray]:
    block = fn.body.blocks.first
    assert block is not None
    classes = next(
        (t.get_shape()[1] for t in fn.function_type.inputs if len(t.get_shape()) == 2),  # type: ignore[attr-defined]
        4,
    )
    args = []
    for a in block.args:
        t = a.type
        assert isinstance(t, TensorType)
        dtype = numpy_dtype(t.element_type)
        shape = tuple(t.get_shape())
        if isinstance(t.element_type, IntegerType):
            args.append(rng.integers(0, classes, shape).astype(dtype))
        else:
            args.append((rng.standard_normal(shape) * 3).astype(dtype))
    return args


@pytest.mark.parametrize("fn", FUNCS, ids=[f.sym_name.data for f in FUNCS])
def test_fusion_keeps_every_result(fn):
    fused = MODULE.clone()
    AicfcFusePass().apply(make_context(), fused)
    fused.verify()
    after = next(f for f in fused.ops if f.sym_name.data == fn.sym_name.data)  # type: ignore[attr-defined]
    for seed in range(3):
        args = random_args(fn, np.random.default_rng(seed))
        before_out = run_func(fn, args)
        after_out = run_func(after, args)  # type: ignore[arg-type]
        for b, a in zip(before_out, after_out, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fused_function_really_fused():
    fused = MODULE.clone()
    AicfcFusePass().apply(make_context(), fused)
    names = [op.name for op in fused.walk()]
    assert names.count("autodiff.cross_entropy_with_grad") == 3
    assert names.count("graph.cross_entropy") == 2  # the two dont_fuse cases keep theirs


@pytest.mark.parametrize("seed", range(3))
def test_grad_logits_is_the_finite_difference_of_the_loss(seed):
    rng = np.random.default_rng(seed)
    n, c = 6, 5
    x = rng.standard_normal((n, c)) * 2
    y = rng.integers(0, c, n)
    dl = np.float64(rng.standard_normal())
    loss, dx, db = reference.cross_entropy_with_grad(x, y, np.asarray(dl))
    h = 1e-6
    fd = np.empty_like(x)
    for i in range(n):
        for j in range(c):
            e = np.zeros_like(x)
            e[i, j] = h
            up = reference.cross_entropy_with_grad(x + e, y, np.asarray(dl))[0]
            down = reference.cross_entropy_with_grad(x - e, y, np.asarray(dl))[0]
            fd[i, j] = dl * (up - down) / (2 * h)
    assert np.linalg.norm(dx - fd) / np.linalg.norm(fd) < 1e-6
    np.testing.assert_allclose(db, dx.sum(axis=0), rtol=1e-12)
    assert loss == reference.cross_entropy(x, y)[0]
    want = float(np.mean(logsumexp(x, axis=1) - x[np.arange(n), y]))
    assert abs(float(loss) - want) <= 1e-12 * abs(want)
