"""Packed-qkv attention (graph.packed_qkv_attention and its gradient) on the CPU, emulated:
attention.cu's tiled kernels (head dims 32, 64, 128) and attention_rows.cu's (any head dim
up to 128) reading q, k, v in place from qkv [N, T, 3D], writing out [N, T, D] and dqkv
[N, T, 3D].

Each case runs behind the backend's real launchers (registry entry -> runtime/cuda/
launchers/attention.py or attention_rows.py -> ABI conversion -> kernel). The oracle is
the NumPy reference (runtime/reference.py packed_qkv_attention{,_grad}) in float64 on
fresh random inputs; outputs are poisoned with NaN (a row the kernel does not write shows
up), errors are norm-wise relative (1e-5, strict fp32). T is ragged (not a multiple of the
64-query tile or of the row kernels' 8 warps), heads 1 and 3.
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

TOL = F32_TOL


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def names(kind: str, d: int) -> tuple[str, str]:
    """The registry entries (forward, backward) of `kind` for head dim d."""
    if kind == "tiled":
        return (f"cuda.packed_qkv_attention_f32_d{d}", f"cuda.packed_qkv_attention_grad_f32_d{d}")
    return ("cuda.packed_qkv_attention_rows_f32", "cuda.packed_qkv_attention_grad_rows_f32")


def poison(*shape: int) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32))


def params(heads: int, scale: float, causal: bool, p: float, seed: int) -> dict:
    return {"num_heads": heads, "scale": scale, "causal": causal, "dropout_p": p, "seed": seed}


def run(launches) -> None:
    for la in launches:
        la(NullStream())


def forward(qkv, heads, scale, causal, p, seed, offset, kind):
    n, t, w = qkv.shape
    out, lse = poison(n, t, w // 3), poison(n, heads, t)
    ins = [EmuArray(qkv)] + ([EmuArray(np.array(offset, np.int64))] if p > 0 else [])
    spec = registry.get(names(kind, w // (3 * heads))[0])
    launches = launches_for(
        spec, ins, [out, lse], params(heads, scale, causal, p, seed), EmuContext()
    )
    run(launches)
    return out.array, lse.array


def backward(dout, qkv, out, lse, heads, scale, causal, p, seed, offset, kind):
    dqkv = poison(*qkv.shape)
    ins = [EmuArray(a) for a in (dout, qkv, out, lse)]
    ins += [EmuArray(np.array(offset, np.int64))] if p > 0 else []
    spec = registry.get(names(kind, qkv.shape[-1] // (3 * heads))[1])
    ctx = EmuContext()
    launches = launches_for(spec, ins, [dqkv], params(heads, scale, causal, p, seed), ctx)
    assert len(launches) == 2  # delta (or dq with delta) and the gradients
    run(launches)
    (delta,) = ctx.keep
    return dqkv.array, delta.array.view(np.float32)[: lse.size]


CASES = [
    # (kind, N, T, H, d, causal, p)
    ("tiled", 1, 5, 1, 32, True, 0.0),
    ("tiled", 2, 17, 3, 32, True, 0.0),
    ("tiled", 1, 70, 3, 32, False, 0.0),
    ("tiled", 1, 9, 1, 64, True, 0.2),
    ("tiled", 1, 3, 3, 128, True, 0.0),
    ("rows", 2, 9, 3, 16, True, 0.0),
    ("rows", 1, 13, 1, 40, False, 0.0),
    ("rows", 1, 11, 3, 8, True, 0.3),
]
IDS = [f"{k}-N{n}T{t}H{h}d{d}{'c' if c else ''}p{p}" for k, n, t, h, d, c, p in CASES]


@pytest.mark.parametrize(("kind", "n", "t", "heads", "d", "causal", "p"), CASES, ids=IDS)
def test_packed_attention_matches_the_numpy_reference(kind, n, t, heads, d, causal, p):
    rng = np.random.default_rng(7000 + t * heads + d)
    width = heads * d
    qkv = rng.standard_normal((n, t, 3 * width)).astype(np.float32)
    dout = rng.standard_normal((n, t, width)).astype(np.float32)
    scale, seed, offset = 0.3, 11, 3
    kw = {"num_heads": heads, "scale": scale, "causal": causal, "dropout_p": p, "seed": seed}
    off = np.array(offset, np.int64) if p > 0 else None
    ref_out, ref_lse = reference.packed_qkv_attention(qkv.astype(np.float64), off, **kw)
    out, lse = forward(qkv, heads, scale, causal, p, seed, offset, kind)
    assert rel_err(out, ref_out) < TOL
    assert rel_err(lse, ref_lse) < TOL
    (ref_dqkv,) = reference.packed_qkv_attention_grad(
        dout.astype(np.float64), qkv.astype(np.float64), ref_out, ref_lse, off, **kw
    )
    dqkv, delta = backward(dout, qkv, out, lse, heads, scale, causal, p, seed, offset, kind)
    assert rel_err(dqkv, ref_dqkv) < TOL
    # Delta in (n H + h) T + i order: rowsum(dout o out) of the heads
    heads_of = lambda x: x.reshape(n, t, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    ref_delta = (heads_of(dout.astype(np.float64)) * heads_of(ref_out)).sum(-1).reshape(-1)
    assert rel_err(delta, ref_delta) < TOL


def test_packed_and_plain_kernels_agree_bitwise():
    # the same kernel body on the same numbers, reached through two layouts
    rng = np.random.default_rng(7100)
    n, t, heads, d = 1, 17, 3, 32
    qkv = rng.standard_normal((n, t, 3 * heads * d)).astype(np.float32)
    out, lse = forward(qkv, heads, 0.2, True, 0.0, 0, 0, "tiled")
    q, k, v = (
        np.ascontiguousarray(x.reshape(n, t, heads, d).transpose(0, 2, 1, 3))
        for x in np.split(qkv, 3, axis=-1)
    )
    o, lse_plain = poison(n, heads, t, d), poison(n, heads, t)
    spec = registry.get(f"cuda.scaled_dot_product_attention_f32_d{d}")
    ps = {"scale": 0.2, "causal": True, "dropout_p": 0.0, "seed": 0}
    ins = [EmuArray(q), EmuArray(k), EmuArray(v)]
    run(launches_for(spec, ins, [o, lse_plain], ps, EmuContext()))
    merged = o.array.transpose(0, 2, 1, 3).reshape(n, t, heads * d)
    assert merged.tobytes() == out.tobytes() and lse_plain.array.tobytes() == lse.tobytes()
