"""aicfc-autocast, differential: on random train steps (regressions/random_steps.py) the
bf16 and fp16 programs compute what the fp32 program computes, within the low dtype's
precision.

For each seed, the f32 step runs through the fused pipeline with and without
aicfc-autocast{dtype=...} (and, for fp16, aicfc-loss-scale, as the train pipeline runs it),
in the interpreter (runtime/reference.py) and, lowered with
aicfc-train-pipeline{precision=...}, on the NumPy runtime; every output (loss, the
gradients, SGD's next params, intermediates) is compared with the fp32 program's by
relative error (max |low - fp32| / max |fp32|). Each value below passes through at most
~10 rounded ops and their gradients, so the tolerance is about 13 roundings' worth of the
dtype's unit roundoff: bf16 keeps 8 significant bits (2^-8 = 0.0039; tolerance 0.05, the
largest seen on these seeds 0.031), fp16 11 (2^-11 = 0.00049; tolerance 0.0065, the largest
seen 0.0026). fp16's range is small (max 65504): the loss is scaled from 2^16 and, as
torch's GradScaler does, the scale is halved while a step overflows (the step skips); the
first step that fits is compared. The second test checks that the comparison is not
vacuous: where a step has products, the low program really rounds (it is not the fp32
program again).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from aicfc.execute import LoadedFunction, run_pipeline
from aicfc.ir import parse_module
from regressions.random_steps import random_step
from regressions.test_unusual_graphs import interpret, random_arguments
from support import rel_err

Values = dict[str, np.ndarray]
TOL = {"bf16": 0.05, "fp16": 0.0065}
UNIT = {"bf16": 2.0**-8, "fp16": 2.0**-11}
FUSED = "aicfc-fuse,aicfc-expand-backward,aicfc-fuse,canonicalize,aicfc-fold-constants,cse"
LOSS_SCALE = {"bf16": "", "fp16": ",aicfc-loss-scale"}
SEEDS = range(40)


def autocast(dtype: str) -> str:
    return (
        f"aicfc-fuse,aicfc-autocast{{dtype={dtype}}}{LOSS_SCALE[dtype]},aicfc-expand-backward,"
        "aicfc-fuse,canonicalize,aicfc-fold-constants,cse"
    )


def backing_off(dtype: str, run: Callable[[Values], Values], args: Values) -> Values:
    """`run(args)`'s outputs; for fp16, GradScaler's back-off: from the scale 2^16, halve it
    while the step overflows (it returns the halved scale), and give the first step that
    fits, without fp16's own state (`amp.*`)."""
    if dtype != "fp16":
        return run(args)
    scale = 2.0**16
    for _ in range(24):
        state = {"amp.scale": np.float32(scale), "amp.growth_tracker": np.float32(0.0)}
        with np.errstate(invalid="ignore", over="ignore"):  # an overflowing product: inf - inf
            out = run(dict(args, **state))
        if float(out["amp.scale"]) == scale:
            return {n: v for n, v in out.items() if not n.startswith("amp.")}
        assert float(out["amp.scale"]) == scale / 2, (scale, out["amp.scale"])
        scale /= 2
    raise AssertionError(f"the step overflows fp16 at every scale down to {scale}")


def outputs_agree(want: Values, got: Values) -> dict[str, float]:
    assert set(got) == set(want)
    return {n: rel_err(got[n], v) for n, v in want.items() if np.issubdtype(v.dtype, np.floating)}


def run_numpy(text: str, dtype: str) -> Callable[[Values], Values]:
    module = run_pipeline(parse_module(text), f"aicfc-train-pipeline{{precision={dtype}}}")
    loaded = LoadedFunction.load(module, None, "numpy")

    def run(args: Values) -> Values:
        return loaded.results(loaded.run(loaded.set_values(args)))

    return run


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("seed", SEEDS)
def test_low_precision_step_matches_the_fp32_step(seed: int, dtype: str) -> None:
    text, classes = random_step(random.Random(seed), dtype="f32")
    args = random_arguments(text, np.random.default_rng(seed), classes)
    want = interpret(text, FUSED, args)
    got = backing_off(dtype, lambda a: interpret(text, autocast(dtype), a), args)
    for name, err in outputs_agree(want, got).items():
        assert err <= TOL[dtype], f"seed {seed}, interpreter: {name} rel err {err:.3g}\n{text}"
    ran = backing_off(dtype, run_numpy(text, dtype), args)
    ran = {n: v for n, v in ran.items() if n in want}
    for name, err in outputs_agree(want, ran).items():
        assert err <= TOL[dtype], f"seed {seed}, NumPy runtime: {name} rel err {err:.3g}\n{text}"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_low_precision_program_rounds_where_products_run(dtype: str) -> None:
    errors = []
    for seed in SEEDS:
        text, classes = random_step(random.Random(seed), dtype="f32")
        if "graph.matmul" not in text and "graph.gemm_epilogue" not in text:
            continue
        args = random_arguments(text, np.random.default_rng(seed), classes)
        got = backing_off(dtype, lambda a, t=text: interpret(t, autocast(dtype), a), args)
        errs = outputs_agree(interpret(text, FUSED, args), got)
        errors.append(max(errs.values()))
    assert len(errors) >= 20
    # most steps with a product show the low dtype's rounding (some products feed nothing
    # that is returned, or only exactly representable values): an error above 1/16 of a
    # unit roundoff, which float32's own reassociation (2^-24) does not reach
    assert sum(e > UNIT[dtype] / 16 for e in errors) >= len(errors) // 2, errors
