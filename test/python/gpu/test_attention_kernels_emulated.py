"""Fused attention forward and backward on the CPU, emulated: attention.cu (tiled, head dims
32, 64, 128) and attention_rows.cu (a warp per row, any head dim up to 128, keys of any
length).

Each case runs behind the backend's real launchers (registry entry ->
runtime/cuda/launchers/attention.py or attention_rows.py: grid, block, dynamic shared
memory, workspace -> ABI conversion -> kernel). The oracle is float64 PyTorch (CPU):
scores, causal mask, logsumexp, softmax, the dropout mask of runtime/reference.py's
dropout_keep on the flattened [B, H, T, S] probabilities, the product with v, and
torch.autograd for dq, dk, dv. Inputs are fresh random arrays from a seeded generator,
outputs are poisoned with NaN, errors are norm-wise relative (1e-5, strict fp32). The
emulator runs one std::thread per CUDA thread, so the shapes are small: T in {1, 5, 17,
64, 70, 130} (ragged last tiles, one and three tiles), d in {32, 64, 128} for both
kernels and {4, 16, 40} for the row kernels, S != T for the row kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

TOL = F32_TOL


KINDS = ("tiled", "rows")
"""attention.cu's kernels (by head dim) and attention_rows.cu's."""


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def poison(*shape: int) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32))


def names(kind: str, d: int) -> tuple[str, str]:
    """The registry entries (forward, backward) of `kind` for head dim d."""
    if kind == "tiled":
        return (
            f"cuda.scaled_dot_product_attention_f32_d{d}",
            f"cuda.scaled_dot_product_attention_grad_f32_d{d}",
        )
    return (
        "cuda.scaled_dot_product_attention_rows_f32",
        "cuda.scaled_dot_product_attention_grad_rows_f32",
    )


def run(launches) -> None:
    for la in launches:
        la(NullStream())


def params(scale, causal, p, seed) -> dict:
    return {"scale": scale, "causal": causal, "dropout_p": p, "seed": seed}


def attention_forward(q, k, v, scale, causal, p=0.0, seed=0, offset=0, kind="tiled"):
    """(out, lse) from the forward kernel of `kind`."""
    *lead, t, d = q.shape
    out, lse = poison(*lead, t, d), poison(*lead, t)
    ins = [EmuArray(q), EmuArray(k), EmuArray(v)]
    if p > 0:
        ins.append(EmuArray(np.array(offset, np.int64)))
    spec = registry.get(names(kind, d)[0])
    run(launches_for(spec, ins, [out, lse], params(scale, causal, p, seed), EmuContext()))
    return out.array, lse.array


def attention_backward(
    q, k, v, out, lse, dout, scale, causal, p=0.0, seed=0, offset=0, kind="tiled"
):
    """(dq, dk, dv, delta) from the backward kernels of `kind` (delta: the workspace)."""
    dq, dk, dv = poison(*q.shape), poison(*k.shape), poison(*v.shape)
    ins = [EmuArray(a) for a in (dout, q, k, v, out, lse)]
    if p > 0:
        ins.append(EmuArray(np.array(offset, np.int64)))
    ctx = EmuContext()
    spec = registry.get(names(kind, q.shape[-1])[1])
    launches = launches_for(spec, ins, [dq, dk, dv], params(scale, causal, p, seed), ctx)
    assert len(launches) == 2
    run(launches)
    (delta,) = ctx.keep
    return dq.array, dk.array, dv.array, delta.array.view(np.float32)[: out.size // q.shape[-1]]


def keep_mask(shape: tuple[int, ...], p: float, seed: int, offset: int, s: int | None = None):
    """graph.dropout's mask of the flattened [B, H, T, S] probabilities (reference.py)."""
    b, h, t, _ = shape
    s = t if s is None else s
    return reference.dropout_keep(b * h * t * s, offset, p, seed).reshape(b, h, t, s)


def torch_attention(q, k, v, scale, causal, keep=None, p=0.0):
    """float64 (out, lse, leaves): softmax(scale q k^T, causal) (dropout) v."""
    qt, kt, vt = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    s = scale * qt @ kt.transpose(-1, -2)
    if causal:
        t, sk = q.shape[2], k.shape[2]
        mask = torch.triu(torch.ones(t, sk, dtype=torch.bool), 1)
        s = s.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    prob = torch.softmax(s, -1)
    if keep is not None:
        prob = prob * torch.tensor(keep, dtype=torch.float64) / (1.0 - p)
    return prob @ vt, lse, (qt, kt, vt)


def inputs(seed: int, b: int, h: int, t: int, d: int, s: int | None = None):
    rng = np.random.default_rng(seed)
    s = t if s is None else s
    q, dout = (rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(2))
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


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("b", "h", "t", "d", "causal"), CASES, ids=IDS)
def test_attention_forward_and_backward_match_torch(b, h, t, d, causal, kind):
    check_against_torch(b, h, t, d, causal, kind)


