"""Autotuning: time every feasible GEMM kernel of a loaded program, remember the fastest.

The cache is runtime/selector.py's `AutotuneCache` (a JSON file keyed by op,
shape bucket, dtype and device, seed 003 §3). `tune_executable` walks the GEMM
launches of a `CupyExecutable`, and for each (op, bucket) it has not seen
times every candidate the selector would accept on this device (on random
inputs of the launch's shapes, in its own buffers, so the program's state is
untouched) and records the fastest. A backend created with
`CupyBackend(autotune_cache=path)` then prefers the recorded kernel wherever
it is feasible.

Timing: CUDA events around `repeats` back-to-back launches after 3 warm-up
launches; the figure is the median of 3 such batches divided by `repeats`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicfc.runtime import registry
from aicfc.runtime.backend import LaunchStep
from aicfc.runtime.cuda_abi import CudaKernelError
from aicfc.runtime.cuda_launch import launches_for
from aicfc.runtime.selector import AutotuneCache, Problem, refusal, shape_bucket


@dataclass(frozen=True)
class TuneResult:
    """The measured candidates of one (op, shape bucket): seconds per launch, by kernel."""

    op: str
    bucket: str
    kernel: str
    seconds: dict[str, float]


def time_launches(launches: list[Any], stream: Any, repeats: int) -> float:
    """Median seconds of one pass over `launches` (3 batches of `repeats` after a warm-up)."""
    import cupy

    for _ in range(3):
        for la in launches:
            la(stream)
    samples = []
    for _ in range(3):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(repeats):
            for la in launches:
                la(stream)
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / repeats)
    return statistics.median(samples)


def feasible(backend: Any, problem: Problem) -> list[registry.KernelSpec]:
    """The CUDA candidates for `problem` that the selector would accept on this device."""
    cap = backend.capability()
    return [
        k for k in backend.candidates() if k.op == problem.op and refusal(k, problem, cap) is None
    ]


def _random_like(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> Any:
    import cupy

    return cupy.asarray(rng.standard_normal(shape).astype(dtype))


def tune_problem(exe: Any, problem: Problem, repeats: int) -> dict[str, float]:
    """Seconds per launch of every feasible kernel for `problem` (failures are skipped)."""
    import cupy

    rng = np.random.default_rng(0)
    dtype = np.dtype(np.float32)
    ins = [_random_like(s, dtype, rng) for s in problem.input_shapes]
    outs = [cupy.empty(s, dtype) for s in problem.output_shapes]
    times: dict[str, float] = {}
    stream = exe.backend.stream
    for spec in feasible(exe.backend, problem):
        try:
            launches = launches_for(spec, ins, outs, problem.params, exe)
            times[spec.name] = time_launches(launches, stream, repeats)
        except CudaKernelError:
            continue
    return times


def tune_executable(exe: Any, cache_path: str, repeats: int = 20) -> list[TuneResult]:
    """Time the GEMM candidates of every GEMM launch of `exe`; record and save the fastest.

    exe: a CupyExecutable (runtime/cupy_backend.py). Returns one TuneResult per
    (op, shape bucket) measured. Raises ValueError for a malformed cache file.
    """
    from aicfc.runtime.cupy_backend import RESELECT_OPS

    backend = exe.backend
    cache = AutotuneCache(cache_path)
    seen: set[str] = set()
    results: list[TuneResult] = []
    for step in exe.plan.steps:
        if not isinstance(step, LaunchStep):
            continue
        spec = registry.get(step.kernel)
        if spec.op not in RESELECT_OPS:
            continue
        problem = exe._problem(spec, step)
        key = AutotuneCache.key(problem, backend.device_key)
        if key in seen:
            continue
        seen.add(key)
        times = tune_problem(exe, problem, repeats)
        if not times:
            continue
        best = min(times, key=lambda k: times[k])
        cache.record(problem, backend.device_key, best)
        results.append(TuneResult(problem.op, shape_bucket(problem), best, times))
    backend.synchronize()
    cache.save(cache_path)
    return results
