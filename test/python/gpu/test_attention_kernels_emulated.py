"""kernels/attention.cu on the CPU: fused attention forward and backward, emulated.

The kernels have no registry entries or launchers yet (issue 11 defines the op), so
the tests call them through cuda_emu with the grid, block and dynamic shared memory
that attention.cu's header states (gpu/transformer_launch.py, meant to move into the
launcher). The oracle is float64 PyTorch (CPU): scores, causal mask, logsumexp,
softmax, the dropout mask of runtime/reference.py's dropout_keep on the flattened
[B, H, T, T] probabilities, the product with v, and torch.autograd for dq, dk, dv.
Inputs are fresh random arrays from a seeded generator, outputs are poisoned with
NaN, errors are norm-wise relative (1e-5, strict fp32). The emulator runs one
std::thread per CUDA thread, so the shapes are small: T in {1, 5, 17, 64, 70, 130}
(ragged last tiles, one and three tiles), d in {32, 64, 128}.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aicfc.runtime import reference
from gpu import cuda_emu
from gpu import transformer_launch as tl
from gpu.cuda_emu import EmuArray, EmuFunction
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

TOL = F32_TOL


def kernel(symbol: str) -> EmuFunction:
    return EmuFunction(cuda_emu.build("attention.cu"), symbol)


def poison(*shape: int) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32))


def scalars(bh: int, t: int, scale: float, causal: bool, p: float, seed: int) -> tuple:
    return (
        np.int32(bh),
        np.int32(t),
        np.float32(scale),
        np.int32(causal),
        np.float64(p),
        np.int64(seed),
    )


def attention_forward(q, k, v, scale, causal, p=0.0, seed=0, offset=0):
    """(out, lse) from aicfc_attention_fwd_f32_d{d}."""
    b, h, t, d = q.shape
    out, lse = poison(b, h, t, d), poison(b, h, t)
    off = EmuArray(np.array(offset, np.int64)) if p > 0 else 0
    args = (
        EmuArray(q),
        EmuArray(k),
        EmuArray(v),
        off,
        out,
        lse,
        *scalars(b * h, t, scale, causal, p, seed),
    )
    kernel(f"aicfc_attention_fwd_f32_d{d}")(
        tl.attention_grid(b * h, t), (128,), args, shared_mem=tl.attention_fwd_shared(d)
    )
    return out.array, lse.array


def attention_backward(q, k, v, out, lse, dout, scale, causal, p=0.0, seed=0, offset=0):
    """(dq, dk, dv) from the delta pre-pass and aicfc_attention_bwd_f32_d{d}."""
    b, h, t, d = q.shape
    rows = b * h * t
    delta = poison(rows)  # the workspace: every entry is written by the pre-pass
    kernel("aicfc_attention_bwd_delta_f32")(
        tl.attention_delta_grid(rows, d),
        (256,),
        (EmuArray(out), EmuArray(dout), delta, np.int32(rows), np.int32(d)),
    )
    dq, dk, dv = poison(b, h, t, d), poison(b, h, t, d), poison(b, h, t, d)
    off = EmuArray(np.array(offset, np.int64)) if p > 0 else 0
    ins = (EmuArray(q), EmuArray(k), EmuArray(v), EmuArray(dout), EmuArray(lse), off)
    args = (*ins, dq, dk, dv, delta, *scalars(b * h, t, scale, causal, p, seed))
    kernel(f"aicfc_attention_bwd_f32_d{d}")(
        tl.attention_grid(b * h, t),
        (tl.attention_bwd_threads(d),),
        args,
        shared_mem=tl.attention_bwd_shared(d),
    )
    return dq.array, dk.array, dv.array, delta.array


def keep_mask(shape: tuple[int, ...], p: float, seed: int, offset: int) -> np.ndarray:
    """graph.dropout's mask of the flattened [B, H, T, T] probabilities (reference.py)."""
    b, h, t, _ = shape
    return reference.dropout_keep(b * h * t * t, offset, p, seed).reshape(b, h, t, t)


def torch_attention(q, k, v, scale, causal, keep=None, p=0.0):
    """float64 (out, lse, leaves): softmax(scale q k^T, causal) (dropout) v."""
    qt, kt, vt = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    s = scale * qt @ kt.transpose(-1, -2)
    if causal:
        t = q.shape[2]
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    prob = torch.softmax(s, -1)
    if keep is not None:
        prob = prob * torch.tensor(keep, dtype=torch.float64) / (1.0 - p)
    return prob @ vt, lse, (qt, kt, vt)


def inputs(seed: int, b: int, h: int, t: int, d: int):
    rng = np.random.default_rng(seed)
    q, k, v, dout = (rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(4))
    return q, k, v, dout


CASES = [
    # (B, H, T, d, causal)
    (1, 1, 1, 32, True),
    (1, 2, 5, 32, False),
    (2, 1, 17, 64, True),
    (1, 1, 64, 64, True),
    (1, 1, 64, 32, False),
    (1, 1, 130, 32, True),
    (1, 1, 17, 128, True),
    (1, 1, 70, 64, False),
]
IDS = [f"B{b}H{h}T{t}d{d}{'c' if c else ''}" for b, h, t, d, c in CASES]


