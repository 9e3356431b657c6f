"""aicfc-fold-casts on the NumPy side: a bf16 product or reduction whose f32 cast is folded
writes the float32 sum of its bf16 operands, unrounded.

- op by op (runtime/reference.py through REFERENCE, out_dtype "f32"): matmul, gemm_epilogue
  (with an f32 bias), reduce_sum, epilogue_grad and gemm_epilogue_grad against a float64
  computation from the same bf16 values: within float32 accumulation (F32_SUM), far
  below one bf16 rounding, and not the bf16-rounded value;
- whole steps (the random train steps of the autocast differential test, and the MLP):
  the folded program against the unfolded one within bf16's precision (BF16_TOL), and
  really different from it where a fold happened.
"""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.execute import run_pipeline
from aicfc.ir import parse_module
from aicfc.runtime.reference import REFERENCE
from regressions.random_steps import random_step
from regressions.test_unusual_graphs import interpret, random_arguments
from support import rel_err

BF16 = np.dtype(ml_dtypes.bfloat16)
F32_SUM = 2.0**-20
"""Relative (norm) error of a float32 sum of at most a few hundred products against the
float64 one: a handful of float32 roundings (2^-24 each), no bf16 rounding (2^-8)."""
BF16_TOL = 0.02
"""Folded against unfolded step, relative to the largest value: each fold removes one bf16
rounding (2^-8 = 0.0039) of a gradient or the logits, which the later ops carry along
(largest seen on these seeds: 0.0078, two roundings); about five roundings' worth."""
UNFOLDED = (
    "aicfc-fuse,aicfc-autocast{dtype=bf16},aicfc-expand-backward,aicfc-fuse,canonicalize,"
    "aicfc-fold-constants,cse"
)
FOLDED = UNFOLDED.replace("aicfc-fuse,canonicalize", "aicfc-fuse,aicfc-fold-casts,canonicalize")
SEEDS = range(40)


def norm_err(got: np.ndarray, want: np.ndarray) -> float:
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(g64 - w64) / np.linalg.norm(w64))


def bf16(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF16)


def check_wide(got: np.ndarray, exact: np.ndarray) -> None:
    assert got.dtype == np.float32
    assert norm_err(got, exact) <= F32_SUM
    # the bf16-rounded sum is ~2^-9 off: the wide result is not it
    assert norm_err(exact.astype(BF16), exact) > 16 * F32_SUM


def test_wide_matmul_and_gemm_epilogue_are_the_fp32_sums() -> None:
    rng = np.random.default_rng(0)
    a, b = bf16(rng, 64, 200), bf16(rng, 200, 48)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    (c,) = REFERENCE[g.MatmulOp](a, b, out_dtype="f32")
    check_wide(c, exact)
    (low,) = REFERENCE[g.MatmulOp](a, b)  # without out_dtype: rounded to bf16
    assert low.dtype == BF16
    w, bias = bf16(rng, 48, 200), rng.standard_normal(48).astype(np.float32)
    y, z = REFERENCE[g.GemmEpilogueOp](a, w, bias, act="relu", transpose_b=True, out_dtype="f32")
    pre = a.astype(np.float64) @ w.astype(np.float64).T + bias
    check_wide(z, pre)
    check_wide(y, np.maximum(pre, 0.0))


def test_wide_reductions_are_the_fp32_sums() -> None:
    rng = np.random.default_rng(1)
    x = bf16(rng, 300, 45)
    (s,) = REFERENCE[g.ReduceSumOp](x, axes=(0,), out_dtype="f32")
    check_wide(s, x.astype(np.float64).sum(0))
    dy, y = bf16(rng, 300, 45), bf16(rng, 300, 45)
    dz, db = REFERENCE[ad.EpilogueGradOp](dy, y, act="relu", out_dtype="f32")
    assert dz.dtype == BF16  # dZ is not a wide result
    check_wide(db, (dy.astype(np.float64) * (y.astype(np.float64) > 0)).sum(0))
    a, w = bf16(rng, 300, 30), bf16(rng, 30, 45)
    dz2, db2 = REFERENCE[ad.GemmEpilogueGradOp](a, w, y, act="relu", out_dtype="f32")
    assert dz2.dtype == BF16
    # dbias sums the unrounded fp32 dZ = (A W) * relu'(y)
    exact = ((a.astype(np.float64) @ w.astype(np.float64)) * (y.astype(np.float64) > 0)).sum(0)
    check_wide(db2, exact)


def casts(text: str, passes: str) -> int:
    return str(run_pipeline(parse_module(text), passes)).count("graph.cast ")


def test_folded_steps_match_the_unfolded_steps() -> None:
    worst, folded, differs = 0.0, 0, 0
    for seed in SEEDS:
        text, classes = random_step(random.Random(seed), dtype="f32")
        args = random_arguments(text, np.random.default_rng(seed), classes)
        want = interpret(text, UNFOLDED, args)
        got = interpret(text, FOLDED, args)
        assert set(got) == set(want)
        errs = [rel_err(got[n], v) for n, v in want.items() if np.issubdtype(v.dtype, np.floating)]
        worst = max(worst, *errs)
        assert max(errs) <= BF16_TOL, f"seed {seed}: {max(errs):.3g}\n{text}"
        if casts(text, FOLDED) < casts(text, UNFOLDED):
            folded += 1
            differs += max(errs) > 0
        else:
            assert max(errs) == 0, f"seed {seed}: nothing folded, yet the values differ"
    # the folds happened on many steps, and most of them changed a returned value (some
    # fold a sum that is exactly representable in bf16, or that nothing returned reads)
    assert folded >= 15 and differs >= folded // 2, (folded, differs)
    print(f"worst folded/unfolded rel err {worst:.3g}; {folded} folded, {differs} differ")


def test_folded_mlp_step_gradients() -> None:
    """The MLP step of test/passes/aicfc-fold-casts.mlir: every result (loss, the updated
    weight, dW2) in its declared dtype, within bf16's precision of the unfolded step."""
    from pathlib import Path

    text = Path(__file__).parents[2].joinpath("passes", "aicfc-fold-casts.mlir").read_text()
    mlp = text.split("// -----")[0]
    mlp = mlp[mlp.index("\nfunc.func @mlp_step") + 1 :]
    rng = np.random.default_rng(3)
    args = random_arguments(mlp, rng, 4)
    args["arg7"] = np.abs(args["arg7"])  # %v1, Adam's second moment, is >= 0
    want = interpret(mlp, UNFOLDED, args)
    got = interpret(mlp, FOLDED, args)
    for name, v in want.items():
        if np.issubdtype(v.dtype, np.floating):
            assert got[name].dtype == v.dtype
            assert rel_err(got[name], v) <= BF16_TOL, name
    assert rel_err(got["result2"], want["result2"]) > 0  # dW2: folded into its product
