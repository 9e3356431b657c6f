"""Per-step latency of a train step on the CPU: aicfc's NumPy backend vs PyTorch CPU.

    python tools/bench_cpu.py [--configs digits,mnist,wide,gpt-tiny] [--threads N] [--runs 9]
        [--frameworks aicfc,aicfc-reference,torch-eager,torch-fused,torch-compile]
        [--profile] [--json out.json]

Configurations (batch, layer widths; ReLU between Linear layers; softmax
cross-entropy; Adam, lr 1e-3):
    digits  64,  64-128-128-10      (the README's digits MLP)
    mnist   128, 784-256-256-10
    wide    256, 1024-1024-1024-10
and one GPT (aicfc.models.GPT against tools/bench_gpt_step.py's nanoGPT module, its
`init_weights` and its batch of random token ids; AdamW lr 1e-3, weight decay 0.1 on
every parameter, dropout 0):
    gpt-tiny  batch 32, T 64, 2 layers, d_model 128, 4 heads, vocabulary 96 (the
              character corpus of examples/train_char_gpt.py)
`KINDS` maps a config's kind to its models, data and optimizers.

Frameworks, one process, the same data and initial weights, the same thread count
(NumPy's BLAS through threadpoolctl and torch.set_num_threads, both `--threads`,
default: the cores this process may use):
    aicfc            aicfc.Program on NumpyBackend(): the `_out` kernels
                     (runtime/registry_numpy.py), timed as `Executable.run` (the input
                     copies, every launch, the loss copied out); the `Program.step`
                     column adds the API's checks of x and y and float(loss)
    aicfc-reference  the same program on NumpyBackend(reference=True): every launch on
                     its op's reference function (what the backend ran before the
                     `_out` kernels)
    torch-eager      torch.nn + F.cross_entropy + torch.optim.Adam (AdamW for the GPT;
                     its CPU default: the single-tensor loop)
    torch-fused      the same with fused=True (one fused CPU kernel)
    torch-compile    torch.compile(model) (inductor, C++ on the CPU) with the eager optimizer;
                     the compile time is reported, and a compile that fails or runs past
                     --compile-limit seconds is reported as such

Timing: after warm-up, `--runs` rounds; each round times `steps` consecutive steps of
every framework in turn (round-robin, so a change in the machine's load hits all of
them alike); the table shows the median round, per step. `vs eager` divides by
torch-eager's median. `cpu us` is the process's CPU time per step (time.process_time,
every thread), the median round: on a machine shared past its cores the wall time
mostly measures the wait for a core, the CPU time the work. `loss 1` is the first
step's loss (the same weights and batch: equal across frameworks to float32
rounding). `alloc` is the tracemalloc peak above the level before one warmed-up
`Executable.run` (NumPy's arrays and Python objects; torch's CPU allocator is
invisible to tracemalloc) and the bytes still held after it. The load average is
printed before and after: the machine is shared.

`--profile` prints, for each config, the aicfc step's time per kernel (each bound step
timed alone, median over rounds) beside torch-eager's top operators by self CPU time
(torch.profiler), to say where a slower row loses.

Not a test: a tool that prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicfc.models.text import VOCAB
from aicfc.runtime.files import write_text
from aicfc.tools import bench_gpt_step as gpt_step
from aicfc.tools.bench_train_step import init_weights
from aicfc.tools.bench_train_step import make_data as train_step_data

LR = 1e-3
GPT_WEIGHT_DECAY = 0.1
FRAMEWORKS = ("aicfc", "aicfc-reference", "torch-eager", "torch-fused", "torch-compile")


@dataclass(frozen=True)
class Config:
    """A benchmark configuration: `kind` selects its builders (KINDS); an MLP's layer
    widths, or a GPT's shape (tools/bench_gpt_step.py's Config)."""

    batch: int
    widths: tuple[int, ...] = ()
    kind: str = "mlp"
    steps: int = 20
    """Steps per timed round."""
    gpt: Any = None


CONFIGS: dict[str, Config] = {
    "digits": Config(64, (64, 128, 128, 10), steps=200),
    "mnist": Config(128, (784, 256, 256, 10), steps=40),
    "wide": Config(256, (1024, 1024, 1024, 10), steps=8),
    "gpt-tiny": Config(32, kind="gpt", steps=2, gpt=gpt_step.Config(2, 128, 4, 64, 32, len(VOCAB))),
}


def mlp_data(config: Config) -> tuple[np.ndarray, np.ndarray]:
    """tools/bench_train_step.py's batch (labels int64, as torch takes them)."""
    x, y = train_step_data(config.batch, config.widths)
    return x, y.astype(np.int64)


