"""GEMM sweep: every CUDA GEMM variant of the registry over (M, N, K), with errors.

    python tools/bench_gemm.py [--json out.json] [--sizes 128x256x784,4096x4096x4096]

For each size and variant (our SIMT fp32 kernels with 64- and 128-wide tiles,
our TF32 WMMA kernel, cuBLASLt strict fp32 and cuBLASLt TF32) it launches
gemm_epilogue (bias + ReLU, Y = relu(X W^T + b), the forward of a Linear
layer: transpose_b) through the backend's own launch path, and reports the
median time per launch (CUDA events; 3 warm-ups, then the median of 5 batches
of launches), TFLOP/s counting 2*M*N*K, and the error against a float64
product on the GPU: norm-wise relative error and the largest element error
relative to the largest |reference| element. Inputs are random normal; the
output is poisoned with NaN before the first launch. It also measures the
ceilings used in BENCHMARKS.md: a device-to-device copy (bytes read + written)
and cuBLAS's 8192^3 product in strict fp32 (CuPy's matmul); the TF32 ceiling is
the cuBLASLt TF32 row of the largest size.

`--small` instead times the eight products of the small MLP train step
(batch 128, 784-256-256-10) in their own transposes, each variant that can
run them (our skinny and split-K kernels of gemm_small.cu, our 64x64 tile,
cuBLASLt strict fp32, including the 10-wide layer's 40-byte rows), with 50
launches captured in one CUDA graph per timing (device time per launch, the
way a replayed step runs them, not Python's launch rate), and shows the
selector's rule choice next to them.

Not a test: a tool that prints a table (docs/design.md#kernel-selection).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import numpy as np

from aicfc.runtime.files import write_text

VARIANTS = {
    "own skinny": "cuda.gemm_epilogue_skinny_nt",
    "own split-K": "cuda.gemm_epilogue_splitk_nt",
    "own f32 s64": "cuda.gemm_epilogue_f32_s64_nt",
    "own f32 128": "cuda.gemm_epilogue_f32_nt",
    "own tf32 wmma": "cuda.gemm_epilogue_tf32_nt",
    "cuBLASLt f32": "cuda.gemm_epilogue_cublaslt_f32",
    "cuBLASLt tf32": "cuda.gemm_epilogue_cublaslt_tf32",
}
DEFAULT_SIZES = [
    (128, 256, 784),
    (128, 10, 256),
    (1024, 4096, 1024),
    (1024, 1024, 4096),
    (4096, 4096, 4096),
    (8192, 8192, 4096),
    (8192, 4096, 8192),
]


def time_fn(fn: Any, stream: Any, repeats: int) -> float:
    """Median seconds per call of `fn(stream)` (CUDA events, 3 warm-ups, 5 batches)."""
    import cupy

    for _ in range(3):
        fn(stream)
    samples = []
    for _ in range(5):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(repeats):
            fn(stream)
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / repeats)
    return statistics.median(samples)


def ceilings() -> dict[str, float]:
    """Measured copy bandwidth (bytes/s) and cuBLAS fp32 / TF32 rates (FLOP/s)."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    n = 1 << 28  # 1 GiB of float32
    src = cupy.random.standard_normal(n, dtype=np.float32)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime

    def copy(s: Any) -> None:
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice, s.ptr)

    copy_s = time_fn(copy, stream, 10)
    out: dict[str, float] = {"copy_bytes_per_s": 2 * n * 4 / copy_s}
    m = 8192
    a = cupy.random.standard_normal((m, m), dtype=np.float32)
    b = cupy.random.standard_normal((m, m), dtype=np.float32)
    # CuPy's cuBLAS product computes in strict fp32 unless CUPY_TF32=1 was set.
    t = time_fn(lambda s: cupy.matmul(a, b), cupy.cuda.Stream.null, 5)
    out["cublas_f32_flops"] = 2 * m**3 / t
    return out


