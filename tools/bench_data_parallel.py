"""The data-parallel scaling table: samples/s on 1..N GPUs of one host (weak scaling).

    python tools/bench_data_parallel.py --nprocs 1,2 --config medium [--json dp.json]

For each N the tool starts N ranks with the launcher (`python -m aicfc.distributed
--nproc N`, NCCL_NVLS_ENABLE=0), each training the config's MLP (tools/bench_train_step.py
CONFIGS: medium is batch 1024 per GPU, 1024-4096-4096-1024, cross-entropy, Adam, fp32) with
`aicfc.compile(..., data_parallel=True)`: the per-GPU batch stays the config's, so the
global batch is N times it. Rank 0 times `Executable.replay()` of the captured step (the
median of 5 batches of `steps` replays, CUDA events on the backend's stream; the ranks
run in lockstep through NCCL) and the all-reduce alone: every bucket of the step's
exec.all_reduce launches, back to back on the communication stream. One more run, one
process without the pass (`--single`), is the baseline. The table gives, per N:

    step ms, samples/s (N * batch / step), speed-up over the baseline, efficiency
    (speed-up / N), all-reduce ms (alone), exposed ms (step - baseline step) and
    hidden % (1 - exposed / all-reduce alone: how much of the communication the
    backward covered)

The issue's target: 2 GPUs at least 1.8x one GPU's samples/s on the medium config.
Not a test: a tool that prints a table. Needs a GPU machine with N GPUs and NCCL.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from aicfc.runtime.files import write_text


def worker(config: str, single: bool, out: str, bucket_mb: float) -> int:
    """One rank (or the baseline): time the replayed step and, with the pass, the
    all-reduce alone; rank 0 writes the result as JSON to `out`."""
    import cupy

    from aicfc import distributed, optim
    from aicfc.program import Program
    from aicfc.runtime.plan import CollectiveStep
    from aicfc.tools.bench_train_step import CONFIGS, LR, cupy_timer, mlp_model, steps_for

    batch, widths = CONFIGS[config]
    model = mlp_model(widths)
    if single:
        from aicfc.runtime.cuda.backend import CupyBackend

        prog = Program(model, "cross_entropy", optim.Adam(lr=LR), CupyBackend())
        rank, world = 0, 1
    else:
        dp = distributed.DataParallel(bucket_mb=bucket_mb)
        prog = aicfc_compile(model, optim.Adam(lr=LR), dp)
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rng = cupy.random.default_rng(rank)
    x = rng.standard_normal((batch, widths[0]), dtype=cupy.float32)
    y = rng.integers(0, widths[-1], batch).astype(cupy.int32)
    for _ in range(3):  # compile, warm up (eager), capture
        prog.step(x, y, sync=False)
    exe: Any = prog.executable()  # a CupyExecutable (replay, arrays)
    backend: Any = prog.backend  # a CupyBackend (stream, comm_stream)
    stream = backend.stream
    steps = steps_for(config)
    samples = cupy_timer(lambda: exe.replay(1), stream, steps)
    result: dict[str, Any] = {
        "world_size": world,
        "batch_per_gpu": batch,
        "step_seconds": statistics.median(samples),
        "samples": samples,
        "buckets": [],
    }
    comm = prog.backend.communicator
    buckets = [exe.arrays[s.bucket] for s in exe.plan.steps if isinstance(s, CollectiveStep)]
    if comm is not None and buckets:
        comm_stream = backend.comm_stream()

        def all_reduces() -> None:
            for b in buckets:
                comm.all_reduce(b, "mean", comm_stream)

        result["allreduce_seconds"] = statistics.median(cupy_timer(all_reduces, comm_stream, steps))
        result["buckets"] = [int(b.nbytes) for b in buckets]
    if rank == 0:
        write_text(out, json.dumps(result, indent=1))
    return 0


def aicfc_compile(model: Any, opt: Any, dp: Any) -> Any:
    import aicfc

    return aicfc.compile(model, optimizer=opt, backend="cupy", data_parallel=dp)


def run_one(config: str, nproc: int | None, bucket_mb: float, timeout: float) -> dict[str, Any]:
    """Launch `nproc` ranks (None: the single-process baseline); their result."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        me = [__file__, "--worker", "--config", config, "--bucket-mb", str(bucket_mb), "--out", out]
        if nproc is None:
            cmd = [sys.executable, *me, "--single"]
        else:
            cmd = [sys.executable, "-m", "aicfc.distributed", "--nproc", str(nproc), *me]
        env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
        r = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(Path(out).read_text())
        return result


def table(base: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    head = (
        "| GPUs | batch/GPU | step ms | samples/s | speed-up | efficiency "
        "| all-reduce ms | exposed ms | hidden % |"
    )
    lines = [head, "|" + "---|" * 9]
    t1 = base["step_seconds"]
    for r in rows:
        n, t = r["world_size"], r["step_seconds"]
        rate = n * r["batch_per_gpu"] / t
        speed = rate / (base["batch_per_gpu"] / t1)
        comm = r.get("allreduce_seconds")
        exposed = t - t1
        comm_ms = f"{1e3 * comm:.3f}" if comm else "-"
        hidden = f"{100 * (1 - exposed / comm):.0f}" if comm else "-"
        lines.append(
            f"| {n} | {r['batch_per_gpu']} | {1e3 * t:.3f} | {rate:,.0f} | {speed:.2f}x "
            f"| {speed / n:.2f} | {comm_ms} | {1e3 * exposed:.3f} | {hidden} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nprocs", default="1,2", help="world sizes to run, comma-separated")
    p.add_argument("--config", default="medium", choices=("small", "medium", "large"))
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.config, args.single, args.out, args.bucket_mb)
    sizes = [int(n) for n in args.nprocs.split(",")]
    base = run_one(args.config, None, args.bucket_mb, args.timeout)
    rows = [run_one(args.config, n, args.bucket_mb, args.timeout) for n in sizes]
    print(f"{args.config}: baseline (1 GPU, no all-reduce) {1e3 * base['step_seconds']:.3f} ms")
    print(table(base, rows))
    if args.json:
        write_text(args.json, json.dumps({"baseline": base, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
