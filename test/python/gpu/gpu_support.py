"""Shared helpers of the GPU tests: the skip reason, the error metric, random data.

GPU tests carry `@pytest.mark.gpu` (registered in pyproject.toml) and are
skipped, with the reason, where CuPy is missing or sees no CUDA device
(`CupyBackend.unavailable_reason()`); they run on the lent GPU machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aicfc.runtime.cuda.backend import CupyBackend

REASON = CupyBackend.unavailable_reason()

gpu = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
"""`pytestmark = gpu` in a module of GPU tests."""

F32_TOL = 1e-5
"""Norm-wise relative error allowed for strict fp32 kernels against a float64 reference."""

TF32_TOL = 2e-3
"""Norm-wise relative error allowed for TF32 tensor-core GEMMs (10-bit mantissa inputs)."""


def per_layer(prog: Any) -> Any:
    """`prog` (not compiled yet) with its pipeline less aicfc-fuse-train-step: the
    per-layer kernels of a small MLP, for tests of their launches, schedule and selection
    (the default pipeline has no fused step; this keeps them so if it ever has one).
    A test's override of the pipeline, not an API."""
    prog._steps = tuple(s for s in prog._steps if s.stage != "fused-step")
    return prog


def with_fused_step(prog: Any) -> Any:
    """`prog` (not compiled yet) with aicfc-fuse-train-step after "canonical", as
    train_pipeline(fuse_train_step=True) places it (not in the default pipeline)."""
    from aicfc.passes.pipelines import Step, stage_names

    steps = []
    for s in prog._steps:
        steps.append(s)
        if s.stage == "canonical":
            steps.append(Step("fused-step", "aicfc-fuse-train-step{backend=cuda}"))
    prog._steps = tuple(steps)
    prog.stages = stage_names(prog._steps)
    return prog


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64 (inf when `out` has a NaN: poisoned, unwritten)."""
    out64 = np.asarray(out, dtype=np.float64)
    ref64 = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out64).all():
        return float("inf")
    denom = np.linalg.norm(ref64)
    return float(np.linalg.norm(out64 - ref64) / (denom if denom else 1.0))


def randn(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)
