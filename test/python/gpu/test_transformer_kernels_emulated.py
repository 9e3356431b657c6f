"""The transformer kernels on the CPU: layernorm.cu, embedding.cu, cross_entropy.cu, emulated.

Each test runs the kernels behind the backend's real launchers (registry entry ->
runtime/cuda/launchers/{layernorm,embedding,cross_entropy}.py: grid, block, workspace ->
ABI conversion -> kernel), or, where a test needs other geometry than the launch rule
(fewer multiprocessors, smaller chunks), the launchers' own functions with that knob
or the kernel directly with the launchers' geometry helpers. Inputs are fresh random
arrays from a seeded generator; outputs are poisoned with NaN; results are compared
with float64 PyTorch (CPU) or NumPy formulas by norm-wise relative error (1e-5,
strict fp32), backward kernels against torch.autograd in float64. Deterministic
kernels are run twice and compared byte for byte. Tests marked `slow` take several
seconds each in the emulator (one std::thread per CUDA thread).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from aicfc.runtime.cuda.launchers import embedding as emb_launch
from aicfc.runtime.cuda.launchers import layernorm as ln_launch
from aicfc.runtime.cuda.launchers.common import cdiv
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

TOL = F32_TOL
SM_COUNT = 132


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def kernel(source: str, symbol: str) -> EmuFunction:
    return EmuFunction(cuda_emu.build(source), symbol)


class Context(EmuContext):
    """EmuContext with `sm_count` multiprocessors whose workspaces start as `fill` bytes
    (not zeros: a kernel must write every entry it reads)."""

    def __init__(self, sm_count: int = SM_COUNT, fill: int = 0) -> None:
        super().__init__()
        self.sm_count, self.fill = sm_count, fill

    def workspace(self, nbytes: int) -> EmuArray:
        ws = EmuArray(np.full(max(256, nbytes), self.fill, np.uint8))
        self.keep.append(ws)
        return ws


def run_all(launches: list[Any], times: int = 1) -> None:
    for _ in range(times):
        for la in launches:
            la(NullStream())


def run(kernel_name: str, ins: list[Any], outs: list[Any], params: dict[str, Any], ctx=None):
    """The registry entry's launches, run once; returns the context (its workspaces)."""
    ctx = ctx or Context()
    run_all(launches_for(registry.get(kernel_name), ins, outs, params, ctx))
    return ctx


def poison(*shape: int) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32))


