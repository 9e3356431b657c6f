"""Packed-qkv attention on tensor cores (kernels/attention_mma.cu: bf16 / f16 storage,
float32 statistics and accumulation) on the GPU at nanoGPT-char's shapes (batch 64, T 256,
6 heads of 64: qkv [64, 256, 1152]) and two ragged ones.

The kernels are compiled by NVRTC and bound by their registry entries' launchers as a
loaded program binds them; buffers are passed as 16-bit words (uint16 arrays: the kernels
read raw bits), so any CuPy runs them. The oracle is the NumPy reference (runtime/
reference.py) in float64 of the inputs rounded to the storage dtype, the backward's from
the kernel's own out and lse (what the step saves); norm-wise relative errors within the
tolerances of test_attention_mma_emulated.py (2e-2 bf16, 4e-3 f16: P and dS rounded to the
storage dtype before their second product, as FlashAttention does, and the outputs once;
1e-5 for the float32 lse). Outputs start as NaN, so an unwritten element fails; two
backward runs are bit for bit equal (no atomics).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aicfc.runtime import reference
from gpu.gpu_support import gpu, rel_err
from gpu.test_transformer_kernels_gpu import bind, run

pytestmark = gpu

LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOL = {"bf16": 2e-2, "f16": 4e-3}
LSE_TOL = 1e-5

CASES = [
    # (dtype, N, T, H, d, causal)
    ("bf16", 64, 256, 6, 64, True),  # nanogpt-char
    ("f16", 64, 256, 6, 64, True),
    ("bf16", 4, 130, 3, 32, True),  # ragged last tile
    ("bf16", 2, 200, 2, 128, False),
]


@pytest.mark.parametrize(
    ("dt", "n", "t", "heads", "d", "causal"),
    CASES,
    ids=[f"{dt}-N{n}T{t}H{h}d{d}{'c' if c else ''}" for dt, n, t, h, d, c in CASES],
)
def test_mma_packed_attention_matches_the_numpy_reference(dt, n, t, heads, d, causal):
    import cupy

    rng = np.random.default_rng(8200 + t + d)
    width, low = heads * d, LOW[dt]
    qkv = rng.standard_normal((n, t, 3 * width)).astype(low)
    dout = rng.standard_normal((n, t, width)).astype(low)
    params = {"num_heads": heads, "scale": 1.0 / np.sqrt(d), "causal": causal}
    words = lambda a: cupy.asarray(a.view(np.uint16))  # noqa: E731
    nan = lambda *shape: cupy.asarray(np.full(shape, np.nan, low).view(np.uint16))  # noqa: E731
    qkv_d, dout_d = words(qkv), words(dout)
    out, lse = nan(n, t, width), cupy.full((n, heads, t), np.nan, np.float32)
    run(bind(f"cuda.packed_qkv_attention_{dt}_d{d}", [qkv_d], [out, lse], params)[0])
    q64, do64 = qkv.astype(np.float64), dout.astype(np.float64)
    ref_out, ref_lse = reference.packed_qkv_attention(q64, **params)
    got_out = cupy.asnumpy(out).view(low).astype(np.float64)
    got_lse = cupy.asnumpy(lse).astype(np.float64)
    assert rel_err(got_out, ref_out) < TOL[dt]
    assert rel_err(got_lse, ref_lse) < LSE_TOL
    dqkv = nan(*qkv.shape)
    grad = f"cuda.packed_qkv_attention_grad_{dt}_d{d}"
    launches, _ = bind(grad, [dout_d, qkv_d, out, lse], [dqkv], params)
    run(launches)
    first = dqkv.copy()
    run(launches)
    assert bool((first == dqkv).all())  # deterministic: no atomics
    (ref_dqkv,) = reference.packed_qkv_attention_grad(do64, q64, got_out, got_lse, **params)
    got = cupy.asnumpy(first).view(low).astype(np.float64)
    for part in range(3):  # dq, dk, dv each
        cols = slice(part * width, (part + 1) * width)
        assert rel_err(got[..., cols], ref_dqkv[..., cols]) < TOL[dt], part
