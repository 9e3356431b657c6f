"""Per-step latency of an MLP train step (softmax cross-entropy, Adam): aicfc vs PyTorch vs JAX.

    python tools/bench_train_step.py [--json out.json] [--configs small,medium,large]
        [--precisions fp32,tf32,bf16] [--frameworks aicfc-graph,aicfc-eager,torch-eager,...]

Configurations (batch, layer widths; ReLU between Linear layers):
    small   128,  784-256-256-10
    medium  1024, 1024-4096-4096-1024
    large   8192, 4096-8192-8192-4096
Precisions: fp32 (strict: no TF32 anywhere), tf32 (TF32 tensor cores for
matrix products, fp32 everywhere else) and bf16 (mixed precision: bf16 products with
fp32 accumulation, fp32 master weights, Adam state and loss; aicfc
`precision="bf16"`, torch `torch.autocast("cuda", dtype=torch.bfloat16)` around the
forward and the loss, JAX bf16 compute: the fp32 params and the batch cast to bf16
inside the jitted loss, log-softmax in fp32, the optimizer on the fp32 params).

Frameworks, one process, one GPU, the same data:
    aicfc-graph     aicfc.Program on CupyBackend: the whole step is one CUDA graph
                    (kernels by the selector's rules; no autotune cache) whose
                    independent launches are parallel branches (runtime/schedule.py);
                    at small (every width and the batch <= 256) the whole step is one
                    persistent kernel, cuda.mlp_train_step_f32 (aicfc-fuse-train-step,
                    kernels/mlp_fused.cu; issue 14's way 2): 1 graph node
    aicfc-fused-step aicfc-graph with aicfc-fuse-train-step (not in the default
                    pipeline): the whole small step as one persistent kernel
                    (issue 14's way 1, the default before the fused step)
    aicfc-first     the same with the pipeline of the first measured graph: arena reuse
                    by program order (aicfc-plan-memory{branches=false}), no
                    gemm_epilogue_grad fusion, no aicfc-hoist-updates, device-input
                    copies outside the graph (issue 14's "before", in the same run)
    aicfc-plan      aicfc-first with the branch-aware memory plan (change 1)
    aicfc-fused     aicfc-plan with the dX products fused into the backward
                    epilogues (gemm_epilogue_grad; change 2, without the hoisted updates)
    aicfc-loop      aicfc-graph with the training loop inside the graph: a warm-up-then-
                    cosine SequentialLR and clip_grad_norm_(1.0) (aicfc/training.py); the
                    table's last lines give its cost over aicfc-graph, same process:
                    python tools/bench_train_step.py --configs small --precisions fp32 \
                        --frameworks aicfc-graph,aicfc-loop
    aicfc-chain     the same graph captured from one stream: a chain in program
                    order (CupyBackend(graph_streams=1), the graph of session 2)
    aicfc-tuned     the same after runtime/cuda/autotune.py timed every GEMM candidate of
                    the step and the program was compiled with that cache
    aicfc-eager     the same program launched kernel by kernel (CupyBackend(graph=False))
    torch-eager     torch.nn + F.cross_entropy + torch.optim.Adam(fused=True)
    torch-graph     the same, captured by hand in a torch.cuda.CUDAGraph (Adam capturable=True)
    torch-compile   torch.compile(model, mode="reduce-overhead") + fused Adam
    jax-jit         jax.jit of loss, grad and optax.adam, params and state donated

Timing: after warm-up, `steps` consecutive steps are enqueued with the inputs
already on the device and the time to finish them is measured (CUDA events;
for JAX a host clock around the batch and block_until_ready); the table shows
the median over 5 such batches, divided by `steps` (the device's per-step
throughput latency). For aicfc that is `Executable.replay()` of the graph
captured by `step(x_dev, y_dev, sync=False)`: the batch stays in the program's
input buffers, as the peers' batch stays in theirs. The table also shows, for
aicfc, `step(dev)`: a loop of `Program.step(x_dev, y_dev, sync=False)` (the
device-to-device input copies, the replay, the loss copied to a new device
scalar and Python's work per step, timed the same way), and `step()`: one
synchronous `Executable.run` with host inputs copied in and the loss copied
out, the latency of a loop that reads every loss. Each row also gives the
step's counted FLOPs and minimum bytes, and the floor they imply at the
measured ceilings.

Not a test: a tool that prints a table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from aicfc.runtime.files import write_text

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

CONFIGS = {
    "small": (128, (784, 256, 256, 10)),
    "medium": (1024, (1024, 4096, 4096, 1024)),
    "large": (8192, (4096, 8192, 8192, 4096)),
}
FRAMEWORKS = (
    "aicfc-first",
    "aicfc-plan",
    "aicfc-fused",
    "aicfc-fused-step",
    "aicfc-graph",
    "aicfc-loop",
    "aicfc-chain",
    "aicfc-tuned",
    "aicfc-eager",
    "torch-eager",
    "torch-graph",
    "torch-compile",
    "jax-jit",
)
LR = 1e-3


def steps_for(config: str) -> int:
    return {"small": 200, "medium": 40, "large": 8}[config]


def counted(batch: int, widths: tuple[int, ...]) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of one train step.

    FLOPs: 2*B*in*out per Linear forward, twice that backward (dX and dW; the
    first layer's dX is not needed but frameworks differ, so it is not counted),
    plus 12 per parameter for Adam. Bytes: each parameter's param, grad,
    exp_avg, exp_avg_sq read and param, exp_avg, exp_avg_sq written (28 B), and
    each activation written once and read twice (12 B per element).
    """
    flops = 0.0
    params = 0
    acts = 0
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        flops += 2 * batch * a * b * (3 if i else 2)
        params += a * b + b
        acts += batch * b
    flops += 12 * params
    return flops, 28.0 * params + 12.0 * acts + 4.0 * batch * widths[0]


