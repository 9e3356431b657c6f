"""A GPT train step on the GPU: aicfc (one CUDA graph) vs torch eager, torch.compile, a
hand-captured torch CUDA graph and JAX.

    python tools/bench_gpt_step.py [--quick] [--json out.json] [--configs gpt-tiny,nanogpt-char]
        [--precisions fp32,tf32,bf16] [--peers aicfc,torch-graph,...] [--deadline S]

Configurations (nanoGPT's model, vocabulary 65, AdamW lr 1e-3, weight decay 0.1 on every
parameter in every framework, dropout 0 unless --dropout):
    gpt-tiny      2 layers, d_model 128, 4 heads, T 64, batch 32
    nanogpt-char  6 layers, d_model 384, 6 heads, T 256, batch 64
Precisions: fp32 (strict, no TF32 anywhere), tf32 (TF32 tensor cores for the matrix
products, fp32 elsewhere) and bf16 (mixed precision, fp32 master weights and AdamW state:
aicfc precision="bf16"; torch with torch.autocast("cuda", dtype=torch.bfloat16) around the
forward and loss; JAX bf16 compute, the fp32 params cast to bf16 inside the jitted loss,
layer norm and the loss in fp32).

Peers, one process, one GPU, the same initial weights (nanoGPT's initialisation, drawn
once here) and the same batch of token ids on the device:
    aicfc               aicfc.Program of aicfc.models.GPT on CupyBackend: the whole step
                        (forward, loss, backward, AdamW) is one CUDA graph with branches
    torch-eager         a nanoGPT module (F.scaled_dot_product_attention, exact GELU),
                        F.cross_entropy, torch.optim.AdamW(fused=True)
    torch-graph         the same step captured by hand in a torch.cuda.CUDAGraph
                        (AdamW fused and capturable)
    torch-compile       torch.compile of the whole step function (zero_grad, forward,
                        backward, optimizer step), default mode
    torch-compile-ro    the same, mode="reduce-overhead", with
                        torch.compiler.cudagraph_mark_step_begin() before each step (without
                        it a plain loop fails: "accessing tensor output of CUDAGraphs that
                        has been overwritten by a subsequent run")
    torch-compile-max   the same, mode="max-autotune-no-cudagraphs" (compiles for minutes:
                        not in the default list)
    jax-jit             jax.jit of loss, grad and optax.adamw, params and state donated

Columns: us/step (replays of the captured step, or a loop of the compiled step, with the
batch on the device: the median of 5 runs of `steps` steps, CUDA events), step(dev)
(aicfc: a loop of Program.step(x_dev, y_dev, sync=False), which adds the input copies,
the loss copy and Python's work per step), tokens/s (B T / us per step), peak device
memory (aicfc: the CuPy pool's bytes the program added; torch: max_memory_allocated;
JAX: peak_bytes_in_use), graph nodes and the longest chain of dependent nodes (aicfc),
and compile: seconds from nothing to the first finished step (building the IR, the
pipeline, kernel loading and capture for aicfc; tracing and compiling for the others).
For aicfc also "cached": the same for a second Program of the same model in this
process, whose planned IR comes from the compile cache, and (fp32 rows; with --quick
nanogpt-char's only) "proc" and "proc cached": a first and a second fresh process
(`--compile-probe`), the cold and the cached compile (CuPy's on-disk kernel cache is warm
in both: NVRTC ran in this process first). The first aicfc row's compile includes NVRTC
compiling every kernel source when CuPy's kernel cache is cold (a fresh machine); later
rows reuse the loaded modules, so "proc" is the compile a user sees on a second run.
"loss 1": the first step's loss, equal across peers (the same weights and batch).

Each peer runs in try/except: a failure prints its reason and the table goes on. The
peers run one after the other, each over every config and precision (aicfc first, the
torch.compile modes last); a row is skipped when less of --deadline is left than it is
given (row_seconds: 15 s, a torch.compile mode 35 s for gpt-tiny and 75 s for
nanogpt-char), and the JSON is rewritten after every row.
--quick: a quarter of the steps, the fresh-process compiles of nanogpt-char fp32 only;
every peer still runs. --deadline: 230 s with --quick, 480 s without, unless given
(tools/device_run.sh's gpt stage runs --quick unless given arguments: about 4 minutes on
an H200 for both configs and precisions; the torch.compile rows are the ones a deadline
cuts). Not a test: a tool that prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicfc.runtime.files import write_text
from aicfc.tools.bench_train_step import cupy_timer, release_memory, set_torch_tf32, torch_timer

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


@dataclass(frozen=True)
class Config:
    layers: int
    d_model: int
    heads: int
    block: int
    batch: int
    vocab: int = 65

    @property
    def tokens(self) -> int:
        return self.batch * self.block

    def flops(self) -> float:
        """FLOPs of one train step, nanoGPT's count (`estimate_mfu`): 6 per parameter per
        token (forward 2, backward 4; the tied head counted once, the position table not)
        plus 12 L T d_model per token for attention (QK^T and PV, forward and backward,
        counted without the causal half)."""
        d, layer = self.d_model, 12 * self.d_model**2 + 13 * self.d_model
        params = self.layers * layer + self.vocab * d + 2 * d
        return self.tokens * (6.0 * params + 12.0 * self.layers * self.block * d)


CONFIGS = {
    "gpt-tiny": Config(layers=2, d_model=128, heads=4, block=64, batch=32),
    "nanogpt-char": Config(layers=6, d_model=384, heads=6, block=256, batch=64),
}
PEERS = ("aicfc", "torch-graph", "torch-eager", "jax-jit", "torch-compile", "torch-compile-ro")
"""The default peers, in the order they run (the strongest first, the slow compiles last)."""
ALL_PEERS = (*PEERS, "torch-compile-max")
LR, WEIGHT_DECAY = 1e-3, 0.1


def steps_for(config: str, quick: bool) -> int:
    return {"gpt-tiny": 100, "nanogpt-char": 10}[config] // (4 if quick else 1)


# ----------------------------------------------------------------------------
# Weights and data, once for every peer
# ----------------------------------------------------------------------------


def init_weights(c: Config) -> dict[str, np.ndarray]:
    """nanoGPT's parameters by name (`lm_head.weight` is tied to `transformer.wte.weight`):
    N(0, 0.02) weights, N(0, 0.02 / sqrt(2 L)) residual projections, zero biases, unit
    layer-norm weights."""
    rng = np.random.default_rng(0)
    d = c.d_model

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    ones, zeros = np.ones(d, np.float32), np.zeros(d, np.float32)
    w = {"transformer.wte.weight": normal(c.vocab, d), "transformer.wpe.weight": normal(c.block, d)}
    resid = 0.02 / math.sqrt(2 * c.layers)
    for i in range(c.layers):
        p = f"transformer.h.{i}."
        w |= {
            p + "ln_1.weight": ones.copy(),
            p + "ln_1.bias": zeros.copy(),
            p + "attn.c_attn.weight": normal(3 * d, d),
            p + "attn.c_attn.bias": np.zeros(3 * d, np.float32),
            p + "attn.c_proj.weight": normal(d, d, std=resid),
            p + "attn.c_proj.bias": zeros.copy(),
            p + "ln_2.weight": ones.copy(),
            p + "ln_2.bias": zeros.copy(),
            p + "mlp.c_fc.weight": normal(4 * d, d),
            p + "mlp.c_fc.bias": np.zeros(4 * d, np.float32),
            p + "mlp.c_proj.weight": normal(d, 4 * d, std=resid),
            p + "mlp.c_proj.bias": zeros.copy(),
        }
    return w | {"transformer.ln_f.weight": ones.copy(), "transformer.ln_f.bias": zeros.copy()}


def make_batch(c: Config) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    ids = rng.integers(0, c.vocab, (c.batch, c.block + 1)).astype(np.int32)
    return ids[:, :-1].copy(), ids[:, 1:].copy()  # targets: the next token


# ----------------------------------------------------------------------------
# aicfc
# ----------------------------------------------------------------------------


def aicfc_program(c: Config, precision: str, dropout: float, cache_dir: str) -> Any:
    from aicfc import optim
    from aicfc.models.gpt import (  # type: ignore[import-not-found, unused-ignore]
        GPT,
        GPTConfig,
    )
    from aicfc.program import Program
    from aicfc.runtime.cuda.backend import CupyBackend

    gpt = GPTConfig(c.vocab, c.block, c.layers, c.heads, c.d_model, dropout, True)
    backend = CupyBackend(tf32=precision == "tf32", autotune_cache="")
    opt = optim.AdamW(lr=LR, weight_decay=WEIGHT_DECAY)
    low = precision if precision in ("bf16", "fp16") else "fp32"
    prog = Program(GPT(gpt), "cross_entropy", opt, backend, cache_dir=cache_dir, precision=low)
    prog.load_state_dict(init_weights(c), strict=False)
    return prog


def first_step(
    c: Config, precision: str, dropout: float, cache_dir: str
) -> tuple[Any, float, Any, float]:
    """(program, seconds from nothing to the first finished step, its compiled entry, the
    first step's loss)."""
    import cupy

    x, y = make_batch(c)
    xd, yd = cupy.asarray(x), cupy.asarray(y)
    t0 = time.perf_counter()
    prog = aicfc_program(c, precision, dropout, cache_dir)
    loss = prog.step(xd, yd)  # build, pipeline (or cache), load, eager warm-up step, capture
    seconds = time.perf_counter() - t0
    return prog, seconds, prog.compiled_functions()[0], float(loss)


def time_program(prog: Any, name: str, quick: bool) -> dict[str, Any]:
    """Replays and the step(dev) loop of a compiled program, and its graph's shape."""
    import cupy

    from aicfc.runtime.schedule import longest_chain

    x, y = make_batch(CONFIGS[name])
    xd, yd = cupy.asarray(x), cupy.asarray(y)
    exe = prog.executable()
    stream = prog.backend.stream
    steps = steps_for(name, quick)
    exe.replay(3)
    samples = cupy_timer(lambda: exe.replay(1), stream, steps)
    loop = cupy_timer(lambda: prog.step(xd, yd, sync=False), stream, steps)
    return {
        "seconds": statistics.median(samples),
        "samples": samples,
        "device_loop_seconds": statistics.median(loop),
        "nodes": len(exe.nodes),
        "launches": len(exe.launches),
        "longest_chain": longest_chain(exe.depends),
        "streams": exe.schedule.streams,
        "kernels": sorted(set(exe.kernels)),
    }


def bench_aicfc(name: str, precision: str, args: argparse.Namespace) -> dict[str, Any]:
    import cupy

    pool = cupy.get_default_memory_pool()
    release_memory()
    base = pool.total_bytes()
    with tempfile.TemporaryDirectory(prefix="aicfc-bench-cache-") as cache:
        return _bench_aicfc(name, precision, args, cache, pool, base)


def _bench_aicfc(
    name: str, precision: str, args: argparse.Namespace, cache: str, pool: Any, base: int
) -> dict[str, Any]:
    """bench_aicfc's row, with `cache` the compile cache its programs share (removed after)."""
    c = CONFIGS[name]
    prog, compile_s, entry, loss = first_step(c, precision, args.dropout, cache)
    row = time_program(prog, name, args.quick)
    row |= {
        "peak_bytes": pool.total_bytes() - base,
        "compile_seconds": compile_s,
        "pipeline_from_cache": entry.from_cache,
        "first_loss": loss,
    }
    prog = None  # freed before the second program: the memory column is one program's
    release_memory()
    _, cached_s, hit, _ = first_step(c, precision, args.dropout, cache)
    row["cached_compile_seconds"], row["cache_hit"] = cached_s, hit.from_cache
    release_memory()
    if precision == "fp32" and (not args.quick or name == "nanogpt-char"):  # fresh processes: an
        # empty compile cache, then this row's (CuPy's kernel cache is warm in both)
        with tempfile.TemporaryDirectory(prefix="aicfc-cold-") as empty:
            cold = compile_probe(name, precision, cache_dir=empty)
        warm = compile_probe(name, precision, cache_dir=cache)
        row["process_compile_seconds"] = cold["seconds"]
        row["process_cached_compile_seconds"] = warm["seconds"]
        row["process_cache_hit"] = warm["from_cache"]
    return row


def compile_probe(name: str, precision: str, cache_dir: str) -> dict[str, Any]:
    """Run this script with --compile-probe in a fresh process: compile and first-step
    seconds, and whether the pipeline came from the cache."""
    cmd = [sys.executable, __file__, "--compile-probe", name, "--precisions"]
    cmd += [precision, "--cache-dir", cache_dir]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"compile probe failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def profile_aicfc(name: str, precision: str, dropout: float) -> list[tuple[str, float, int]]:
    """Device microseconds of each kernel of the aicfc step, summed by kernel name (median
    of 10 eager runs, each launch timed by events on the backend's stream)."""
    import cupy

    c = CONFIGS[name]
    prog, _, _, _ = first_step(c, precision, dropout, "")
    exe = prog.executable()
    stream = prog.backend.stream
    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for _ in range(10):
        events = [cupy.cuda.Event() for _ in range(len(exe.launches) + 1)]
        events[0].record(stream)
        for k, la in enumerate(exe.launches):
            la(stream)
            events[k + 1].record(stream)
        events[-1].synchronize()
        per: dict[str, float] = {}
        for k, la in enumerate(exe.launches):
            us = cupy.cuda.get_elapsed_time(events[k], events[k + 1]) * 1e3
            per[la.name] = per.get(la.name, 0.0) + us
        for kernel, us in per.items():
            times.setdefault(kernel, []).append(us)
    for la in exe.launches:
        counts[la.name] = counts.get(la.name, 0) + 1
    rows = [(k, statistics.median(v), counts[k]) for k, v in times.items()]
    return sorted(rows, key=lambda r: -r[1])


# ----------------------------------------------------------------------------
# PyTorch
# ----------------------------------------------------------------------------


def torch_gpt(c: Config, dropout: float, device: str = "cuda") -> Any:
    """nanoGPT's module with `init_weights(c)`, on `device` ("cuda", or "cpu" for
    tools/bench_cpu.py); forward(idx, targets) returns the mean cross-entropy."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = c.d_model
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn: Any = nn.Module()
            self.attn.c_attn, self.attn.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp: Any = nn.Module()
            self.mlp.c_fc, self.mlp.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.attn.c_attn(self.ln_1(x)).split(d, dim=2)
            qh, kh, vh = (z.view(b, t, c.heads, d // c.heads).transpose(1, 2) for z in (q, k, v))
            p = dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(qh, kh, vh, dropout_p=p, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(b, t, d)
            x = x + F.dropout(self.attn.c_proj(y), dropout, self.training)
            h = self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))
            return x + F.dropout(h, dropout, self.training)

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer: Any = nn.Module()
            self.transformer.wte = nn.Embedding(c.vocab, c.d_model)
            self.transformer.wpe = nn.Embedding(c.block, c.d_model)
            self.transformer.h = nn.ModuleList(Block() for _ in range(c.layers))
            self.transformer.ln_f = nn.LayerNorm(c.d_model)
            self.lm_head = nn.Linear(c.d_model, c.vocab, bias=False)
            self.lm_head.weight = self.transformer.wte.weight
            self.register_buffer("pos", torch.arange(c.block), persistent=False)

        def forward(self, idx: Any, targets: Any) -> Any:
            tr = self.transformer
            x = F.dropout(tr.wte(idx) + tr.wpe(self.pos), dropout, self.training)
            for block in tr.h:
                x = block(x)
            logits = self.lm_head(tr.ln_f(x))
            return F.cross_entropy(logits.view(-1, c.vocab), targets.view(-1))

    model = GPT()
    state = {k: torch.from_numpy(v) for k, v in init_weights(c).items()}
    model.load_state_dict({**state, "lm_head.weight": state["transformer.wte.weight"]})
    return model.cuda() if device == "cuda" else model.to(device)


def bench_torch(name: str, precision: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    import contextlib

    import torch

    set_torch_tf32(precision == "tf32")

    def autocast() -> Any:  # bf16: torch's mixed precision around the forward and the loss
        if precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=mode != "graph")

    c = CONFIGS[name]
    xn, yn = make_batch(c)
    x = torch.from_numpy(xn.astype(np.int64)).cuda()
    y = torch.from_numpy(yn.astype(np.int64)).cuda()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    model: Any = torch_gpt(c, args.dropout)
    steps = steps_for(name, args.quick)
    capturable = mode == "graph"
    opt: Any = torch.optim.AdamW(
        model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, fused=True, capturable=capturable
    )

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    if mode == "graph":
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            first = step()
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            with autocast():
                loss = model(x, y)
            loss.backward()
            opt.step()
        graph.replay()
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        run: Callable[[], Any] = graph.replay
    elif mode == "eager":
        first = step()
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        run = step
    else:
        options = {"compile": "default", "compile-ro": "reduce-overhead"}
        compiled = torch.compile(step, mode=options.get(mode, "max-autotune-no-cudagraphs"))

        def run() -> Any:
            if mode == "compile-ro":
                torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
            return compiled()

        first = run()
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        first = float(first)  # read before a later run may overwrite its buffer
        for _ in range(3):
            run()
    torch.cuda.synchronize()
    samples = torch_timer(run, steps)
    peak = torch.cuda.max_memory_allocated() - base
    return {
        "seconds": statistics.median(samples),
        "samples": samples,
        "peak_bytes": peak,
        "compile_seconds": compile_s,
        "first_loss": float(first),
    }


# ----------------------------------------------------------------------------
# JAX
# ----------------------------------------------------------------------------


def bench_jax(name: str, precision: str, args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import optax

    c = CONFIGS[name]
    xn, yn = make_batch(c)
    d, h = c.d_model, c.heads
    t0 = time.perf_counter()
    low = jnp.bfloat16 if precision == "bf16" else jnp.float32  # bf16 compute, fp32 params
    with jax.default_matmul_precision("tensorfloat32" if precision == "tf32" else "highest"):
        params = {k: jnp.asarray(v) for k, v in init_weights(c).items()}
        x, y = jnp.asarray(xn), jnp.asarray(yn)

        def ln(p: Any, name: str, z: Any) -> Any:
            z = z.astype(jnp.float32)
            mu = z.mean(-1, keepdims=True)
            var = ((z - mu) ** 2).mean(-1, keepdims=True)
            return (z - mu) * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

        def linear(p: Any, name: str, z: Any) -> Any:
            w, bias = p[name + ".weight"].astype(low), p[name + ".bias"].astype(low)
            return z.astype(low) @ w.T + bias

        def loss_fn(p: Any, idx: Any, tgt: Any) -> Any:
            z = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][: c.block]
            b = idx.shape[0]
            for i in range(c.layers):
                pre = f"transformer.h.{i}."
                qkv = linear(p, pre + "attn.c_attn", ln(p, pre + "ln_1", z))
                q, k, v = (a.reshape(b, c.block, h, d // h) for a in jnp.split(qkv, 3, axis=-1))
                att = jax.nn.dot_product_attention(q, k, v, is_causal=True).astype(z.dtype)
                z = z + linear(p, pre + "attn.c_proj", att.reshape(b, c.block, d))
                m = jax.nn.gelu(linear(p, pre + "mlp.c_fc", ln(p, pre + "ln_2", z)), False)
                z = z + linear(p, pre + "mlp.c_proj", m)
            head = p["transformer.wte.weight"].astype(low).T
            logits = (ln(p, "transformer.ln_f", z).astype(low) @ head).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, tgt).mean()

        tx = optax.adamw(LR, weight_decay=WEIGHT_DECAY)
        state = tx.init(params)

        def step(p: Any, st: Any, idx: Any, tgt: Any) -> Any:
            loss, grads = jax.value_and_grad(loss_fn)(p, idx, tgt)
            updates, st = tx.update(grads, st, p)
            return optax.apply_updates(p, updates), st, loss

        jstep = jax.jit(step, donate_argnums=(0, 1))
        params, state, loss = jstep(params, state, x, y)
        first = float(loss)
        compile_s = time.perf_counter() - t0
        for _ in range(3):
            params, state, loss = jstep(params, state, x, y)
        loss.block_until_ready()
        steps = steps_for(name, args.quick)
        samples = []
        for _ in range(5):
            t1 = time.perf_counter()
            for _ in range(steps):
                params, state, loss = jstep(params, state, x, y)
            jax.block_until_ready((params, state, loss))
            samples.append((time.perf_counter() - t1) / steps)
    stats = jax.devices()[0].memory_stats() or {}
    return {
        "seconds": statistics.median(samples),
        "samples": samples,
        "peak_bytes": stats.get("peak_bytes_in_use"),
        "compile_seconds": compile_s,
        "first_loss": first,
    }


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[str, str, argparse.Namespace], dict[str, Any]]] = {
    "aicfc": bench_aicfc,
    "torch-eager": lambda n, t, a: bench_torch(n, t, "eager", a),
    "torch-graph": lambda n, t, a: bench_torch(n, t, "graph", a),
    "torch-compile": lambda n, t, a: bench_torch(n, t, "compile", a),
    "torch-compile-ro": lambda n, t, a: bench_torch(n, t, "compile-ro", a),
    "torch-compile-max": lambda n, t, a: bench_torch(n, t, "compile-max", a),
    "jax-jit": bench_jax,
}


def row_seconds(peer: str, config: str) -> float:
    """The time a row is given at least before the deadline (a torch.compile of
    nanogpt-char's step took 22 to 70 s on an H200, gpt-tiny's about a third of that)."""
    if peer.startswith("torch-compile"):
        return 75.0 if config == "nanogpt-char" else 35.0
    return 15.0


def probe_main(args: argparse.Namespace) -> int:
    """--compile-probe NAME: one compile and first step, as JSON on the last line."""
    _, seconds, entry, _ = first_step(
        CONFIGS[args.compile_probe], args.precisions, args.dropout, args.cache_dir
    )
    print(json.dumps({"seconds": seconds, "from_cache": entry.from_cache}))
    return 0


def fmt(value: float | None, scale: float, width: int, digits: int = 1) -> str:
    return f"{value * scale:{width}.{digits}f}" if value is not None else " " * width


def table(results: list[dict[str, Any]]) -> None:
    print()
    print(
        f"{'config':>12} {'prec':>4} {'peer':>17} {'us/step':>9} {'step(dev)':>9} "
        f"{'vs best':>7} {'Mtok/s':>7} {'TFLOP/s':>7} {'peak MB':>8} {'nodes':>5} "
        f"{'chain':>5} {'compile s':>9} {'cached s':>8} {'proc s':>6} {'proc$ s':>7} "
        f"{'loss 1':>7}"
    )
    for name in dict.fromkeys(r["config"] for r in results):
        for precision in dict.fromkeys(r["precision"] for r in results):
            rows = [r for r in results if r["config"] == name and r["precision"] == precision]
            peers = [r["seconds"] for r in rows if "seconds" in r and r["peer"] != "aicfc"]
            best = min(peers) if peers else None
            for r in rows:
                head = f"{name:>12} {precision:>4} {r['peer']:>17}"
                if "seconds" not in r:
                    print(f"{head}  {r.get('error', '?')[:90]}")
                    continue
                s = r["seconds"]
                print(
                    f"{head} {s * 1e6:9.1f} {fmt(r.get('device_loop_seconds'), 1e6, 9)} "
                    f"{fmt(s / best if best else None, 1, 7, 2)} "
                    f"{CONFIGS[name].tokens / s / 1e6:7.2f} {r['flops'] / s / 1e12:7.1f} "
                    f"{fmt(r.get('peak_bytes'), 1e-6, 8, 0)} {r.get('nodes', ''):>5} "
                    f"{r.get('longest_chain', ''):>5} {fmt(r.get('compile_seconds'), 1, 9, 2)} "
                    f"{fmt(r.get('cached_compile_seconds'), 1, 8, 2)} "
                    f"{fmt(r.get('process_compile_seconds'), 1, 6, 2)} "
                    f"{fmt(r.get('process_cached_compile_seconds'), 1, 7, 2)} "
                    f"{fmt(r.get('first_loss'), 1, 7, 4)}"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write all numbers to this JSON file")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--precisions", default="fp32,tf32")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"of {', '.join(ALL_PEERS)}")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--quick", action="store_true", help="fewer steps, fewer processes")
    parser.add_argument(
        "--deadline", type=float, help="start no row after this many seconds (230 --quick, 480)"
    )
    parser.add_argument("--profile", action="store_true", help="aicfc's per-kernel times only")
    parser.add_argument("--compile-probe", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_probe:
        return probe_main(args)
    if args.profile:
        for name in args.configs.split(","):
            for precision in args.precisions.split(","):
                rows = profile_aicfc(name, precision, args.dropout)
                total = sum(us for _, us, _ in rows)
                print(
                    f"aicfc {name} {precision}: device us per step by kernel (eager, median of 10)"
                )
                for kernel, us, n in rows:
                    print(f"  {us:9.1f} {100 * us / total:5.1f}%  {n:3d} x {kernel}")
                print(f"  {total:9.1f}        total")
        return 0
    if args.deadline is None:
        args.deadline = 230.0 if args.quick else 480.0
    peers = args.peers.split(",")
    unknown = [p for p in peers if p not in RUNNERS] + [
        n for n in args.configs.split(",") if n not in CONFIGS
    ]
    unknown += [p for p in args.precisions.split(",") if p not in ("fp32", "tf32", "bf16")]
    if unknown:
        parser.error(
            f"unknown {', '.join(unknown)}: peers are {', '.join(ALL_PEERS)}; configs "
            f"{', '.join(CONFIGS)}; precisions fp32, tf32, bf16"
        )
    start = time.perf_counter()
    results: list[dict[str, Any]] = []
    # Peer by peer (aicfc first, the slow compiles last), each over every config and
    # precision, so a deadline cuts the least informative rows.
    for peer in peers:
        for name in args.configs.split(","):
            for precision in args.precisions.split(","):
                row: dict[str, Any] = {
                    "config": name,
                    "precision": precision,
                    "peer": peer,
                    "flops": CONFIGS[name].flops(),
                }
                left = args.deadline - (time.perf_counter() - start)
                if left < row_seconds(peer, name):
                    row["error"] = (
                        f"skipped: {left:.0f} s left of the {args.deadline:.0f} s deadline"
                    )
                else:
                    try:
                        row.update(RUNNERS[peer](name, precision, args))
                    except Exception as e:  # a peer that fails is reported, not fatal
                        row["error"] = f"{type(e).__name__}: {e}"
                        traceback.print_exc()
                release_memory()
                results.append(row)
                status = row.get("error") or (
                    f"{row['seconds'] * 1e6:.1f} us/step, compile {row['compile_seconds']:.2f} s"
                )
                print(f"[{name} {precision} {peer}] {status}", flush=True)
                if args.json:  # after every row: a run cut short keeps what it measured
                    write_text(args.json, json.dumps(results, indent=1))
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
