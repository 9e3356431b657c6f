"""kernels/attention_mma.cu (packed-qkv attention on tensor cores, bf16 / f16 storage) on the
CPU, emulated, behind the backend's real launchers (registry entry -> runtime/cuda/
launchers/attention.py -> ABI conversion -> kernel).

The oracle is the float64 NumPy reference (runtime/reference.py packed_qkv_attention{,
_grad}) of the inputs as the kernel reads them (qkv and dout rounded to the storage dtype),
and, for the backward, of the kernel's own out (bf16, what the step saves) and lse. Errors
are norm-wise relative with tolerance TOL = 2e-2 for bf16 and 4e-3 for f16: the kernels
round P (and dS) to the storage dtype before their second product, as FlashAttention does
(relative rounding error 2^-9 for bf16, 2^-12 for f16 per element, which averages down
over the 64-key sums but not below it), and the outputs once more; the lse is float32 from
float32 sums (1e-5). Outputs are poisoned with NaN (a row the kernel does not write shows
up). T covers one query, one ragged tile, exactly one tile and three tiles with a ragged
one (1, 17, 64, 130), causal and not, heads 1 and 2, head dims 32, 64 and 128.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOL = {"bf16": 2e-2, "f16": 4e-3}
LSE_TOL = 1e-5


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def poison(dtype, *shape: int) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32).astype(dtype))


def params(heads: int, scale: float, causal: bool) -> dict:
    return {"num_heads": heads, "scale": scale, "causal": causal}


def forward(qkv, heads, scale, causal, dt):
    n, t, w = qkv.shape
    out, lse = poison(qkv.dtype, n, t, w // 3), poison(np.float32, n, heads, t)
    spec = registry.get(f"cuda.packed_qkv_attention_{dt}_d{w // (3 * heads)}")
    for la in launches_for(spec, [EmuArray(qkv)], [out, lse], params(heads, scale, causal),
                           EmuContext()):  # fmt: skip
        la(NullStream())
    return out.array, lse.array


def backward(dout, qkv, out, lse, heads, scale, causal, dt):
    dqkv = poison(qkv.dtype, *qkv.shape)
    spec = registry.get(f"cuda.packed_qkv_attention_grad_{dt}_d{qkv.shape[-1] // (3 * heads)}")
    ctx = EmuContext()
    ins = [EmuArray(a) for a in (dout, qkv, out, lse)]
    launches = launches_for(spec, ins, [dqkv], params(heads, scale, causal), ctx)
    assert [la.name for la in launches] == [
        f"cuda.attention_bwd_delta_packed_{dt}",
        spec.name,
    ]
    for la in launches:
        la(NullStream())
    (delta,) = ctx.keep
    return dqkv.array, delta.array.view(np.float32)[: lse.size]


CASES = [
    # (dtype, N, T, H, d, causal); the emulator runs one std::thread per CUDA thread and
    # every mma as 64 warp shuffles, so the shapes are the smallest that reach each path
    ("bf16", 1, 1, 2, 64, True),  # one query, one key, two heads
    ("bf16", 2, 17, 1, 64, True),  # a ragged tile, two batches
    ("bf16", 1, 64, 1, 64, False),  # exactly one tile
    ("bf16", 1, 130, 1, 32, True),  # three query and key tiles, the last ragged
    ("bf16", 1, 9, 1, 128, True),
    ("f16", 1, 17, 1, 64, False),
]
IDS = [f"{dt}-N{n}T{t}H{h}d{d}{'c' if c else ''}" for dt, n, t, h, d, c in CASES]


@pytest.mark.parametrize(("dt", "n", "t", "heads", "d", "causal"), CASES, ids=IDS)
def test_mma_packed_attention_matches_the_numpy_reference(dt, n, t, heads, d, causal):
    rng = np.random.default_rng(8100 + t * heads + d)
    width, low = heads * d, LOW[dt]
    qkv = rng.standard_normal((n, t, 3 * width)).astype(low)
    dout = rng.standard_normal((n, t, width)).astype(low)
    scale = 1.0 / np.sqrt(d)
    kw = {"num_heads": heads, "scale": scale, "causal": causal}
    q64, do64 = qkv.astype(np.float64), dout.astype(np.float64)
    ref_out, ref_lse = reference.packed_qkv_attention(q64, **kw)
    out, lse = forward(qkv, heads, scale, causal, dt)
    assert out.dtype == low and lse.dtype == np.float32
    assert rel_err(out.astype(np.float64), ref_out) < TOL[dt]
    assert rel_err(lse, ref_lse) < LSE_TOL
    # the backward of what the step saved: the kernel's bf16 out and f32 lse
    out64, lse64 = out.astype(np.float64), lse.astype(np.float64)
    (ref_dqkv,) = reference.packed_qkv_attention_grad(do64, q64, out64, lse64, **kw)
    dqkv, delta = backward(dout, qkv, out, lse, heads, scale, causal, dt)
    assert dqkv.dtype == low
    for part in range(3):  # dq, dk, dv each (dq is tiny where T = 1: all of it still counts)
        cols = slice(part * width, (part + 1) * width)
        got, want = dqkv[..., cols].astype(np.float64), ref_dqkv[..., cols]
        if np.abs(want).max() > 1e-6:
            assert rel_err(got, want) < TOL[dt], f"part {part}"
        else:
            assert np.abs(got).max() < 1e-3, f"part {part}"
    heads_of = lambda x: x.reshape(n, t, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    ref_delta = (heads_of(do64) * heads_of(out64)).sum(-1).reshape(-1)
    assert rel_err(delta, ref_delta) < LSE_TOL