# ----------------------------------------------------------------------------
# Data and the models
# ----------------------------------------------------------------------------


def make_data(batch: int, widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, widths[0])).astype(np.float32)
    y = rng.integers(0, widths[-1], batch).astype(np.int32)
    return x, y


def init_weights(widths: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """torch.nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)), weight [out, in]."""
    rng = np.random.default_rng(1)
    out = []
    for a, b in itertools.pairwise(widths):
        bound = 1.0 / np.sqrt(a)
        w = rng.uniform(-bound, bound, (b, a)).astype(np.float32)
        bias = rng.uniform(-bound, bound, b).astype(np.float32)
        out.append((w, bias))
    return out


# ----------------------------------------------------------------------------
# Timers
# ----------------------------------------------------------------------------


def cupy_timer(enqueue: Callable[[], None], stream: Any, steps: int) -> list[float]:
    import cupy

    samples = []
    for _ in range(5):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(steps):
            enqueue()
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / steps)
    return samples


def torch_timer(enqueue: Callable[[], None], steps: int) -> list[float]:
    import torch

    samples = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            enqueue()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / steps)
    return samples


# ----------------------------------------------------------------------------
# aicfc
# ----------------------------------------------------------------------------


VARIANTS = ("first", "plan", "fused", "fused-step")
"""Pipelines of the earlier rows of issue 14's table (see the module docstring)."""


def variant_steps(steps: tuple[Any, ...], variant: str) -> tuple[Any, ...]:
    """The train pipeline `steps` as `variant` ran it: "first", "plan", "fused",
    "fused-step" (aicfc-fuse-train-step added after "canonical") or "" (as it is)."""
    from aicfc.passes.pipelines import Step

    if not variant:
        return steps
    out = []
    for step in steps:
        if step.stage == "hoisted" and variant != "fused-step":
            continue
        if step.stage == "fused-backward" and variant in ("first", "plan"):
            step = Step(step.stage, "aicfc-fuse{exclude=gemm_epilogue_grad}")
        if step.stage == "planned" and variant == "first":
            step = Step(step.stage, "aicfc-plan-memory{branches=false}")
        out.append(step)
        if step.stage == "canonical" and variant == "fused-step":
            out.append(Step("fused-step", "aicfc-fuse-train-step{backend=cuda}"))
    return tuple(out)


