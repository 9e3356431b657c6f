"""Time the transformer kernels on the GPU at issue 12's configs, beside PyTorch fp32.

    python3 tools/bench_transformer_kernels.py

For each config (gpt-tiny: B 32, T 64, d_model 128, 4 heads; nanogpt-char: B 64,
T 256, d_model 384, 6 heads; V 65) and kernel family, the forward and the backward
launches are captured R times into one CUDA graph (CuPy stream capture) and replayed;
the time per repetition is the replay time / R, so launch overhead from Python is
out and the gaps between kernels in a graph are in. PyTorch's equivalents (fp32
F.layer_norm, F.embedding, F.cross_entropy, F.scaled_dot_product_attention, forward
plus autograd backward) are captured and timed the same way with torch.cuda.graph.
Prints µs, and GB/s or TFLOP/s against the bytes or FLOPs each kernel must move or do.
The launch geometry is the launchers' (runtime/cuda/launchers/{layernorm,embedding,
cross_entropy,attention}.py), the kernels are called directly so that each one's time
is its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy
import numpy as np
import torch

from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launchers import attention as at
from aicfc.runtime.cuda.launchers import cross_entropy as ce
from aicfc.runtime.cuda.launchers import embedding as em
from aicfc.runtime.cuda.launchers import layernorm as ln

REPEAT = 20
REPLAYS = 10
CONFIGS = {
    "gpt-tiny": {"B": 32, "T": 64, "C": 128, "H": 4, "V": 65},
    "nanogpt-char": {"B": 64, "T": 256, "C": 384, "H": 6, "V": 65},
}
SMS = int(cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])


def fn(source: str, symbol: str, shared: int = 0) -> Callable[..., None]:
    k = cuda_abi.load_module(source).get_function(symbol)
    if shared > 48 * 1024:
        k.max_dynamic_shared_size_bytes = shared

    def call(grid: tuple[int, ...], block: tuple[int, ...], *args: Any) -> None:
        k(grid, block, tuple(np.uint64(0) if a is None else a for a in args), shared_mem=shared)

    return call


def time_cupy(body: Callable[[], None]) -> float:
    """µs per call of body, from CUDA-graph replays of REPEAT calls."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        body()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(REPEAT):
            body()
        graph = stream.end_capture()
        graph.launch(stream)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(REPLAYS):
            graph.launch(stream)
        stop.record(stream)
        stop.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, stop)) * 1e3 / (REPEAT * REPLAYS)


def time_torch(body: Callable[[], object]) -> float:
    s = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPEAT):
            body()
    g.replay()
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    stop = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for _ in range(REPLAYS):
        g.replay()
    stop.record()
    stop.synchronize()
    return float(start.elapsed_time(stop)) * 1e3 / (REPEAT * REPLAYS)


def rnd(*shape: int) -> Any:
    return cupy.random.standard_normal(shape, dtype=np.float32)


def report(name: str, us: float, work: float, unit: str, torch_us: float | None) -> None:
    rate = work / us / 1e3 if unit == "GB/s" else work / us / 1e6
    peer = f"  torch {torch_us:8.1f} µs ({torch_us / us:4.2f}x)" if torch_us else ""
    print(f"  {name:34s} {us:8.1f} µs  {rate:7.1f} {unit}{peer}", flush=True)