def f32(rng: np.random.Generator, *shape: int, scale: float = 1.0, shift: float = 0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def close(out: np.ndarray, ref: np.ndarray) -> bool:
    """rel_err below TOL; a reference that is zero up to float64 rounding (dx and dw of
    D = 1, where x - mean = 0) asks for an output within 1e-6 of zero instead."""
    if np.linalg.norm(np.asarray(ref, np.float64)) < 1e-9:
        return bool(np.isfinite(out).all() and np.abs(out).max() < 1e-6)
    return rel_err(out, ref) < TOL


def label_suffix(ids: np.ndarray) -> str:
    """The kernels' symbol suffix for the id or label type."""
    return {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}[ids.dtype]


def t64(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    return torch.tensor(np.asarray(a, np.float64), requires_grad=grad)


# ----------------------------------------------------------------------------
# Layer norm
# ----------------------------------------------------------------------------


def ln_forward(x, w, b, eps, r=None) -> tuple[np.ndarray, ...]:
    """(s if r is given, y, mean, rstd) from aicfc_[add_]layer_norm_f32."""
    n, d = x.shape
    y, mean, rstd = poison(n, d), poison(n), poison(n)
    affine = [EmuArray(a) for a in (w, b) if a is not None]
    if r is None:
        run("cuda.layer_norm_f32", [EmuArray(x), *affine], [y, mean, rstd], {"eps": eps})
        return y.array, mean.array, rstd.array
    s = poison(n, d)
    run(
        "cuda.add_layer_norm_f32",
        [EmuArray(x), EmuArray(r), *affine],
        [s, y, mean, rstd],
        {"eps": eps},
    )
    return s.array, y.array, mean.array, rstd.array


def ln_backward(dy, x, mean, rstd, w, dres=None, params=True, sm_count=SM_COUNT, ws_fill=0.0):
    """(dx, dw, db) from aicfc_layer_norm_grad_f32 and aicfc_layer_norm_param_grad_f32
    (dw, db None when `params` is false or w is None)."""
    n, d = dy.shape
    dx = poison(n, d)
    want = params and w is not None
    dw, db = (poison(d), poison(d)) if want else (None, None)
    ctx = Context(sm_count, fill=ws_fill)
    launches = ln_launch.layer_norm_grad_launches(
        registry.get("cuda.layer_norm_grad_f32"),
        *(EmuArray(a) for a in (dy, x, mean, rstd)),
        EmuArray(w) if w is not None else None,
        EmuArray(dres) if dres is not None else None,
        dx,
        dw,
        db,
        ctx,
    )
    assert len(launches) == (2 if want else 1)
    run_all(launches)
    if not want:
        return dx.array, None, None
    assert dw is not None and db is not None
    return dx.array, dw.array, db.array


def torch_layer_norm(x, w, b, eps, r=None):
    """float64 (y, mean, rstd) and the leaves, by torch's F.layer_norm."""
    xs = t64(x, True)
    rs = t64(r, True) if r is not None else None
    s = xs + rs if rs is not None else xs
    wt = t64(w, True) if w is not None else None
    bt = t64(b, True) if b is not None else None
    y = torch.nn.functional.layer_norm(s, (x.shape[-1],), wt, bt, eps)
    mean = s.mean(-1)
    rstd = 1.0 / torch.sqrt(s.var(-1, unbiased=False) + eps)
    return y, mean.detach().numpy(), rstd.detach().numpy(), (xs, wt, bt)


LN_SHAPES = [(37, 1), (5, 5), (19, 33), (64, 128), (10, 384), (6, 520), (3, 4100), (2, 8192)]


@pytest.mark.parametrize(("n", "d"), LN_SHAPES, ids=[f"{n}x{d}" for n, d in LN_SHAPES])
@pytest.mark.parametrize("affine", ["wb", "none", "w"])
def test_layer_norm_forward_matches_torch(n, d, affine):
    rng = np.random.default_rng(100 + n + d)
    x = f32(rng, n, d, scale=2.0, shift=0.5)
    w = f32(rng, d) if affine in ("wb", "w") else None
    b = f32(rng, d) if affine == "wb" else None
    y, mean, rstd = ln_forward(x, w, b, 1e-5)
    ref, ref_mean, ref_rstd, _ = torch_layer_norm(x, w, b, 1e-5)
    assert rel_err(y, ref.detach().numpy()) < TOL
    assert rel_err(mean, ref_mean) < TOL and rel_err(rstd, ref_rstd) < TOL


@pytest.mark.parametrize(("n", "d"), [(13, 64), (7, 45), (3, 4100)])
def test_add_layer_norm_exports_the_sum_and_normalises_it(n, d):
    rng = np.random.default_rng(200 + d)
    x, r = f32(rng, n, d), f32(rng, n, d, scale=3.0)
    w, b = f32(rng, d), f32(rng, d)
    s, y, mean, rstd = ln_forward(x, w, b, 1e-5, r=r)
    assert np.array_equal(s, x + r)  # one float32 add, as graph.add
    ref, ref_mean, ref_rstd, _ = torch_layer_norm(x, w, b, 1e-5, r=r)
    assert rel_err(y, ref.detach().numpy()) < TOL
    assert rel_err(mean, ref_mean) < TOL and rel_err(rstd, ref_rstd) < TOL


def test_layer_norm_eps_dominates_a_constant_row():
    rng = np.random.default_rng(7)
    x = np.repeat(f32(rng, 4, 1), 24, axis=1)  # zero variance: rstd = 1 / sqrt(eps)
    y, mean, rstd = ln_forward(x, None, None, 1e-2)
    assert np.allclose(rstd, 10.0, rtol=1e-6) and not y.any()
    assert rel_err(mean, x[:, 0]) < TOL


def test_layer_norm_forward_without_16_byte_alignment():
    # D % 4 == 0 but the rows start 4 bytes off: the kernel takes its scalar path.
    rng = np.random.default_rng(8)
    n, d = 9, 64
    buf = f32(rng, n * d + 1, scale=1.5)
    x = buf[1:].reshape(n, d)
    assert x.ctypes.data % 16 != 0
    w, b = f32(rng, d), f32(rng, d)
    y, _, _ = ln_forward(x, w, b, 1e-5)
    ref = torch_layer_norm(x, w, b, 1e-5)[0].detach().numpy()
    assert rel_err(y, ref) < TOL


LN_GRAD_SHAPES = [(37, 1), (21, 5), (50, 40), (64, 128), (10, 384), (6, 520), (3, 4100)]


@pytest.mark.parametrize(("n", "d"), LN_GRAD_SHAPES, ids=[f"{n}x{d}" for n, d in LN_GRAD_SHAPES])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_backward_matches_torch_autograd(n, d, affine):
    rng = np.random.default_rng(300 + n + d)
    x = f32(rng, n, d, scale=2.0, shift=-0.3)
    w = f32(rng, d) if affine else None
    b = f32(rng, d) if affine else None
    dy = f32(rng, n, d)
    _, mean, rstd = ln_forward(x, w, b, 1e-5)
    # sm_count 1: at most 2 blocks, so each team accumulates several rows' dw, db.
    dx, dw, db = ln_backward(dy, x, mean, rstd, w, sm_count=1)
    y, _, _, (xs, wt, bt) = torch_layer_norm(x, w, b, 1e-5)
    y.backward(t64(dy))
    assert close(dx, xs.grad.numpy())
    if affine:
        assert close(dw, wt.grad.numpy()) and close(db, bt.grad.numpy())


def test_layer_norm_backward_adds_the_residual_gradient_and_is_bit_identical():
    rng = np.random.default_rng(11)
    n, d = 40, 96
    x, w, b, dy, dres = f32(rng, n, d), f32(rng, d), f32(rng, d), f32(rng, n, d), f32(rng, n, d)
    _, mean, rstd = ln_forward(x, w, b, 1e-5)
    first = ln_backward(dy, x, mean, rstd, w, dres=dres, sm_count=2)
    # The workspace starts as garbage the second time: every partial is written first.
    second = ln_backward(dy, x, mean, rstd, w, dres=dres, sm_count=2, ws_fill=0x47)
    for a, c in zip(first, second, strict=True):
        assert a.tobytes() == c.tobytes()
    y, _, _, (xs, wt, bt) = torch_layer_norm(x, w, b, 1e-5)
    y.backward(t64(dy))
    assert rel_err(first[0], xs.grad.numpy() + dres) < TOL
    assert rel_err(first[1], wt.grad.numpy()) < TOL and rel_err(first[2], bt.grad.numpy()) < TOL


def test_layer_norm_backward_without_parameter_gradients_writes_only_dx():
    rng = np.random.default_rng(12)
    n, d = 9, 30
    x, w, dy = f32(rng, n, d), f32(rng, d), f32(rng, n, d)
    _, mean, rstd = ln_forward(x, w, None, 1e-5)
    dx, dw, db = ln_backward(dy, x, mean, rstd, w, params=False)
    assert dw is None and db is None
    y, _, _, (xs, _, _) = torch_layer_norm(x, w, None, 1e-5)
    y.backward(t64(dy))
    assert rel_err(dx, xs.grad.numpy()) < TOL


def test_layer_norm_backward_float64_finite_differences_of_the_forward():
    # The analytic dx against central differences of the forward formula in float64.
    rng = np.random.default_rng(13)
    n, d, eps = 3, 7, 1e-5
    x, w, dy = f32(rng, n, d), f32(rng, d), f32(rng, n, d)

    def loss(x64: np.ndarray) -> float:
        mu = x64.mean(-1, keepdims=True)
        var = ((x64 - mu) ** 2).mean(-1, keepdims=True)
        return float(np.sum((x64 - mu) / np.sqrt(var + eps) * w * dy))

    x64, h = x.astype(np.float64), 1e-6
    fd = np.zeros_like(x64)
    for i in np.ndindex(x64.shape):
        e = np.zeros_like(x64)
        e[i] = h
        fd[i] = (loss(x64 + e) - loss(x64 - e)) / (2 * h)
    _, mean, rstd = ln_forward(x, w, None, eps)
    dx, _, _ = ln_backward(dy, x, mean, rstd, w, params=False)
    assert rel_err(dx, fd) < 1e-5


# ----------------------------------------------------------------------------
# Embedding
# ----------------------------------------------------------------------------


def embedding_forward(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    d = table.shape[1]
    out = poison(ids.size, d)
    run(f"cuda.embedding_f32_{label_suffix(ids)}", [EmuArray(ids), EmuArray(table)], [out], {})
    return out.array


def embedding_backward(dout, ids, v, chunk=emb_launch.EMBEDDING_CHUNK, split=None, ws_fill=0):
    """dtable [V, D] from the two launches, in a workspace filled with `ws_fill` bytes
    (the registry entry's launcher when chunk and split are its defaults)."""
    d = dout.shape[1]
    dtable = poison(v, d)
    ctx = Context(fill=ws_fill)
    spec = registry.get(f"cuda.embedding_grad_f32_{label_suffix(ids)}")
    ins = [EmuArray(dout), EmuArray(ids)]
    if chunk == emb_launch.EMBEDDING_CHUNK and split is None:
        launches = launches_for(spec, ins, [dtable], {"num_embeddings": v}, ctx)
    else:
        launches = emb_launch.embedding_grad_launches(spec, *ins, dtable, ctx, chunk, split)
    assert len(launches) == 2
    run_all(launches)
    return dtable.array


def add_at_f32(v: int, ids: np.ndarray, dout: np.ndarray) -> np.ndarray:
    """np.add.at in float32: dtable[ids[n]] += dout[n] for n = 0, 1, ... in order."""
    ref = np.zeros((v, dout.shape[1]), np.float32)
    np.add.at(ref, ids, dout)
    return ref


@pytest.mark.parametrize(
    ("v", "d", "n", "lt"), [(65, 384, 50, "i64"), (65, 7, 20, "i32"), (1000, 128, 9, "i32")]
)
def test_embedding_forward_gathers_rows(v, d, n, lt):
    rng = np.random.default_rng(400 + v + d)
    table = f32(rng, v, d)
    ids = rng.integers(0, v, n).astype(np.int64 if lt == "i64" else np.int32)
    assert np.array_equal(embedding_forward(table, ids), table[ids])


def test_embedding_forward_gives_nan_rows_for_ids_out_of_range():
    rng = np.random.default_rng(401)
    table = f32(rng, 10, 12)
    ids = np.array([3, -1, 10, 9, 1 << 40], np.int64)
    out = embedding_forward(table, ids)
    assert np.isnan(out[[1, 2, 4]]).all()
    assert np.array_equal(out[[0, 3]], table[[3, 9]])


@pytest.mark.parametrize(("v", "d", "n"), [(65, 384, 200), (65, 5, 256), (7, 130, 31)])
def test_embedding_backward_in_one_chunk_is_np_add_at_bit_for_bit(v, d, n):
    rng = np.random.default_rng(500 + v + d + n)
    ids = rng.integers(0, v, n).astype(np.int32)
    ids[: n // 4] = 3  # a long segment of repeated ids
    dout = f32(rng, n, d)
    got = embedding_backward(dout, ids, v)
    assert got.tobytes() == add_at_f32(v, ids, dout).tobytes()


def documented_order(dout, ids, v, chunk, split):
    """dtable in embedding.cu's stated order, in float32: per chunk, per range, left to right."""
    n, d = dout.shape
    c = cdiv(n, chunk)
    partial = [
        add_at_f32(v, ids[k * chunk : (k + 1) * chunk], dout[k * chunk : (k + 1) * chunk])
        for k in range(c)
    ]
    total = np.zeros((v, d), np.float32)
    for q in range(split):
        acc = np.zeros((v, d), np.float32)
        for k in range(q * c // split, (q + 1) * c // split):
            present = np.isin(np.arange(v), ids[k * chunk : (k + 1) * chunk])
            acc[present] += partial[k][present]
        total += acc
    return total


@pytest.mark.parametrize(("chunk", "split"), [(256, 8), (64, 1), (32, 4)])
def test_embedding_backward_over_chunks_matches_float64_and_its_stated_order(chunk, split):
    rng = np.random.default_rng(600 + chunk)
    v, d, n = 65, 136, 700
    ids = rng.integers(0, v, n).astype(np.int64)
    dout = f32(rng, n, d)
    got = embedding_backward(dout, ids, v, chunk=chunk, split=split)
    ref = np.zeros((v, d))
    np.add.at(ref, ids, dout.astype(np.float64))
    assert rel_err(got, ref) < TOL
    assert got.tobytes() == documented_order(dout, ids, v, chunk, split).tobytes()


def test_embedding_backward_matches_torch_and_repeats_bit_for_bit():
    rng = np.random.default_rng(700)
    v, d, n = 120, 64, 513  # 3 chunks, vocabulary rows that never occur
    ids = rng.integers(0, v, n).astype(np.int32)
    dout = f32(rng, n, d)
    first = embedding_backward(dout, ids, v)
    again = embedding_backward(dout, ids, v, ws_fill=0xAB)  # garbage workspace
    assert first.tobytes() == again.tobytes()
    table = t64(np.zeros((v, d)), True)
    torch.nn.functional.embedding(torch.tensor(ids, dtype=torch.int64), table).backward(t64(dout))
    assert rel_err(first, table.grad.numpy()) < TOL
    assert not first[np.setdiff1d(np.arange(v), ids)].any()


def test_embedding_backward_drops_ids_out_of_range():
    rng = np.random.default_rng(701)
    v, d, n = 20, 12, 40
    ids = rng.integers(0, v, n).astype(np.int64)
    bad = np.array([2, 9, 30])
    ids[bad] = [-5, v, 1 << 35]
    dout = f32(rng, n, d)
    ok = np.setdiff1d(np.arange(n), bad)
    got = embedding_backward(dout, ids, v)
    assert got.tobytes() == add_at_f32(v, ids[ok], dout[ok]).tobytes()


@pytest.mark.parametrize(
    "v", [pytest.param(1500, id="V1500"), pytest.param(50257, id="V50257", marks=pytest.mark.slow)]
)
def test_embedding_backward_with_a_large_vocabulary(v):
    rng = np.random.default_rng(800)
    d, n = 8, 300
    ids = rng.integers(0, v, n).astype(np.int64)
    ids[:5] = ids[-5:] = v - 1  # one id in both chunks
    dout = f32(rng, n, d)
    assert emb_launch.embedding_split(v, d, SM_COUNT) == 1
    got = embedding_backward(dout, ids, v)
    ref = np.zeros((v, d))
    np.add.at(ref, ids, dout.astype(np.float64))
    assert rel_err(got, ref) < TOL


# ----------------------------------------------------------------------------
# Softmax cross-entropy
# ----------------------------------------------------------------------------


def softmax_cross_entropy(x: np.ndarray, y: np.ndarray, dloss: float, times: int = 1, block=None):
    """(loss, dlogits, workspace) after `times` launches of aicfc_softmax_cross_entropy_f32_*
    through its registry entry's launcher, or (`block`: another (team, rows) than the
    launch rule's) the kernel called directly."""
    n, v = x.shape
    loss, dx = poison(), poison(n, v)
    ins = [EmuArray(x), EmuArray(y), EmuArray(np.array(dloss, np.float32))]
    name = f"softmax_cross_entropy_f32_{label_suffix(y)}"
    if block is None:
        ctx = Context()
        launches = launches_for(registry.get(f"cuda.{name}"), ins, [loss, dx], {}, ctx)
        run_all(launches, times)
        return loss.array, dx.array, ctx.keep[0].array
    grid = (cdiv(n, block[1]),)
    ws = EmuArray(np.zeros(256 + 4 * grid[0], np.uint8))
    fn = kernel("cross_entropy.cu", f"aicfc_{name}")
    for _ in range(times):
        fn(grid, block, (*ins, loss, dx, ws, np.int32(n), np.int32(v)))
    return loss.array, dx.array, ws.array


def torch_cross_entropy(x, y, dloss):
    xt = t64(x, True)
    loss = torch.nn.functional.cross_entropy(xt, torch.tensor(y, dtype=torch.int64))
    (loss * dloss).backward()
    return float(loss.detach()), xt.grad.numpy()


CE_SHAPES = [
    (37, 65, "int32"),
    (5, 1000, "int64"),
    (9, 4097, "int32"),
    (3, 50257, "int64"),
]


@pytest.mark.parametrize(("n", "v", "lt"), CE_SHAPES, ids=[f"{n}x{v}" for n, v, _ in CE_SHAPES])
def test_softmax_cross_entropy_matches_torch(n, v, lt):
    rng = np.random.default_rng(900 + v)
    x = f32(rng, n, v, scale=4.0, shift=2.0)
    y = rng.integers(0, v, n).astype(lt)
    loss, dx, ws = softmax_cross_entropy(x, y, 0.75, times=2)
    ref_loss, ref_dx = torch_cross_entropy(x, y, 0.75)
    assert rel_err(loss, ref_loss) < TOL
    assert rel_err(dx, ref_dx) < TOL
    assert not ws[:4].any()  # the ticket is back at zero for the next replay


def test_softmax_cross_entropy_adds_more_partials_than_the_last_block_has_threads():
    rng = np.random.default_rng(904)
    x, y = f32(rng, 300, 65, scale=2.0), rng.integers(0, 65, 300).astype(np.int32)
    loss, dx, _ = softmax_cross_entropy(x, y, 1.0, block=(32, 1))  # 300 partials, 32 threads
    ref_loss, ref_dx = torch_cross_entropy(x, y, 1.0)
    assert rel_err(loss, ref_loss) < TOL and rel_err(dx, ref_dx) < TOL


def test_softmax_cross_entropy_is_bit_identical_across_runs():
    rng = np.random.default_rng(901)
    x, y = f32(rng, 70, 65, scale=3.0), rng.integers(0, 65, 70).astype(np.int64)
    first, second = softmax_cross_entropy(x, y, 1.0), softmax_cross_entropy(x, y, 1.0)
    assert first[0].tobytes() == second[0].tobytes() and first[1].tobytes() == second[1].tobytes()


def test_softmax_cross_entropy_survives_large_logits_and_minus_infinity():
    rng = np.random.default_rng(902)
    x = f32(rng, 6, 300, scale=30.0, shift=80.0)  # exp would overflow without the max shift
    x[1, ::3] = -np.inf  # masked classes
    y = rng.integers(0, 100, 6).astype(np.int32) * 3 + 1
    loss, dx, _ = softmax_cross_entropy(x, y, 1.0)
    ref_loss, ref_dx = torch_cross_entropy(x, y, 1.0)
    assert rel_err(loss, ref_loss) < TOL and rel_err(dx, ref_dx) < TOL


def test_softmax_cross_entropy_label_out_of_range_gives_nan_loss_and_zero_row():
    rng = np.random.default_rng(903)
    x = f32(rng, 5, 40)
    y = np.array([0, 40, 3, -2, 39], np.int32)
    loss, dx, _ = softmax_cross_entropy(x, y, 1.0)
    assert np.isnan(loss) and not dx[[1, 3]].any() and np.isfinite(dx).all()
    ok = [0, 2, 4]
    _, ref_dx = torch_cross_entropy(x[ok], y[ok], 1.0)
    assert rel_err(dx[ok], ref_dx * len(ok) / 5) < TOL