def loop_options(steps: int) -> Any:
    """The training loop of the aicfc-loop row: 10% warm-up then cosine over `steps`
    updates, and clip_grad_norm_(1.0)."""
    from aicfc.optim import lr_scheduler
    from aicfc.training import TrainingOptions

    warmup = max(1, steps // 10)
    schedule = lr_scheduler.SequentialLR(
        [
            lr_scheduler.LinearLR(start_factor=0.01, total_iters=warmup),
            lr_scheduler.CosineAnnealingLR(T_max=steps - warmup),
        ],
        milestones=[warmup],
    )
    return TrainingOptions(lr_scheduler=schedule, clip_grad_norm=1.0)


def aicfc_program(
    widths: tuple[int, ...],
    precision: str,
    graph: bool,
    autotune_cache: str = "",
    streams: int = 4,
    variant: str = "",
    options: Any = None,
) -> Any:
    from aicfc import optim
    from aicfc.program import Program
    from aicfc.runtime.cuda.backend import CupyBackend

    backend = CupyBackend(
        graph=graph,
        tf32=precision == "tf32",
        autotune_cache=autotune_cache,
        graph_streams=streams,
    )
    low = precision if precision in ("bf16", "fp16") else "fp32"
    prog = Program(
        mlp_model(widths),
        "cross_entropy",
        optim.Adam(lr=LR),
        backend,
        precision=low,
        options=options,
    )
    # A benchmark's override of the pipeline, before anything is compiled (not an API).
    prog._steps = variant_steps(prog._steps, variant)
    return prog


def mlp_model(widths: tuple[int, ...]) -> Any:
    """The config's aicfc.nn MLP (Linear, ReLU between) with `init_weights`' weights."""
    from aicfc import nn

    layers: list[Any] = []
    for i, (w, b) in enumerate(init_weights(widths)):
        lin = nn.Linear(w.shape[1], w.shape[0])
        lin.load_state_dict({"weight": w, "bias": b})
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def bench_aicfc(
    config: str,
    precision: str,
    graph: bool,
    autotune_cache: str = "",
    streams: int = 4,
    variant: str = "",
    training_loop: bool = False,
) -> dict[str, Any]:
    import cupy

    from aicfc.runtime.cuda.step_io import InGraphCopies
    from aicfc.runtime.schedule import longest_chain

    batch, widths = CONFIGS[config]
    x, y = make_data(batch, widths)
    xd, yd = cupy.asarray(x), cupy.asarray(y)
    options = loop_options(100 * steps_for(config)) if training_loop else None
    prog = aicfc_program(widths, precision, graph, autotune_cache, streams, variant, options)
    if variant == "first":  # device-input copies outside the graph, as before
        prog.executable("train_step", batch).in_graph_copies = InGraphCopies(max_captures=0)
    # compile, warm up (eager), capture the device-input graph (the third step: the
    # first with the same device addresses twice, so its copies are graph nodes)
    losses = [float(prog.step(xd, yd, sync=False)) for _ in range(3)]
    exe = prog.executable()
    stream = prog.backend.stream
    branched = graph and exe.schedule.branched
    steps = steps_for(config)
    samples = cupy_timer(lambda: exe.replay(1), stream, steps)
    loop = cupy_timer(lambda: prog.step(xd, yd, sync=False), stream, steps)
    inputs = {"x": x, "y": y}
    exe.run(inputs)
    sync = []
    for _ in range(min(steps, 50)):
        t0 = time.perf_counter()
        exe.run(inputs)
        sync.append(time.perf_counter() - t0)
    return {
        "seconds": statistics.median(samples),
        "samples": samples,
        "device_loop_seconds": statistics.median(loop),
        "step_seconds": statistics.median(sync),
        "kernels": list(exe.kernels),
        "launches": len(exe.kernels),
        "first_losses": losses,
        "graph": {  # the captured graph (eager: the launches, in sequence)
            "nodes": len(exe.nodes),
            "longest_chain": longest_chain(exe.depends) if branched else len(exe.nodes),
            "streams": exe.schedule.streams if branched else 1,
        },
    }


def bench_aicfc_tuned(config: str, precision: str) -> dict[str, Any]:
    """Tune the step's GEMMs (runtime/cuda/autotune.py), then measure a program compiled with it."""
    import tempfile

    from aicfc.runtime.cuda import autotune

    batch, widths = CONFIGS[config]
    x, y = make_data(batch, widths)
    path = os.environ.get("AICFC_BENCH_AUTOTUNE") or os.path.join(
        tempfile.mkdtemp(), "autotune.json"
    )
    prog = aicfc_program(widths, precision, True)
    prog.step(x, y)
    t0 = time.perf_counter()
    tuned = autotune.tune_executable(prog.executable(), path, repeats=20)
    row = bench_aicfc(config, precision, True, path)
    row["tune_seconds"] = time.perf_counter() - t0
    row["tuned"] = [
        {
            "op": r.op,
            "bucket": r.bucket,
            "kernel": r.kernel,
            "us": {k: v * 1e6 for k, v in r.seconds.items()},
        }
        for r in tuned
    ]
    return row


def profile_aicfc(
    config: str, precision: str, rounds: int = 20, variant: str = ""
) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """Median device microseconds of each node of the aicfc step, in order, and the
    step's dependency structure timed with them.

    The step as `step(x_dev, y_dev, sync=False)` runs it: the device-to-device
    input copies, every launch, the loss copied to a new device scalar. The nodes
    are issued eagerly behind a 4096^3 product that keeps the GPU busy while
    Python enqueues them, so they run back to back as in a graph and the events
    between them measure each node (plus its share of launch latency).

    The second result times the step's dependency structure with those figures:
    "launches" (their sum: the chain), "longest path" (the most that one path of
    dependent graph nodes adds up to: what the branched graph waits for at least),
    "nodes" and "longest chain" (counts of graph nodes).
    """
    import cupy

    from aicfc.runtime.cuda.capture import copy_on_device
    from aicfc.runtime.schedule import longest_chain

    batch, widths = CONFIGS[config]
    x, y = make_data(batch, widths)
    prog = aicfc_program(widths, precision, graph=False, variant=variant)
    xd, yd = cupy.asarray(x), cupy.asarray(y.astype(np.int32))
    prog.step(xd, yd)
    exe = prog.executable()
    stream = prog.backend.stream
    big = cupy.random.standard_normal((4096, 4096), dtype=np.float32)
    loss_out = cupy.empty((), np.float32)
    names = ["inputs D2D"] + [la.name for la in exe.launches] + ["loss D2D"]
    samples: list[list[float]] = [[] for _ in names]
    for _ in range(rounds):
        events = [cupy.cuda.Event() for _ in range(len(names) + 1)]
        with stream:
            cupy.matmul(big, big)
        events[0].record(stream)
        copy_on_device(exe.buffer("x"), xd, stream)
        copy_on_device(exe.buffer("y"), yd, stream)
        events[1].record(stream)
        for k, la in enumerate(exe.launches):
            la(stream)
            events[k + 2].record(stream)
        copy_on_device(loss_out, exe.arrays[dict(exe.plan.outputs)["loss"]], stream)
        events[-1].record(stream)
        events[-1].synchronize()
        for k in range(len(names)):
            samples[k].append(cupy.cuda.get_elapsed_time(events[k], events[k + 1]) * 1e3)
    per_launch = [statistics.median(t) for t in samples]
    node_us, k = [], 1
    for node in exe.nodes:
        node_us.append(sum(per_launch[k : k + len(node)]))
        k += len(node)
    finish: list[float] = []
    for us, deps in zip(node_us, exe.depends, strict=True):
        finish.append(us + max((finish[i] for i in deps), default=0.0))
    structure = {
        "launches": sum(node_us),
        "longest path": max(finish, default=0.0),
        "nodes": float(len(exe.nodes)),
        "longest chain": float(longest_chain(exe.depends)),
    }
    return [(n, t) for n, t in zip(names, per_launch, strict=True)], structure


# ----------------------------------------------------------------------------
# PyTorch
# ----------------------------------------------------------------------------


def torch_model(widths: tuple[int, ...]) -> Any:
    import torch

    layers: list[Any] = []
    for i, (w, b) in enumerate(init_weights(widths)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).cuda()


def set_torch_tf32(tf32: bool) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def bench_torch(config: str, precision: str, mode: str) -> dict[str, Any]:
    import contextlib

    import torch
    import torch.nn.functional as F

    set_torch_tf32(precision == "tf32")

    def autocast() -> Any:  # bf16: torch's mixed precision around the forward and the loss
        if precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=mode != "graph")

    batch, widths = CONFIGS[config]
    xn, yn = make_data(batch, widths)
    x = torch.from_numpy(xn).cuda()
    y = torch.from_numpy(yn.astype(np.int64)).cuda()
    model = torch_model(widths)
    steps = steps_for(config)
    if mode == "graph":
        opt = torch.optim.Adam(model.parameters(), lr=LR, capturable=True, fused=True)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                with autocast():
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            with autocast():
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        g.replay()
        torch.cuda.synchronize()
        samples = torch_timer(g.replay, steps)
    else:  # eager, or compile: the forward through torch.compile, warmed up longer
        opt = torch.optim.Adam(model.parameters(), lr=LR, fused=True)
        net = torch.compile(model, mode="reduce-overhead") if mode == "compile" else model

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()

        for _ in range(5 if mode == "compile" else 3):
            step()
        torch.cuda.synchronize()
        samples = torch_timer(step, steps)
    return {"seconds": statistics.median(samples), "samples": samples}


