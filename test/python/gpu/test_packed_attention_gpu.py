"""Packed-qkv attention (graph.packed_qkv_attention and its gradient) on the GPU at
nanoGPT-char's shapes (batch 64, T 256, 6 heads of 64: qkv [64, 256, 1152]).

The kernels are compiled by NVRTC and bound by their registry entries' launchers as a
loaded program binds them (runtime/cuda/launch.py, a DeviceContext); the oracle is the
NumPy reference (runtime/reference.py packed_qkv_attention{,_grad}) in float64 on the same
fresh random inputs, by norm-wise relative error (1e-5, strict fp32). Outputs start as
NaN, so an unwritten element fails. Also: ragged T with 3 heads and the row kernels (head
dims the tiled kernels do not take), dropout, and two backward runs bit for bit equal.
The emulated tests (test_packed_attention_kernels_emulated.py) cover the small shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime import reference
from gpu.gpu_support import F32_TOL, gpu, rel_err
from gpu.test_transformer_kernels_gpu import bind, run

pytestmark = gpu

TOL = F32_TOL

CASES = [
    # (kind, N, T, H, d, causal, p)
    ("tiled", 64, 256, 6, 64, True, 0.0),  # nanogpt-char
    ("tiled", 64, 256, 6, 64, True, 0.1),  # nanogpt-char with attention dropout
    ("tiled", 4, 130, 3, 32, True, 0.0),  # ragged last tile
    ("tiled", 2, 200, 1, 128, False, 0.2),
    ("rows", 16, 256, 6, 64, True, 0.1),  # a quarter of nanogpt-char, the row kernels
    ("rows", 4, 77, 3, 48, True, 0.0),  # a head dim only the row kernels take
]


def names(kind: str, d: int) -> tuple[str, str]:
    if kind == "tiled":
        return (f"cuda.packed_qkv_attention_f32_d{d}", f"cuda.packed_qkv_attention_grad_f32_d{d}")
    return ("cuda.packed_qkv_attention_rows_f32", "cuda.packed_qkv_attention_grad_rows_f32")


@pytest.mark.parametrize(
    ("kind", "n", "t", "heads", "d", "causal", "p"),
    CASES,
    ids=[f"{k}-N{n}T{t}H{h}d{d}{'c' if c else ''}p{p}" for k, n, t, h, d, c, p in CASES],
)
def test_packed_attention_matches_the_numpy_reference(kind, n, t, heads, d, causal, p):
    import cupy

    rng = np.random.default_rng(8000 + t + d)
    width = heads * d
    qkv = rng.standard_normal((n, t, 3 * width)).astype(np.float32)
    dout = rng.standard_normal((n, t, width)).astype(np.float32)
    seed, offset = 1234, 3
    params = {"num_heads": heads, "scale": 1.0 / np.sqrt(d), "causal": causal}
    params |= {"dropout_p": p, "seed": seed}
    off = np.array(offset, np.int64)
    fwd, bwd = names(kind, d)
    qkv_d, dout_d, off_d = cupy.asarray(qkv), cupy.asarray(dout), cupy.asarray(off)
    out = cupy.full((n, t, width), np.nan, np.float32)
    lse = cupy.full((n, heads, t), np.nan, np.float32)
    run(bind(fwd, [qkv_d, off_d] if p else [qkv_d], [out, lse], params)[0])
    kw = dict(params)
    ref_out, ref_lse = reference.packed_qkv_attention(
        qkv.astype(np.float64), off if p else None, **kw
    )
    assert rel_err(cupy.asnumpy(out), ref_out) < TOL
    assert rel_err(cupy.asnumpy(lse), ref_lse) < TOL
    dqkv = cupy.full(qkv.shape, np.nan, np.float32)
    ins = [dout_d, qkv_d, out, lse] + ([off_d] if p else [])
    launches, _ = bind(bwd, ins, [dqkv], params)
    run(launches)
    first = dqkv.copy()
    run(launches)
    assert bool((first == dqkv).all())  # deterministic: no atomics
    (ref_dqkv,) = reference.packed_qkv_attention_grad(
        dout.astype(np.float64), qkv.astype(np.float64), ref_out, ref_lse, off if p else None, **kw
    )
    assert rel_err(cupy.asnumpy(first), ref_dqkv) < TOL