def bench_layer_norm(n: int, c: int) -> None:
    x, r, w, b, dy = rnd(n, c), rnd(n, c), rnd(c), rnd(c), rnd(n, c)
    s, y, dx = cupy.empty_like(x), cupy.empty_like(x), cupy.empty_like(x)
    mean, rstd, dw, db = cupy.empty(n, np.float32), cupy.empty(n, np.float32), rnd(c), rnd(c)
    block = ln.layer_norm_block(c)
    (blocks,) = grid_b = ln.layer_norm_grad_grid(n, c, SMS)
    ws = cupy.empty(ln.layer_norm_grad_workspace(blocks, c) // 4, np.float32)
    fwd = fn("layernorm.cu", "aicfc_add_layer_norm_f32")
    bwd = fn("layernorm.cu", "aicfc_layer_norm_grad_f32")
    par = fn("layernorm.cu", "aicfc_layer_norm_param_grad_f32")
    sc = (np.int32(n), np.int32(c))
    pgrid, pblock = ln.layer_norm_param_grad_grid(c)
    t_f = time_cupy(
        lambda: fwd(
            ln.layer_norm_grid(n, c), block, x, r, w, b, s, y, mean, rstd, *sc, np.float32(1e-5)
        )
    )

    def backward() -> None:
        bwd(grid_b, block, dy, s, mean, rstd, w, None, dx, ws, *sc)
        par(pgrid, pblock, dw, db, ws, np.int32(blocks), np.int32(c))

    t_b = time_cupy(backward)
    xt, rt, dyt = (torch.as_tensor(a, device="cuda") for a in (x, r, dy))
    wt, bt = (torch.as_tensor(a, device="cuda").clone().requires_grad_(True) for a in (w, b))
    xg = xt.clone().requires_grad_(True)
    with torch.no_grad():
        p_f = time_torch(lambda: torch.nn.functional.layer_norm(xt + rt, (c,), wt, bt, 1e-5))

    def torch_step() -> None:
        yy = torch.nn.functional.layer_norm(xg + rt, (c,), wt, bt, 1e-5)
        torch.autograd.grad(yy, (xg, wt, bt), dyt)

    p_fb = time_torch(torch_step)
    report(f"add+layer_norm fwd [{n}, {c}]", t_f, 4 * 4 * n * c, "GB/s", p_f)
    report("layer_norm bwd (dx, dw, db)", t_b, 3 * 4 * n * c, "GB/s", None)
    report("  fwd + bwd", t_f + t_b, 7 * 4 * n * c, "GB/s", p_fb)


def bench_embedding(n: int, v: int, c: int) -> None:
    ids = cupy.asarray(np.random.default_rng(0).integers(0, v, n).astype(np.int64))
    table, dout = rnd(v, c), rnd(n, c)
    out, dtable = cupy.empty((n, c), np.float32), cupy.empty((v, c), np.float32)
    ws = cupy.empty(em.embedding_workspace(n, v, c), np.uint8)
    split = em.embedding_split(v, c, SMS)
    sc = (np.int32(n), np.int32(v), np.int32(c))
    fwd = fn("embedding.cu", "aicfc_embedding_f32_i64")
    k1 = fn("embedding.cu", "aicfc_embedding_grad_chunks_f32_i64")
    k2 = fn("embedding.cu", "aicfc_embedding_grad_combine_f32")
    chunk = np.int32(em.EMBEDDING_CHUNK)
    t_f = time_cupy(lambda: fwd(em.embedding_grid(n), (256,), ids, table, out, *sc))

    def backward() -> None:
        k1(em.embedding_chunks_grid(n, c), (256,), dout, ids, ws, *sc, chunk)
        k2(em.embedding_combine_grid(v, c, split), (256,), dtable, ws, *sc, chunk, np.int32(split))

    t_b = time_cupy(backward)
    it, dt = torch.as_tensor(ids, device="cuda"), torch.as_tensor(dout, device="cuda")
    tt = torch.as_tensor(table, device="cuda").clone().requires_grad_(True)

    def torch_step() -> None:
        torch.autograd.grad(torch.nn.functional.embedding(it, tt), (tt,), dt)

    p_fb = time_torch(torch_step)
    report(f"embedding fwd [{n}] of [{v}, {c}]", t_f, 2 * 4 * n * c, "GB/s", None)
    report("embedding bwd (2 launches)", t_b, 4 * (n * c + v * c), "GB/s", None)
    report("  fwd + bwd", t_f + t_b, 4 * (3 * n * c + v * c), "GB/s", p_fb)


def bench_cross_entropy(n: int, v: int) -> None:
    x = rnd(n, v)
    y = cupy.asarray(np.random.default_rng(1).integers(0, v, n).astype(np.int64))
    dl, loss, dx = cupy.ones((), np.float32), cupy.empty((), np.float32), cupy.empty_like(x)
    ws = cupy.zeros(ce.cross_entropy_workspace(n, v), np.uint8)
    k = fn("cross_entropy.cu", "aicfc_softmax_cross_entropy_f32_i64")
    block, grid = ce.cross_entropy_block(v), ce.cross_entropy_grid(n, v)
    t = time_cupy(lambda: k(grid, block, x, y, dl, loss, dx, ws, np.int32(n), np.int32(v)))
    xt = torch.as_tensor(x, device="cuda").clone().requires_grad_(True)
    yt = torch.as_tensor(y, device="cuda")

    def torch_step() -> None:
        torch.autograd.grad(torch.nn.functional.cross_entropy(xt, yt), (xt,))

    report(f"cross_entropy+grad [{n}, {v}]", t, 2 * 4 * n * v, "GB/s", time_torch(torch_step))


def bench_attention(b: int, h: int, t: int, d: int, p: float) -> None:
    q, k, v, dout = rnd(b, h, t, d), rnd(b, h, t, d), rnd(b, h, t, d), rnd(b, h, t, d)
    out, dq, dk, dv = (cupy.empty_like(q) for _ in range(4))
    lse, delta = cupy.empty((b, h, t), np.float32), cupy.empty(b * h * t, np.float32)
    off = cupy.zeros((), np.int64)
    sc = (
        np.int32(b * h),
        np.int32(t),
        np.float32(d**-0.5),
        np.int32(1),
        np.float64(p),
        np.int64(7),
    )
    fwd = fn("attention.cu", f"aicfc_attention_fwd_f32_d{d}", at.attention_fwd_shared(d))
    dpre = fn("attention.cu", "aicfc_attention_bwd_delta_f32")
    bwd = fn("attention.cu", f"aicfc_attention_bwd_f32_d{d}", at.attention_bwd_shared(d))
    grid, rows = (b * h, -(-t // at.TILE)), b * h * t
    t_f = time_cupy(lambda: fwd(grid, (128,), q, k, v, off, out, lse, *sc))

    def backward() -> None:
        dpre(
            at.attention_delta_grid(rows, d), (256,), out, dout, delta, np.int32(rows), np.int32(d)
        )
        bwd(grid, (at.attention_bwd_threads(d),), q, k, v, dout, lse, off, dq, dk, dv, delta, *sc)

    t_b = time_cupy(backward)
    flops = 4 * b * h * t * t * d / 2  # causal: half of 4 B H T^2 d
    qt, kt, vt = (torch.as_tensor(a, device="cuda").clone().requires_grad_(True) for a in (q, k, v))
    dt = torch.as_tensor(dout, device="cuda")

    def sdpa() -> Any:
        return torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, dropout_p=p, is_causal=True
        )

    with torch.no_grad():
        p_f = time_torch(lambda: sdpa())
    p_fb = time_torch(lambda: torch.autograd.grad(sdpa(), (qt, kt, vt), dt))
    tag = f"[{b}, {h}, {t}, {d}]" + (f" p={p}" if p else "")
    report(f"attention fwd {tag}", t_f, flops, "TFLOP/s", p_f)
    report("attention bwd (delta + dq dk dv)", t_b, 2.5 * flops, "TFLOP/s", None)
    report("  fwd + bwd", t_f + t_b, 3.5 * flops, "TFLOP/s", p_fb)


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}: {SMS} SMs; CUDA-graph replay, µs per launch sequence")
    for name, cfg in CONFIGS.items():
        b, t, c, h, v = cfg["B"], cfg["T"], cfg["C"], cfg["H"], cfg["V"]
        print(f"{name}: B {b}, T {t}, d_model {c}, heads {h}, V {v}")
        bench_layer_norm(b * t, c)
        bench_embedding(b * t, v, c)
        bench_cross_entropy(b * t, v)
        bench_attention(b, h, t, c // h, 0.0)
        bench_attention(b, h, t, c // h, 0.1)
    print("large shapes")
    bench_cross_entropy(8192, 50257)
    bench_embedding(16384, 50257, 768)
    bench_layer_norm(16384, 8192)
    bench_attention(8, 12, 1024, 64, 0.0)
    bench_attention(4, 16, 1024, 128, 0.0)


if __name__ == "__main__":
    main()