def run_variant(kernel: str, m: int, n: int, k: int, ctx: Any, stream: Any) -> dict[str, Any]:
    """Time one variant on fresh random X [M, K], W [N, K], b [N]; error vs float64."""
    import cupy

    from aicfc.runtime import registry
    from aicfc.runtime.cuda.launch import launches_for

    spec = registry.get(kernel)
    rng = cupy.random.default_rng(m * 7 + n * 3 + k)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    y = cupy.full((m, n), np.nan, dtype=np.float32)
    params = {"act": "relu", "transpose_b": True}
    launches = launches_for(spec, [x, w, bias], [y], params, ctx)
    cupy.cuda.runtime.deviceSynchronize()  # the poison fill ran on the null stream

    def call(s: Any) -> None:
        for la in launches:
            la(s)

    call(stream)
    stream.synchronize()
    ref = cupy.maximum(x.astype(np.float64) @ w.astype(np.float64).T + bias, 0.0)
    diff = y.astype(np.float64) - ref
    rel = float(cupy.linalg.norm(diff) / cupy.linalg.norm(ref))
    max_rel = float(cupy.abs(diff).max() / cupy.abs(ref).max())
    flops = 2.0 * m * n * k
    repeats = max(1, min(200, int(2e10 / flops)))
    t = time_fn(call, stream, repeats)
    return {"seconds": t, "tflops": flops / t / 1e12, "rel_err": rel, "max_rel_err": max_rel}


SMALL_PRODUCTS = [
    # name, M, N, K, transpose_a, transpose_b, act (None: graph.matmul)
    ("fwd1 relu(X W1^T + b)", 128, 256, 784, False, True, "relu"),
    ("fwd2 relu(H W2^T + b)", 128, 256, 256, False, True, "relu"),
    ("fwd3 H W3^T + b (N=10)", 128, 10, 256, False, True, "none"),
    ("dX3 = dY W3 (K=10)", 128, 256, 10, False, False, None),
    ("dW3 = dY^T H (M=10)", 10, 256, 128, True, False, None),
    ("dX2 = dZ W2", 128, 256, 256, False, False, None),
    ("dW2 = dZ^T H", 256, 256, 128, True, False, None),
    ("dW1 = dZ^T X", 256, 784, 128, True, False, None),
]
SMALL_VARIANTS = {
    "skinny": "cuda.{op}_skinny_{pair}",
    "split-K": "cuda.{op}_splitk_{pair}",
    "own s64": "cuda.{op}_f32_s64_{pair}",
    "cuBLASLt f32": "cuda.{op}_cublaslt_f32",
}