def gpt_data(config: Config) -> tuple[np.ndarray, np.ndarray]:
    """tools/bench_gpt_step.py's token ids [B, T] and next-token targets (int64)."""
    x, y = gpt_step.make_batch(config.gpt)
    return x.astype(np.int64), y.astype(np.int64)


# ----------------------------------------------------------------------------
# Model builders by kind
# ----------------------------------------------------------------------------


def aicfc_mlp(config: Config) -> Any:
    from aicfc import nn

    layers: list[Any] = []
    weights = init_weights(config.widths)
    for i, (w, b) in enumerate(weights):
        lin = nn.Linear(w.shape[1], w.shape[0])
        lin.load_state_dict({"weight": w, "bias": b})
        layers.append(lin)
        if i < len(weights) - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def torch_mlp(config: Config) -> Any:
    import torch

    layers: list[Any] = []
    weights = init_weights(config.widths)
    for i, (w, b) in enumerate(weights):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < len(weights) - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def aicfc_gpt(config: Config) -> Any:
    from aicfc.models.gpt import GPT, GPTConfig

    c = config.gpt
    return GPT(GPTConfig(c.vocab, c.block, c.layers, c.heads, c.d_model, 0.0, True))


def torch_gpt(config: Config) -> Any:
    return gpt_step.torch_gpt(config.gpt, 0.0, device="cpu")


@dataclass(frozen=True)
class Kind:
    """How a kind of config builds its models (from the same initial weights), data and
    optimizers: `weights` is None where the aicfc model's builder loads them itself."""

    aicfc_model: Callable[[Config], Any]
    torch_model: Callable[[Config], Any]
    data: Callable[[Config], tuple[np.ndarray, np.ndarray]]
    weights: Callable[[Config], dict[str, np.ndarray]] | None
    weight_decay: float
    """0: Adam; otherwise AdamW with this decoupled weight decay on every parameter."""
    torch_takes_targets: bool
    """The torch module's forward(x, y) returns the loss (else F.cross_entropy(net(x), y))."""


KINDS: dict[str, Kind] = {
    "mlp": Kind(aicfc_mlp, torch_mlp, mlp_data, None, 0.0, False),
    "gpt": Kind(
        aicfc_gpt,
        torch_gpt,
        gpt_data,
        lambda c: gpt_step.init_weights(c.gpt),
        GPT_WEIGHT_DECAY,
        True,
    ),
}


# ----------------------------------------------------------------------------
# Step functions: each framework returns a zero-argument step, warmed up
# ----------------------------------------------------------------------------


@dataclass
class Bench:
    """A framework's warmed-up step and what it reports beside its time."""

    step: Callable[[], Any]
    extra: dict[str, Any]


def aicfc_bench(config: Config, reference: bool) -> Bench:
    from aicfc import optim
    from aicfc.program import Program
    from aicfc.runtime.numpy.backend import NumpyBackend

    kind = KINDS[config.kind]
    x, y = kind.data(config)
    model = kind.aicfc_model(config)
    backend = NumpyBackend(reference=True) if reference else NumpyBackend()  # (runs on older trees)
    wd = kind.weight_decay
    opt = optim.AdamW(lr=LR, weight_decay=wd) if wd else optim.Adam(lr=LR)
    prog = Program(model, "cross_entropy", opt, backend)
    if kind.weights is not None:
        prog.load_state_dict(kind.weights(config), strict=False)
    first_loss = float(prog.step(x, y))
    for _ in range(2):
        prog.step(x, y)
    exe: Any = prog.executable()  # a NumpyExecutable (its `runs`, `plan`, `steps`)
    inputs = {k: v.astype(exe.inputs[k].dtype) for k, v in (("x", x), ("y", y))}
    t0 = time.perf_counter()
    for _ in range(config.steps):
        prog.step(x, y)
    api = (time.perf_counter() - t0) / config.steps
    extra = {
        "program_step_seconds": api,
        "alloc": allocations(lambda: exe.run(inputs)),
        "first_loss": first_loss,
    }
    runs = getattr(exe, "runs", None)  # what each step runs (absent before the _out kernels)
    if runs is not None:
        extra["bound"] = sum(r not in ("reference", "copy") for r in runs)
        extra["launches"] = len(runs)
    extra["executable"] = exe
    extra["inputs"] = inputs
    return Bench(lambda: exe.run(inputs), extra)