ROW_CASES = [
    # (B, H, T, d, causal, S): head dims the tiled kernels do not take, S != T
    (1, 2, 9, 16, True, 9),
    (2, 1, 33, 4, False, 33),
    (1, 1, 7, 40, False, 45),
    (1, 1, 20, 16, True, 13),
    (1, 1, 5, 128, True, 70),
]


@pytest.mark.parametrize(
    ("b", "h", "t", "d", "causal", "s"),
    ROW_CASES,
    ids=[f"T{t}S{s}d{d}{'c' if c else ''}" for _, _, t, d, c, s in ROW_CASES],
)
def test_row_kernels_take_any_head_dim_and_key_length(b, h, t, d, causal, s):
    assert registry.get(names("rows", d)[0])  # the tiled kernels refuse these (d or S)
    check_against_torch(b, h, t, d, causal, "rows", s)


def check_against_torch(b, h, t, d, causal, kind, s=None):
    q, k, v, dout = inputs(1000 + t + d, b, h, t, d, s)
    scale = 0.3
    out, lse = attention_forward(q, k, v, scale, causal, kind=kind)
    ref, ref_lse, leaves = torch_attention(q, k, v, scale, causal)
    assert rel_err(out, ref.detach().numpy()) < TOL
    assert rel_err(lse, ref_lse.detach().numpy()) < TOL
    dq, dk, dv, delta = attention_backward(q, k, v, out, lse, dout, scale, causal, kind=kind)
    ref.backward(torch.tensor(dout.astype(np.float64)))
    assert (
        rel_err(delta, (dout.astype(np.float64) * ref.detach().numpy()).sum(-1).reshape(-1)) < TOL
    )
    for got, leaf in zip((dq, dk, dv), leaves, strict=True):
        assert rel_err(got, leaf.grad.numpy()) < TOL


DROPOUT_CASES = [(1, 2, 17, 32, True, 0.2), (1, 1, 70, 64, False, 0.1), (1, 1, 12, 128, True, 0.5)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("b", "h", "t", "d", "causal", "p"),
    DROPOUT_CASES,
    ids=[f"T{t}d{d}p{p}" for _, _, t, d, _, p in DROPOUT_CASES],
)
def test_attention_dropout_is_graph_dropout_of_the_probabilities(b, h, t, d, causal, p, kind):
    dropout_case(b, h, t, d, causal, p, kind)


def test_row_kernels_dropout_over_s_keys():
    dropout_case(1, 2, 11, 16, False, 0.3, "rows", s=19)


def dropout_case(b, h, t, d, causal, p, kind, s=None):
    q, k, v, dout = inputs(2000 + t + d, b, h, t, d, s)
    scale, seed, offset = 0.25, (1 << 33) + 17, 5
    keep = keep_mask(q.shape, p, seed, offset, k.shape[2])
    assert 0 < keep.mean() < 1
    out, lse = attention_forward(q, k, v, scale, causal, p, seed, offset, kind)
    ref, ref_lse, leaves = torch_attention(q, k, v, scale, causal, keep, p)
    assert rel_err(out, ref.detach().numpy()) < TOL
    assert rel_err(lse, ref_lse.detach().numpy()) < TOL  # of the probabilities before dropout
    dq, dk, dv, _ = attention_backward(
        q, k, v, out, lse, dout, scale, causal, p, seed, offset, kind
    )
    ref.backward(torch.tensor(dout.astype(np.float64)))
    for got, leaf in zip((dq, dk, dv), leaves, strict=True):
        assert rel_err(got, leaf.grad.numpy()) < TOL


@pytest.mark.parametrize("kind", KINDS)
def test_attention_dropout_offset_draws_another_mask(kind):
    q, k, v, _ = inputs(3000, 1, 1, 9, 32)
    a, _ = attention_forward(q, k, v, 0.2, True, 0.3, 11, 0, kind)
    b, _ = attention_forward(q, k, v, 0.2, True, 0.3, 11, 1, kind)
    ref, _, _ = torch_attention(q, k, v, 0.2, True, keep_mask(q.shape, 0.3, 11, 1), 0.3)
    assert not np.array_equal(a, b) and rel_err(b, ref.detach().numpy()) < TOL


@pytest.mark.parametrize("kind", KINDS)
def test_attention_is_bit_identical_across_runs(kind):
    q, k, v, dout = inputs(4000, 1, 2, 70, 32)
    first = attention_forward(q, k, v, 0.2, True, 0.1, 3, 2, kind)
    again = attention_forward(q, k, v, 0.2, True, 0.1, 3, 2, kind)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(first, again, strict=True))
    out, lse = first
    grads = attention_backward(q, k, v, out, lse, dout, 0.2, True, 0.1, 3, 2, kind)
    grads_again = attention_backward(q, k, v, out, lse, dout, 0.2, True, 0.1, 3, 2, kind)
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