@pytest.mark.parametrize(("b", "h", "t", "d", "causal"), CASES, ids=IDS)
def test_attention_forward_and_backward_match_torch(b, h, t, d, causal):
    q, k, v, dout = inputs(1000 + t + d, b, h, t, d)
    scale = 0.3
    out, lse = attention_forward(q, k, v, scale, causal)
    ref, ref_lse, leaves = torch_attention(q, k, v, scale, causal)
    assert rel_err(out, ref.detach().numpy()) < TOL
    assert rel_err(lse, ref_lse.detach().numpy()) < TOL
    dq, dk, dv, delta = attention_backward(q, k, v, out, lse, dout, scale, causal)
    ref.backward(torch.tensor(dout.astype(np.float64)))
    assert (
        rel_err(delta, (dout.astype(np.float64) * ref.detach().numpy()).sum(-1).reshape(-1)) < TOL
    )
    for got, leaf in zip((dq, dk, dv), leaves, strict=True):
        assert rel_err(got, leaf.grad.numpy()) < TOL


DROPOUT_CASES = [(1, 2, 17, 32, True, 0.2), (1, 1, 70, 64, False, 0.1), (1, 1, 12, 128, True, 0.5)]


@pytest.mark.parametrize(
    ("b", "h", "t", "d", "causal", "p"),
    DROPOUT_CASES,
    ids=[f"T{t}d{d}p{p}" for _, _, t, d, _, p in DROPOUT_CASES],
)
def test_attention_dropout_is_graph_dropout_of_the_probabilities(b, h, t, d, causal, p):
    q, k, v, dout = inputs(2000 + t + d, b, h, t, d)
    scale, seed, offset = 0.25, (1 << 33) + 17, 5
    keep = keep_mask(q.shape, p, seed, offset)
    assert 0 < keep.mean() < 1
    out, lse = attention_forward(q, k, v, scale, causal, p, seed, offset)
    ref, ref_lse, leaves = torch_attention(q, k, v, scale, causal, keep, p)
    assert rel_err(out, ref.detach().numpy()) < TOL
    assert rel_err(lse, ref_lse.detach().numpy()) < TOL  # of the probabilities before dropout
    dq, dk, dv, _ = attention_backward(q, k, v, out, lse, dout, scale, causal, p, seed, offset)
    ref.backward(torch.tensor(dout.astype(np.float64)))
    for got, leaf in zip((dq, dk, dv), leaves, strict=True):
        assert rel_err(got, leaf.grad.numpy()) < TOL


def test_attention_dropout_offset_draws_another_mask():
    q, k, v, _ = inputs(3000, 1, 1, 9, 32)
    a, _ = attention_forward(q, k, v, 0.2, True, 0.3, 11, 0)
    b, _ = attention_forward(q, k, v, 0.2, True, 0.3, 11, 1)
    ref, _, _ = torch_attention(q, k, v, 0.2, True, keep_mask(q.shape, 0.3, 11, 1), 0.3)
    assert not np.array_equal(a, b) and rel_err(b, ref.detach().numpy()) < TOL


def test_attention_is_bit_identical_across_runs():
    q, k, v, dout = inputs(4000, 1, 2, 70, 32)
    first = attention_forward(q, k, v, 0.2, True, 0.1, 3, 2)
    again = attention_forward(q, k, v, 0.2, True, 0.1, 3, 2)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(first, again, strict=True))
    out, lse = first
    grads = attention_backward(q, k, v, out, lse, dout, 0.2, True, 0.1, 3, 2)
    grads_again = attention_backward(q, k, v, out, lse, dout, 0.2, True, 0.1, 3, 2)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(grads, grads_again, strict=True))


def test_attention_backward_oracle_agrees_with_finite_differences():
    # The torch oracle above (autograd through scores, mask, dropout and softmax) checked
    # once against float64 central differences of the forward formula.
    b, h, t, d = 1, 1, 5, 4
    rng = np.random.default_rng(5000)
    q, k, v, dout = (rng.standard_normal((b, h, t, d)) for _ in range(4))
    keep = keep_mask((b, h, t, d), 0.3, 9, 0)

    def loss(qq: np.ndarray) -> float:
        out, _, _ = torch_attention(qq, k, v, 0.5, True, keep, 0.3)
        return float((out.detach().numpy() * dout).sum())

    out, _, (qt, _, _) = torch_attention(q, k, v, 0.5, True, keep, 0.3)
    out.backward(torch.tensor(dout))
    fd = np.zeros_like(q)
    for i in np.ndindex(q.shape):
        e = np.zeros_like(q)
        e[i] = 1e-6
        fd[i] = (loss(q + e) - loss(q - e)) / 2e-6
    assert rel_err(qt.grad.numpy(), fd) < 1e-7