# ----------------------------------------------------------------------------
# JAX
# ----------------------------------------------------------------------------


def bench_jax(config: str, precision: str) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import optax

    batch, widths = CONFIGS[config]
    xn, yn = make_data(batch, widths)
    bf16 = precision == "bf16"
    with jax.default_matmul_precision("tensorfloat32" if precision == "tf32" else "highest"):
        params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in init_weights(widths)]
        x, y = jnp.asarray(xn), jnp.asarray(yn)
        tx = optax.adam(LR)
        state = tx.init(params)

        def loss_fn(ps: Any, xb: Any, yb: Any) -> Any:
            low = jnp.bfloat16 if bf16 else jnp.float32  # bf16 compute, fp32 params
            h = xb.astype(low)
            for i, (w, b) in enumerate(ps):
                h = h @ w.T.astype(low) + b.astype(low)
                if i < len(ps) - 1:
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h.astype(jnp.float32))
            return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1))

        def step(ps: Any, st: Any, xb: Any, yb: Any) -> Any:
            loss, grads = jax.value_and_grad(loss_fn)(ps, xb, yb)
            updates, st = tx.update(grads, st, ps)
            return optax.apply_updates(ps, updates), st, loss

        jstep = jax.jit(step, donate_argnums=(0, 1))
        for _ in range(3):
            params, state, loss = jstep(params, state, x, y)
        loss.block_until_ready()
        steps = steps_for(config)
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(steps):
                params, state, loss = jstep(params, state, x, y)
            jax.block_until_ready((params, state, loss))
            samples.append((time.perf_counter() - t0) / steps)
    return {"seconds": statistics.median(samples), "samples": samples}


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------