def torch_bench(config: Config, mode: str, compile_limit: float) -> Bench:
    import torch
    import torch.nn.functional as F

    kind = KINDS[config.kind]
    xn, yn = kind.data(config)
    x, y = torch.from_numpy(xn), torch.from_numpy(yn)
    model = kind.torch_model(config)
    fused, wd = mode == "fused", kind.weight_decay
    opt: Any = (
        torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=wd, fused=fused)
        if wd
        else torch.optim.Adam(model.parameters(), lr=LR, fused=fused)
    )
    net = torch.compile(model) if mode == "compile" else model

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        loss: Any = net(x, y) if kind.torch_takes_targets else F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    extra: dict[str, Any] = {}
    t0 = time.perf_counter()
    first = step()  # compiles for torch-compile
    extra["first_step_seconds"] = time.perf_counter() - t0
    extra["first_loss"] = float(first.detach())
    if mode == "compile" and extra["first_step_seconds"] > compile_limit:
        raise TimeoutError(
            f"compiling took {extra['first_step_seconds']:.0f} s, past --compile-limit"
        )
    for _ in range(3):
        step()
    return Bench(step, extra)


def allocations(fn: Callable[[], Any]) -> dict[str, int]:
    """tracemalloc's peak above the level before one call of `fn`, and what it kept."""
    fn()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        fn()
        end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"peak_bytes": peak - start, "kept_bytes": end - start}


def make_bench(fw: str, config: Config, compile_limit: float) -> Bench:
    if fw == "aicfc":
        return aicfc_bench(config, reference=False)
    if fw == "aicfc-reference":
        return aicfc_bench(config, reference=True)
    mode = {"torch-eager": "eager", "torch-fused": "fused", "torch-compile": "compile"}[fw]
    return torch_bench(config, mode, compile_limit)


