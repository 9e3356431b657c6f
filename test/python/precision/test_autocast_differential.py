"""aicfc-autocast, differential: on random train steps (regressions/random_steps.py) the
bf16 program computes what the fp32 program computes, within bf16's precision.

For each seed, the f32 step runs through the fused pipeline with and without
aicfc-autocast{dtype=bf16}, in the interpreter (runtime/reference.py) and, lowered with
aicfc-train-pipeline{precision=bf16}, on the NumPy runtime; every output (loss, the
gradients, SGD's next params, intermediates) is compared with the fp32 program's by
relative error (max |bf16 - fp32| / max |fp32|). bf16 keeps 8 significant bits (unit
roundoff 2^-8 = 0.0039); each value below passes through at most ~10 rounded ops and
their gradients, so the tolerance is 0.05 (about 13 roundings' worth; the largest seen
on these seeds is 0.031). The second test checks that the comparison is not vacuous: where
a step has products, the bf16 program really rounds (it is not the fp32 program again).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from aicfc.execute import LoadedFunction, run_pipeline
from aicfc.ir import parse_module
from regressions.random_steps import random_step
from regressions.test_unusual_graphs import interpret, random_arguments
from support import rel_err

TOL = 0.05
FUSED = "aicfc-fuse,aicfc-expand-backward,aicfc-fuse,canonicalize,aicfc-fold-constants,cse"
AUTOCAST = (
    "aicfc-fuse,aicfc-autocast{dtype=bf16},aicfc-expand-backward,aicfc-fuse,canonicalize,"
    "aicfc-fold-constants,cse"
)
SEEDS = range(40)


def outputs_agree(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, float]:
    assert set(got) == set(want)
    return {n: rel_err(got[n], v) for n, v in want.items() if np.issubdtype(v.dtype, np.floating)}


@pytest.mark.parametrize("seed", SEEDS)
def test_bf16_step_matches_the_fp32_step(seed: int) -> None:
    text, classes = random_step(random.Random(seed), dtype="f32")
    args = random_arguments(text, np.random.default_rng(seed), classes)
    want = interpret(text, FUSED, args)
    got = interpret(text, AUTOCAST, args)
    for name, err in outputs_agree(want, got).items():
        assert err <= TOL, f"seed {seed}, interpreter: {name} rel err {err:.3g}\n{text}"
    module = run_pipeline(parse_module(text), "aicfc-train-pipeline{precision=bf16}")
    loaded = LoadedFunction.load(module, None, "numpy")
    feed = loaded.set_values(args)
    ran = loaded.results(loaded.run(feed))
    ran = {n: v for n, v in ran.items() if n in want}
    for name, err in outputs_agree(want, ran).items():
        assert err <= TOL, f"seed {seed}, NumPy runtime: {name} rel err {err:.3g}\n{text}"


def test_the_bf16_program_rounds_where_products_run() -> None:
    errors = []
    for seed in SEEDS:
        text, classes = random_step(random.Random(seed), dtype="f32")
        if "graph.matmul" not in text and "graph.gemm_epilogue" not in text:
            continue
        args = random_arguments(text, np.random.default_rng(seed), classes)
        errs = outputs_agree(interpret(text, FUSED, args), interpret(text, AUTOCAST, args))
        errors.append(max(errs.values()))
    assert len(errors) >= 20
    # most steps with a product show bf16 rounding (some products feed nothing that is
    # returned, or only exactly representable values)
    assert sum(e > 2.0**-12 for e in errors) >= len(errors) // 2, errors