COLUMNS = (
    ("config", 7),
    ("prec", 5),
    ("framework", 14),
    ("us/step", 8),
    ("nodes", 5),
    ("chain", 5),
    ("step(dev)", 9),
    ("dev-replay", 10),
    ("step() us", 9),
    ("vs best", 7),
    ("floor us", 8),
    ("TFLOP/s", 7),
)
"""The table's columns: the replayed step (us/step), the captured graph's nodes and
longest chain of dependent nodes, the `step(x_dev, y_dev, sync=False)` loop and what it
adds to the replay, one synchronous step with host data, the ratio to the fastest peer
(torch, JAX) of the same config and precision, the floor from the counted FLOPs and
bytes at the given ceilings, and the achieved rate."""


def table_row(r: dict[str, Any], best: float | None) -> list[str]:
    """The cells of result row `r` (blank where a framework has no such figure)."""
    us = r["seconds"] * 1e6
    g = r.get("graph", {})
    dev = r.get("device_loop_seconds")
    sync = r.get("step_seconds")
    return [
        r["config"],
        r["precision"],
        r["framework"],
        f"{us:.1f}",
        str(g.get("nodes", "")),
        str(g.get("longest_chain", "")),
        f"{dev * 1e6:.1f}" if dev else "",
        f"{dev * 1e6 - us:.1f}" if dev else "",
        f"{sync * 1e6:.1f}" if sync else "",
        f"{r['seconds'] / best:.2f}" if best else "",
        f"{r['floor_seconds'] * 1e6:.1f}",
        f"{r['flops'] / r['seconds'] / 1e12:.2f}",
    ]