def time_round_robin(
    benches: dict[str, Bench], steps: int, runs: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU (this process's, every thread) seconds per step of each bench, one
    sample of each per round, frameworks in turn."""
    samples: dict[str, tuple[list[float], list[float]]] = {fw: ([], []) for fw in benches}
    for _ in range(runs):
        for fw, bench in benches.items():
            step = bench.step
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            samples[fw][0].append((time.perf_counter() - t0) / steps)
            samples[fw][1].append((time.process_time() - c0) / steps)
    return samples


# ----------------------------------------------------------------------------
# Profiles
# ----------------------------------------------------------------------------


def profile_aicfc(exe: Any, inputs: dict[str, np.ndarray], rounds: int) -> list[tuple[str, float]]:
    """Median microseconds per step of each kind of launch (kernel and its shapes), in
    program order of first appearance, plus the rest of `run` (input copies, the loop,
    the loss copy) as "run() outside the kernels"."""
    labels = []
    for s, runs in zip(exe.plan.steps, exe.runs, strict=True):
        if runs == "copy":
            labels.append("exec.copy")
            continue
        shapes = "x".join(str(d) for d in exe.arrays[s.outputs[0]].shape) or "scalar"
        where = " [reference]" if runs == "reference" else ""
        labels.append(f"{s.kernel}{where} -> {shapes}")
    per_round: dict[str, list[float]] = defaultdict(list)
    whole: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        exe.run(inputs)
        whole.append(time.perf_counter() - t0)
        times: dict[str, float] = defaultdict(float)
        for label, step in zip(labels, exe.steps, strict=True):
            t1 = time.perf_counter()
            step()
            times[label] += time.perf_counter() - t1
        for label, t in times.items():
            per_round[label].append(t)
    rows = [(label, statistics.median(ts) * 1e6) for label, ts in per_round.items()]
    rest = statistics.median(whole) * 1e6 - sum(us for _, us in rows)
    return [*rows, ("run() outside the kernels", rest)]


def profile_torch(bench: Bench, steps: int, top: int = 12) -> list[tuple[str, float]]:
    """torch's operators by self CPU time, microseconds per step (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            bench.step()
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    return [(e.key, e.self_cpu_time_total / steps) for e in events[:top]]


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def fmt_bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--runs", type=int, default=9, help="timed rounds (the median is shown)")
    parser.add_argument("--compile-limit", type=float, default=300.0, help="seconds")
    parser.add_argument("--profile", action="store_true", help="per-kernel times as well")
    parser.add_argument("--json", help="write all numbers to this JSON file")
    args = parser.parse_args(argv)

    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    torch.set_num_threads(args.threads)
    results: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with threadpool_limits(limits=args.threads):
        libs = ", ".join(
            f"{p['internal_api']} {p.get('version') or ''} x{p['num_threads']}"
            for p in threadpool_info()
        )
        print(f"threads: {args.threads} (torch {torch.get_num_threads()}; {libs})")
        print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}", flush=True)
        for name in args.configs.split(","):
            config = CONFIGS[name]
            benches: dict[str, Bench] = {}
            errors: dict[str, str] = {}
            for fw in args.frameworks.split(","):
                try:
                    benches[fw] = make_bench(fw, config, args.compile_limit)
                except Exception as e:  # a framework that fails is reported, not fatal
                    errors[fw] = f"{type(e).__name__}: {e}"
                    traceback.print_exc()
            samples = time_round_robin(benches, config.steps, args.runs)
            for fw in args.frameworks.split(","):
                row: dict[str, Any] = {"config": name, "framework": fw, "threads": args.threads}
                if fw in errors:
                    row["error"] = errors[fw]
                else:
                    extra = benches[fw].extra
                    row.update(
                        {k: v for k, v in extra.items() if k not in ("executable", "inputs")}
                    )
                    row["samples"], row["cpu_samples"] = samples[fw]
                    row["seconds"] = statistics.median(samples[fw][0])
                    row["cpu_seconds"] = statistics.median(samples[fw][1])
                results.append(row)
                status = row.get("error") or f"{row['seconds'] * 1e6:.1f} us"
                print(f"[{name} {fw}] {status}", flush=True)
            if args.profile and "aicfc" in benches:
                exe, inputs = benches["aicfc"].extra["executable"], benches["aicfc"].extra["inputs"]
                print(f"aicfc {name}: time per kernel, us per step (median of {args.runs * 3})")
                for label, us in profile_aicfc(exe, inputs, args.runs * 3):
                    print(f"  {us:10.1f}  {label}")
            if args.profile and "torch-eager" in benches:
                print(f"torch-eager {name}: top operators by self CPU time, us per step")
                for key, us in profile_torch(benches["torch-eager"], config.steps):
                    print(f"  {us:10.1f}  {key}")
    load_after = os.getloadavg()
    print(f"load average after: {' '.join(f'{v:.2f}' for v in load_after)}")
    if args.json:
        write_text(
            args.json, json.dumps({"load": [load_before, load_after], "rows": results}, indent=1)
        )  # atomically
    print()
    print(
        f"{'config':>8} {'framework':>16} {'us/step':>9} {'vs eager':>8} {'cpu us':>9} "
        f"{'cpu vs':>6} {'Program.step':>12} {'alloc peak':>11} {'kept':>7} {'loss 1':>8}  note"
    )
    for name in args.configs.split(","):
        rows = [r for r in results if r["config"] == name]
        eager_row = next(
            (r for r in rows if r["framework"] == "torch-eager" and "seconds" in r), None
        )
        eager = eager_row["seconds"] if eager_row else None
        eager_cpu = eager_row["cpu_seconds"] if eager_row else None
        for r in rows:
            if "seconds" not in r:
                print(f"{name:>8} {r['framework']:>16}  {r['error'][:80]}")
                continue
            ratio = f"{r['seconds'] / eager:8.2f}" if eager else " " * 8
            cpu_ratio = f"{r['cpu_seconds'] / eager_cpu:6.2f}" if eager_cpu else " " * 6
            api = (
                f"{r['program_step_seconds'] * 1e6:12.1f}"
                if "program_step_seconds" in r
                else " " * 12
            )
            alloc = r.get("alloc")
            peak = f"{fmt_bytes(alloc['peak_bytes']):>11}" if alloc else f"{'n/a':>11}"
            kept = f"{fmt_bytes(alloc['kept_bytes']):>7}" if alloc else f"{'':>7}"
            note = ""
            if "bound" in r:
                note = f"{r['bound']} of {r['launches']} launches bound"
            elif r["framework"] == "torch-compile":
                note = f"first step (compile) {r['first_step_seconds']:.1f} s"
            print(
                f"{name:>8} {r['framework']:>16} {r['seconds'] * 1e6:9.1f} {ratio} "
                f"{r['cpu_seconds'] * 1e6:9.1f} {cpu_ratio} {api} "
                f"{peak} {kept} {r['first_loss']:8.5f}  {note}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