def small_products(ctx: Any, stream: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """Every variant of each small-config product, graph-timed, with its error."""
    import cupy

    from aicfc.runtime import registry
    from aicfc.runtime.cuda.autotune import time_launches
    from aicfc.runtime.cuda.launch import launches_for
    from aicfc.runtime.selector import DEFAULT_CAPABILITY, Problem, refusal, select

    rows: list[tuple[str, str, dict[str, Any]]] = []
    for name, m, n, k, ta, tb, act in SMALL_PRODUCTS:
        op = "matmul" if act is None else "gemm_epilogue"
        pair = ("t" if ta else "n") + ("t" if tb else "n")
        rng = cupy.random.default_rng(m + 3 * n + 7 * k)
        a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
        bias = rng.standard_normal(n, dtype=np.float32)
        ins = [a, b] if act is None else [a, b, bias]
        params: dict[str, Any] = {"transpose_a": ta, "transpose_b": tb}
        if act is not None:
            params["act"] = act
        ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        if act is not None:
            ref = ref + bias
            ref = cupy.maximum(ref, 0.0) if act == "relu" else ref
        problem = Problem(
            f"graph.{op}",
            "f32",
            tuple(x.shape for x in ins),
            ((m, n),),
            ("f32",) * len(ins),
            params,
        )
        rule = select(problem, "cuda", DEFAULT_CAPABILITY["cuda"]).spec.name
        for label, pattern in SMALL_VARIANTS.items():
            kernel = pattern.format(op=op, pair=pair)
            spec = registry.get(kernel)
            why = refusal(spec, problem, DEFAULT_CAPABILITY["cuda"])
            if why is not None:
                rows.append((name, label, {"error": f"refused: {why}"}))
                continue
            try:
                y = cupy.full((m, n), np.nan, dtype=np.float32)
                launches = launches_for(spec, ins, [y], params, ctx)
                cupy.cuda.runtime.deviceSynchronize()
                t = time_launches(launches, stream, 50)
                stream.synchronize()
                rel = float(cupy.linalg.norm(y - ref) / cupy.linalg.norm(ref))
                rows.append(
                    (
                        name,
                        label,
                        {"seconds": t, "rel_err": rel, "rule": kernel == rule, "kernel": kernel},
                    )
                )
            except Exception as e:  # a variant that cannot run here is reported, not fatal
                rows.append((name, label, {"error": f"{type(e).__name__}: {e}"}))
    return rows


def print_small(rows: list[tuple[str, str, dict[str, Any]]]) -> None:
    print("Small-config products, graph-timed (50 launches per replay); * = the rules' choice")
    print(f"{'product':>26} {'variant':>13} {'us':>8} {'rel err':>9}")
    for name, label, r in rows:
        if "error" in r:
            print(f"{name:>26} {label:>13}  {r['error'][:70]}")
            continue
        mark = "*" if r["rule"] else " "
        print(f"{name:>26} {label:>13} {r['seconds'] * 1e6:>7.2f}{mark} {r['rel_err']:>9.1e}")


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    sizes = []
    for item in text.split(","):
        m, n, k = (int(v) for v in item.lower().split("x"))
        sizes.append((m, n, k))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write all numbers to this JSON file")
    parser.add_argument("--sizes", help="comma-separated MxNxK (default: the sweep in the source)")
    parser.add_argument("--no-ceilings", action="store_true", help="skip the ceiling measurements")
    parser.add_argument(
        "--small", action="store_true", help="only the small train step's products, graph-timed"
    )
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes) if args.sizes else DEFAULT_SIZES
    import cupy

    from aicfc.runtime.cuda.context import DeviceContext

    ctx = DeviceContext()
    stream = cupy.cuda.Stream(non_blocking=True)
    if args.small:
        small = small_products(ctx, stream)
        if args.json:
            write_text(
                args.json,
                json.dumps([{"product": p, "variant": v, **r} for p, v, r in small], indent=1),
            )  # atomically
        print_small(small)
        return 0
    result: dict[str, Any] = {"sizes": [], "ceilings": {} if args.no_ceilings else ceilings()}
    rows = []
    for m, n, k in sizes:
        entry: dict[str, Any] = {"M": m, "N": n, "K": k, "variants": {}}
        for label, kernel in VARIANTS.items():
            try:
                r = run_variant(kernel, m, n, k, ctx, stream)
            except Exception as e:  # a variant that cannot run here is reported, not fatal
                r = {"error": f"{type(e).__name__}: {e}"}
            entry["variants"][label] = r
            rows.append((f"{m}x{n}x{k}", label, r))
        result["sizes"].append(entry)
    if args.json:
        write_text(args.json, json.dumps(result, indent=1))  # atomically
    print("GEMM sweep: Y = relu(X W^T + b), float32 buffers")
    c = result["ceilings"]
    if c:
        print(
            f"ceilings: copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s, cuBLAS fp32 "
            f"{c['cublas_f32_flops'] / 1e12:.1f} TFLOP/s"
        )
    print(
        f"{'MxNxK':>18} {'variant':>14} {'time us':>10} {'TFLOP/s':>8} "
        f"{'rel err':>9} {'max err':>9}"
    )
    for size, label, r in rows:
        if "error" in r:
            print(f"{size:>18} {label:>14}  {r['error'][:60]}")
            continue
        print(
            f"{size:>18} {label:>14} {r['seconds'] * 1e6:>10.1f} {r['tflops']:>8.2f} "
            f"{r['rel_err']:>9.1e} {r['max_rel_err']:>9.1e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