def table(
    results: list[dict[str, Any]], configs: list[str], precisions: list[str], markdown: bool
) -> str:
    """The results as an aligned text table, or as Markdown rows for BENCHMARKS.md."""
    lines = []
    if markdown:
        lines.append("| " + " | ".join(name for name, _ in COLUMNS) + " |")
        lines.append("|" + "|".join(" ---: " for _ in COLUMNS) + "|")
    else:
        lines.append(" ".join(f"{name:>{w}}" for name, w in COLUMNS))
    for config in configs:
        for precision in precisions:
            rows = [r for r in results if r["config"] == config and r["precision"] == precision]
            peers = [
                r["seconds"]
                for r in rows
                if "seconds" in r and not r["framework"].startswith("aicfc")
            ]
            best = min(peers) if peers else None
            for r in rows:
                if "seconds" not in r:
                    cells = [config, precision, r["framework"], r["error"][:70]]
                    cells += [""] * (len(COLUMNS) - len(cells))
                else:
                    cells = table_row(r, best)
                if markdown:
                    lines.append("| " + " | ".join(cells) + " |")
                elif "seconds" not in r:
                    lines.append(f"{config:>7} {precision:>5} {r['framework']:>14}  {cells[3]}")
                else:
                    lines.append(
                        " ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=True))
                    )
    return "\n".join(lines)


RUNNERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "aicfc-graph": lambda c, t: bench_aicfc(c, t, graph=True),
    "aicfc-first": lambda c, t: bench_aicfc(c, t, graph=True, variant="first"),
    "aicfc-plan": lambda c, t: bench_aicfc(c, t, graph=True, variant="plan"),
    "aicfc-fused": lambda c, t: bench_aicfc(c, t, graph=True, variant="fused"),
    "aicfc-fused-step": lambda c, t: bench_aicfc(c, t, graph=True, variant="fused-step"),
    "aicfc-loop": lambda c, t: bench_aicfc(c, t, graph=True, training_loop=True),
    "aicfc-chain": lambda c, t: bench_aicfc(c, t, graph=True, streams=1),
    "aicfc-tuned": bench_aicfc_tuned,
    "aicfc-eager": lambda c, t: bench_aicfc(c, t, graph=False),
    "torch-eager": lambda c, t: bench_torch(c, t, "eager"),
    "torch-graph": lambda c, t: bench_torch(c, t, "graph"),
    "torch-compile": lambda c, t: bench_torch(c, t, "compile"),
    "jax-jit": bench_jax,
}


