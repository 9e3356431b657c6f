"""Autotuning: time every feasible GEMM kernel of a loaded program, remember the fastest.

The cache is runtime/selector.py's `AutotuneCache` (a JSON file keyed by op,
shape bucket, dtype and device; docs/design.md#kernel-selection). `tune_executable` walks the GEMM
launches of a `CupyExecutable`, and for each (op, bucket) it has not seen
times every candidate the selector would accept on this device (on random
inputs of the launch's shapes, in its own buffers, so the program's state is
untouched) and records the fastest. A backend created with
`CupyBackend(autotune_cache=path)` then prefers the recorded kernel wherever
it is feasible.

The recorded choice lives in the compiled IR: aicfc-lower-exec reads the cache
(the backend passes its path), so `Program.mlir("exec")` names the tuned kernel,
and keys carry " tf32" when TF32 kernels took part (`selector.autotune_device`).

Timing: `repeats` back-to-back launches captured in one CUDA graph (so a
launch's figure is its device time, not Python's launch rate), after 3 eager
warm-up launches; CUDA events around each graph replay; the median of 3
replays divided by `repeats`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError
from aicfc.runtime.cuda.capture import capture
from aicfc.runtime.cuda.context import DeviceContext
from aicfc.runtime.cuda.launch import launches_for
from aicfc.runtime.plan import LaunchStep
from aicfc.runtime.registry_cuda import GEMM_OPS
from aicfc.runtime.selector import AutotuneCache, Problem, autotune_device, refusal, shape_bucket


@dataclass(frozen=True)
class TuneResult:
    """The measured candidates of one (op, shape bucket): seconds per launch, by kernel."""

    op: str
    bucket: str
    kernel: str
    seconds: dict[str, float]


def time_launches(launches: list[Any], stream: Any, repeats: int) -> float:
    """Median seconds of one pass over `launches`, replayed `repeats` times in a CUDA graph."""
    import cupy

    for _ in range(3):
        for la in launches:
            la(stream)
    stream.synchronize()

    def body(s: Any) -> None:
        for _ in range(repeats):
            for la in launches:
                la(s)

    graph = capture(body, stream, "autotune")
    graph.launch(stream)
    samples = []
    for _ in range(3):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        graph.launch(stream)
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / repeats)
    return statistics.median(samples)


def feasible(backend: Any, problem: Problem, tf32: bool | None = None) -> list[registry.KernelSpec]:
    """The CUDA candidates for `problem` that the selector would accept on this device
    (TF32 kernels when `tf32`, None: the backend's setting)."""
    cap = backend.capability() if tf32 is None else {**backend.capability(), "tf32": tf32}
    return [
        k for k in backend.candidates() if k.op == problem.op and refusal(k, problem, cap) is None
    ]


def _random_like(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> Any:
    import cupy

    return cupy.asarray(rng.standard_normal(shape).astype(dtype))


def tune_problem(
    exe: Any, problem: Problem, repeats: int, tf32: bool | None = None
) -> dict[str, float]:
    """Seconds per launch of every feasible kernel for `problem` (failures are skipped)."""
    import cupy

    rng = np.random.default_rng(0)
    dtype = np.dtype(np.float32)
    ins = [_random_like(s, dtype, rng) for s in problem.input_shapes]
    outs = [cupy.empty(s, dtype) for s in problem.output_shapes]
    times: dict[str, float] = {}
    stream = exe.backend.stream
    # Its own context: the candidates' workspaces are freed with it, not kept with `exe`.
    ctx = DeviceContext(exe.backend.sm_count, exe.backend.cublaslt)
    for spec in feasible(exe.backend, problem, tf32):
        try:
            launches = launches_for(spec, ins, outs, problem.params, ctx)
            times[spec.name] = time_launches(launches, stream, repeats)
        except CudaKernelError:
            continue
    return times


def tune_executable(
    exe: Any, cache_path: str, repeats: int = 20, tf32: bool | None = None
) -> list[TuneResult]:
    """Time the GEMM candidates of every GEMM launch of `exe`; record and save the fastest.

    exe: a CupyExecutable (runtime/cuda/backend.py). tf32: whether TF32 kernels
    compete (None: the backend's setting). Returns one TuneResult per (op, shape
    bucket) measured. A malformed cache file is ignored with a warning and rewritten;
    the save merges with entries other processes saved meanwhile (AutotuneCache.save).
    """
    backend = exe.backend
    allow = backend.tf32 if tf32 is None else tf32
    device = autotune_device(backend.device_key, {"tf32": allow})
    cache = AutotuneCache(cache_path)
    seen: set[str] = set()
    results: list[TuneResult] = []
    for step in exe.plan.steps:
        if not isinstance(step, LaunchStep):
            continue
        spec = registry.get(step.kernel)
        if spec.op not in GEMM_OPS:
            continue
        problem = exe._problem(spec, step)
        key = AutotuneCache.key(problem, device)
        if key in seen:
            continue
        seen.add(key)
        times = tune_problem(exe, problem, repeats, allow)
        if not times:
            continue
        best = min(times, key=lambda k: times[k])
        cache.record(problem, device, best)
        results.append(TuneResult(problem.op, shape_bucket(problem), best, times))
    backend.synchronize()
    cache.save(cache_path)
    return results