def release_memory() -> None:
    import gc

    gc.collect()
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # CuPy missing: nothing to free
        pass
    try:
        import torch

        torch.cuda.empty_cache()
    except Exception:  # torch missing
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write all numbers to this JSON file")
    parser.add_argument("--configs", default="small,medium,large")
    parser.add_argument("--precisions", default="fp32,tf32")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--copy-tbs", type=float, default=4.2, help="copy ceiling, TB/s")
    parser.add_argument("--fp32-tflops", type=float, default=51.0, help="strict fp32 GEMM ceiling")
    parser.add_argument("--tf32-tflops", type=float, default=400.0, help="TF32 GEMM ceiling")
    parser.add_argument("--bf16-tflops", type=float, default=780.0, help="bf16 GEMM ceiling")
    parser.add_argument(
        "--profile", action="store_true", help="only print the aicfc step's per-node device times"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (BENCHMARKS.md)"
    )
    parser.add_argument(
        "--profile-variants",
        default="first,now",
        help="pipelines --profile times: first, plan, fused, fused-step (VARIANTS) and now (the "
        "default)",
    )
    parser.add_argument(
        "--tuned-configs",
        default="small",
        help="configs that get an aicfc-tuned row (tuning a large step takes minutes)",
    )
    args = parser.parse_args(argv)
    if args.profile:
        for config, precision, variant in itertools.product(
            args.configs.split(","),
            args.precisions.split(","),
            args.profile_variants.split(","),
        ):
            pipeline = "" if variant == "now" else variant
            nodes, structure = profile_aicfc(config, precision, variant=pipeline)
            print(
                f"aicfc {config} {precision} ({variant}): per-node device time (median of 20), us"
            )
            for name, us in nodes:
                print(f"  {us:9.1f}  {name}")
            print(f"  {sum(us for _, us in nodes):9.1f}  total")
            print(
                f"  graph: {structure['nodes']:.0f} nodes, "
                f"{structure['longest chain']:.0f} on the longest chain; launches "
                f"{structure['launches']:.1f} us in sequence, "
                f"{structure['longest path']:.1f} us on the longest path"
            )
        return 0
    results: list[dict[str, Any]] = []
    for config in args.configs.split(","):
        batch, widths = CONFIGS[config]
        flops, nbytes = counted(batch, widths)
        for precision in args.precisions.split(","):
            rate = {"tf32": args.tf32_tflops, "bf16": args.bf16_tflops}.get(
                precision, args.fp32_tflops
            ) * 1e12
            floor = max(flops / rate, nbytes / (args.copy_tbs * 1e12))
            for fw in args.frameworks.split(","):
                if fw == "aicfc-tuned" and config not in args.tuned_configs.split(","):
                    continue
                row: dict[str, Any] = {
                    "config": config,
                    "precision": precision,
                    "framework": fw,
                    "flops": flops,
                    "bytes": nbytes,
                    "floor_seconds": floor,
                }
                try:
                    row.update(RUNNERS[fw](config, precision))
                except Exception as e:  # a framework that fails is reported, not fatal
                    row["error"] = f"{type(e).__name__}: {e}"
                    traceback.print_exc()
                release_memory()
                results.append(row)
                status = row.get("error") or f"{row['seconds'] * 1e6:.1f} us"
                if "graph" in row and "error" not in row:
                    g = row["graph"]
                    status += (
                        f" ({g['nodes']} nodes, {g['longest_chain']} on the longest chain, "
                        f"{g['streams']} streams)"
                    )
                print(f"[{config} {precision} {fw}] {status}", flush=True)
    if args.json:
        write_text(args.json, json.dumps(results, indent=1))  # atomically
    print()
    print(table(results, args.configs.split(","), args.precisions.split(","), args.markdown))
    print_loop_cost(results)
    return 0


def print_loop_cost(results: list[dict[str, Any]]) -> None:
    """What the schedule and clipping add per step: aicfc-loop minus aicfc-graph (graph
    replay, same process), where both rows were measured."""
    by_key = {(r["config"], r["precision"], r["framework"]): r for r in results if "seconds" in r}
    for (config, precision, fw), loop in by_key.items():
        base = by_key.get((config, precision, "aicfc-graph"))
        if fw != "aicfc-loop" or base is None:
            continue
        extra = (loop["seconds"] - base["seconds"]) * 1e6
        launches = loop["launches"] - base["launches"]
        print(
            f"{config} {precision}: schedule + clip_grad_norm_(1.0) add {extra:+.1f} us/step "
            f"({launches:+d} launches) over aicfc-graph"
        )


if __name__ == "__main__":
    sys.exit(main())
