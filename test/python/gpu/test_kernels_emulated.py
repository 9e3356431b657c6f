"""CUDA kernels on the CPU: gemm_small.cu and the fused loss of loss.cu, emulated.

CI has no GPU, so these kernels' index math and arithmetic are checked here by
running the .cu sources through test/python/gpu/cuda_emu.h (one std::thread per
CUDA thread, barriers for __syncthreads and warp shuffles; g++ -std=c++20),
behind the backend's real launchers: registry entry -> launcher (grid, block,
workspace) -> ABI conversion -> kernel. Inputs are fresh random arrays, outputs
are poisoned with NaN, results are compared with runtime/reference.py in float64
by norm-wise relative error (1e-5, strict fp32). The GPU tests run the same
kernels on the device (test_kernels_gpu.py).
"""

from __future__ import annotations

from typing import Any

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
PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def run(
    kernel: str,
    ins: list[Any],
    outs: list[EmuArray],
    params: dict[str, Any],
    ctx: EmuContext | None = None,
    times: int = 1,
) -> list[Any]:
    spec = registry.get(kernel)
    launches = launches_for(spec, ins, outs, params, ctx or EmuContext())
    for _ in range(times):
        for la in launches:
            la(NullStream())
    return launches


def gemm_case(
    kernel_family: str,
    pair: str,
    m: int,
    n: int,
    k: int,
    act: str,
    seed: int,
    ctx: EmuContext | None = None,
    times: int = 1,
) -> tuple[float, float, Any]:
    rng = np.random.default_rng(seed)
    ta, tb = PAIRS[pair]
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    y = EmuArray(np.full((m, n), np.nan, np.float32))
    z = EmuArray(np.full((m, n), np.nan, np.float32))
    ins = [EmuArray(a.T if ta else a), EmuArray(b.T if tb else b), EmuArray(bias)]
    params = {"act": act, "transpose_a": ta, "transpose_b": tb}
    launches = run(f"cuda.gemm_epilogue_{kernel_family}_{pair}", ins, [y, z], params, ctx, times)
    ref_y, ref_z = reference.gemm_epilogue(
        a.astype(np.float64), b.astype(np.float64), bias.astype(np.float64), act=act
    )
    return rel_err(y.array, ref_y), rel_err(z.array, ref_z), launches[0]


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize(
    ("m", "n", "k", "mode"),
    [(37, 10, 75, 1), (10, 45, 70, 2), (50, 40, 7, 0)],
    ids=["short_n", "short_m", "short_k"],
)
def test_skinny_gemm_each_mode_and_transpose(pair, m, n, k, mode):
    ey, ez, launch = gemm_case("skinny", pair, m, n, k, "gelu", seed=m + n + k)
    assert int(launch.args[-1]) == mode
    assert ey < TOL and ez < TOL


@pytest.mark.parametrize("pair", list(PAIRS))
def test_split_k_gemm_adds_its_partials_and_resets_its_tickets(pair):
    ctx = EmuContext()
    ey, ez, launch = gemm_case("splitk", pair, 37, 45, 300, "relu", seed=5, ctx=ctx, times=2)
    splits = int(launch.args[-2])
    assert splits > 1 and launch.grid == (2, 2, splits)
    assert ey < TOL and ez < TOL  # the second launch reads its tickets from zero again
    (ws,) = ctx.keep
    assert not ws.array[:16].any()  # the kernel leaves the tickets at zero


@pytest.mark.parametrize("pair", ["nn", "tt"])
def test_split_k_gemm_with_full_128_deep_chunks(pair):
    ctx = EmuContext()
    ctx.sm_count = 1  # few blocks wanted: K = 300 is cut into chunks of the 128 maximum
    ey, ez, launch = gemm_case("splitk", pair, 40, 40, 300, "gelu", seed=7, ctx=ctx)
    assert (int(launch.args[-2]), int(launch.args[-1])) == (3, 128)
    assert ey < TOL and ez < TOL


def test_split_k_gemm_adds_more_than_eight_partials():
    ey, ez, launch = gemm_case("splitk", "nt", 33, 33, 1000, "none", seed=8)
    assert int(launch.args[-2]) == 11
    assert ey < TOL and ez < TOL


def test_split_k_gemm_with_one_split_writes_directly():
    ey, ez, launch = gemm_case("splitk", "nt", 70, 33, 40, "none", seed=6)
    assert int(launch.args[-2]) == 1 and ey < TOL and ez < TOL


@pytest.mark.parametrize("labels", ["i32", "i64"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_cross_entropy_with_grad_matches_the_three_ops_it_fuses(labels, with_bias):
    rng = np.random.default_rng(11)
    n, c = 37, 10
    x = (rng.standard_normal((n, c)) * 3).astype(np.float32)
    y = rng.integers(0, c, n).astype(np.int32 if labels == "i32" else np.int64)
    dl = np.array(0.75, np.float32)
    outs = [
        EmuArray(np.full((), np.nan, np.float32)),
        EmuArray(np.full((n, c), np.nan, np.float32)),
    ]
    if with_bias:
        outs.append(EmuArray(np.full((c,), np.nan, np.float32)))
    ctx = EmuContext()
    run(
        f"cuda.cross_entropy_with_grad_f32_{labels}",
        [EmuArray(x), EmuArray(y), EmuArray(dl)],
        outs,
        {},
        ctx,
        times=2,
    )
    ref = reference.cross_entropy_with_grad(x.astype(np.float64), y, dl.astype(np.float64))
    assert rel_err(outs[0].array, ref[0]) < TOL
    assert rel_err(outs[1].array, ref[1]) < TOL
    if with_bias:
        assert rel_err(outs[2].array, ref[2]) < TOL
    assert not ctx.keep[0].array[:4].any()  # the ticket counter is back at zero


def test_a_label_out_of_range_gives_a_nan_loss_and_a_zero_gradient_row():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((9, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 3, 9, 1, 2, -1, 0], np.int32)
    outs = [
        EmuArray(np.zeros((), np.float32)),
        EmuArray(np.full((9, 4), np.nan, np.float32)),
        EmuArray(np.full((4,), np.nan, np.float32)),
    ]
    run(
        "cuda.cross_entropy_with_grad_f32_i32",
        [EmuArray(x), EmuArray(y), EmuArray(np.array(1.0, np.float32))],
        outs,
        {},
    )
    assert np.isnan(outs[0].array)
    dx = outs[1].array
    assert not dx[[4, 7]].any() and np.isfinite(dx).all()
    ok = [0, 1, 2, 3, 5, 6, 8]
    ref = reference.cross_entropy_grad(x[ok].astype(np.float64), y[ok], np.float64(1.0))[0]
    assert rel_err(dx[ok], ref * len(ok) / 9) < TOL
    assert rel_err(outs[2].array, dx.sum(axis=0)) < TOL


@pytest.mark.parametrize(("n", "p", "offset"), [(1001, 0.1, 7), (64, 0.5, (1 << 33) + 5)])
def test_dropout_keeps_the_reference_mask(n, p, offset):
    rng = np.random.default_rng(13)
    x = rng.standard_normal(n).astype(np.float32)
    out = EmuArray(np.full(n, np.nan, np.float32))
    params = {"p": p, "seed": (1 << 40) + 3}
    run("cuda.dropout_f32", [EmuArray(x), EmuArray(np.array(offset, np.int64))], [out], params)
    (ref,) = reference.dropout(x, np.array(offset), p=p, seed=params["seed"])
    assert out.array.tobytes() == ref.tobytes()


# --- silu: one row of the activation table, through every kernel that applies it -----


def test_silu_and_its_gradient_elementwise():
    rng = np.random.default_rng(31)
    n = 1003
    x = (rng.standard_normal(n) * 4).astype(np.float32)  # saturates both ends of sigmoid
    dy = rng.standard_normal(n).astype(np.float32)
    y = EmuArray(np.full(n, np.nan, np.float32))
    run("cuda.silu_f32", [EmuArray(x)], [y], {})
    assert rel_err(y.array, reference.silu(x.astype(np.float64))[0]) < TOL
    dx = EmuArray(np.full(n, np.nan, np.float32))
    run("cuda.silu_grad_f32", [EmuArray(dy), EmuArray(x)], [dx], {})
    ref = reference.silu_grad(dy.astype(np.float64), x.astype(np.float64))[0]
    assert rel_err(dx.array, ref) < TOL


@pytest.mark.parametrize(
    ("kernel", "m", "n", "k"),
    [("f32_s64", 70, 45, 33), ("skinny", 37, 10, 75), ("splitk", 40, 40, 300)],
)
@pytest.mark.parametrize("pair", ["nn", "nt"])
def test_gemm_epilogue_silu_in_our_kernels(kernel, m, n, k, pair):
    ctx = EmuContext()
    ey, ez, _ = gemm_case(kernel, pair, m, n, k, "silu", seed=m + k, ctx=ctx)
    assert ez < TOL and ey < TOL


def test_epilogue_grad_silu():
    rng = np.random.default_rng(32)
    m, n = 37, 45
    dy = rng.standard_normal((m, n)).astype(np.float32)
    z = (rng.standard_normal((m, n)) * 3).astype(np.float32)
    dz = EmuArray(np.full((m, n), np.nan, np.float32))
    db = EmuArray(np.full(n, np.nan, np.float32))
    run("cuda.epilogue_grad_f32", [EmuArray(dy), EmuArray(z)], [dz, db], {"act": "silu"})
    ref_dz, ref_db = reference.epilogue_grad(
        dy.astype(np.float64), z.astype(np.float64), act="silu"
    )
    assert rel_err(dz.array, ref_dz) < TOL and rel_err(db.array, ref_db) < TOL


@pytest.mark.parametrize(
    ("m", "n", "act"),
    [(600, 45, "gelu"), (300, 70, "relu"), (1, 33, "silu")],
    ids=["four_chunks_ragged", "two_chunks", "one_row"],
)
def test_epilogue_grad_over_row_chunks(m, n, act):
    """The two stages at ragged shapes: 600 rows in 4 chunks of 160 (the last 120), N = 45
    (a partial column tile), 300 rows in 2 chunks; one row in one chunk. Replayed twice:
    the sums are fixed-order, so the second run is bit-identical."""
    rng = np.random.default_rng(m + n)
    dy = rng.standard_normal((m, n)).astype(np.float32)
    saved = (rng.standard_normal((m, n)) * 2).astype(np.float32)
    if act == "relu":
        saved = np.maximum(saved, 0.0)  # relu saves its output Y >= 0
    dz = EmuArray(np.full((m, n), np.nan, np.float32))
    db = EmuArray(np.full(n, np.nan, np.float32))
    ctx = EmuContext()
    launches = run("cuda.epilogue_grad_f32", [EmuArray(dy), EmuArray(saved)], [dz, db],
                   {"act": act}, ctx)  # fmt: skip
    assert len(launches) == (1 if m < 256 else 2)
    first = db.array.copy()
    for la in launches:
        la(NullStream())
    assert np.array_equal(db.array, first)
    ref_dz, ref_db = reference.epilogue_grad(
        dy.astype(np.float64), saved.astype(np.float64), act=act
    )
    assert rel_err(dz.array, ref_dz) < TOL and rel_err(db.array, ref_db) < TOL


@pytest.mark.parametrize(
    ("shape", "axes", "launches"),
    [((600, 45), (0,), 2), ((3, 300, 40), (1,), 2), ((5, 70), (1,), 1), ((37, 53), (0,), 1)],
    ids=["four_chunks", "outer_3_two_chunks", "rows", "one_chunk"],
)
def test_reduce_sum_over_row_chunks(shape, axes, launches):
    """reduce_sum's column reduction split over row chunks (600 rows: 4 chunks, N = 45 a
    partial column tile; [3, 300, 40] over axis 1: 2 chunks for each of 3 outer rows), the
    row reduction (inner 1) and a short one in one launch, against the float64 reference."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    (ref,) = reference.reduce_sum(x.astype(np.float64), axes=axes)
    out = EmuArray(np.full(ref.shape, np.nan, np.float32))
    got = run("cuda.reduce_sum_f32", [EmuArray(x)], [out], {"axes": axes})
    assert len(got) == launches
    assert rel_err(out.array, ref) < TOL


# --- batched products (torch.matmul's batched form) -------------------------------------


def swap_last(a: np.ndarray, t: bool) -> np.ndarray:
    return np.swapaxes(a, -1, -2) if t else a


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize(
    ("a_batch", "b_batch", "m", "n", "k"),
    [((2, 3), (2, 3), 70, 33, 20), ((), (5,), 9, 66, 7), ((4,), (), 17, 5, 65)],
    ids=["both", "broadcast_a", "broadcast_b"],
)
def test_batched_gemm_matches_np_matmul(pair, a_batch, b_batch, m, n, k):
    rng = np.random.default_rng(40 + m + n)
    ta, tb = PAIRS[pair]
    a = rng.standard_normal((*a_batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*b_batch, k, n)).astype(np.float32)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    y = EmuArray(np.full(ref.shape, np.nan, np.float32))
    ins = [EmuArray(swap_last(a, ta)), EmuArray(swap_last(b, tb))]
    if not ta and not b_batch and a_batch:  # folds into one product: the s64 tile runs it
        run(f"cuda.matmul_f32_s64_{pair}", ins, [y], {"transpose_a": ta, "transpose_b": tb})
        assert rel_err(y.array, ref) < TOL
    y.array[...] = np.nan
    run(f"cuda.matmul_batched_f32_{pair}", ins, [y], {"transpose_a": ta, "transpose_b": tb})
    assert rel_err(y.array, ref) < TOL


def test_batched_gemm_epilogue_shares_its_bias_and_keeps_z():
    rng = np.random.default_rng(44)
    a = rng.standard_normal((3, 20, 12)).astype(np.float32)
    b = rng.standard_normal((3, 12, 30)).astype(np.float32)
    bias = rng.standard_normal(30).astype(np.float32)
    y, z = (EmuArray(np.full((3, 20, 30), np.nan, np.float32)) for _ in range(2))
    ins = [EmuArray(a), EmuArray(b), EmuArray(bias)]
    run("cuda.gemm_epilogue_batched_f32_nn", ins, [y, z], {"act": "gelu"})
    ref_z = np.matmul(a.astype(np.float64), b) + bias
    assert rel_err(z.array, ref_z) < TOL
    assert rel_err(y.array, reference.gelu(ref_z)[0]) < TOL


# --- the layout ops of the unfused attention path ----------------------------------------


@pytest.mark.parametrize(
    ("shape", "axis", "sizes"), [((2, 5, 12), 2, (4, 4, 4)), ((6, 3), 0, (1, 5))]
)
def test_split_and_concat_are_torch_split_and_cat(shape, axis, sizes):
    rng = np.random.default_rng(50 + axis)
    x = rng.standard_normal(shape).astype(np.float32)
    ref = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    parts = [EmuArray(np.full(r.shape, np.nan, np.float32)) for r in ref]
    run("cuda.split_b32", [EmuArray(x)], parts, {"axis": axis, "sizes": sizes})
    for got, want in zip(parts, ref, strict=True):
        assert got.array.tobytes() == want.tobytes()
    back = EmuArray(np.full(shape, np.nan, np.float32))
    run("cuda.concat_b32", [EmuArray(p.array) for p in parts], [back], {"axis": axis - len(shape)})
    assert back.array.tobytes() == x.tobytes()


def test_scale_and_causal_mask():
    rng = np.random.default_rng(52)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    y = EmuArray(np.full(x.shape, np.nan, np.float32))
    run("cuda.scale_f32", [EmuArray(x)], [y], {"factor": 0.125})
    assert y.array.tobytes() == (np.float32(0.125) * x).tobytes()
    run("cuda.causal_mask_f32", [EmuArray(x)], [y], {})
    keep = np.tril(np.ones((7, 9), bool))  # top-left aligned: j <= i kept
    assert np.array_equal(y.array, np.where(keep, x, -np.inf))
    run("cuda.causal_mask_f32", [EmuArray(x)], [y], {"fill": 0.0})
    assert np.array_equal(y.array, np.where(keep, x, 0.0))


@pytest.mark.parametrize(
    ("shape", "perm", "rows"),
    [
        ((2, 5, 3, 8), (0, 2, 1, 3), True),
        ((2, 3, 5, 8), (0, 2, 1, 3), True),
        ((2, 5, 3, 6), (0, 2, 1, 3), False),
    ],
    ids=["split_heads", "merge_heads", "odd_rows"],
)
def test_transposes_that_move_whole_rows_copy_16_byte_words(shape, perm, rows):
    rng = np.random.default_rng(60)
    x = rng.standard_normal(shape).astype(np.float32)
    want = np.ascontiguousarray(np.transpose(x, perm))
    out = EmuArray(np.full(want.shape, np.nan, np.float32))
    (launch,) = run("cuda.transpose_b32", [EmuArray(x)], [out], {"perm": perm})
    assert launch.name == ("cuda.permute_rows_b32" if rows else "cuda.transpose_b32")
    assert out.array.tobytes() == want.tobytes()


def test_a_broadcast_of_whole_rows_copies_words():
    rng = np.random.default_rng(61)
    pos = rng.standard_normal((5, 8)).astype(np.float32)
    out = EmuArray(np.full((3, 5, 8), np.nan, np.float32))
    (launch,) = run("cuda.broadcast_to_b32", [EmuArray(pos)], [out], {"shape": (3, 5, 8)})
    assert launch.name == "cuda.permute_rows_b32"
    assert out.array.tobytes() == np.broadcast_to(pos, (3, 5, 8)).tobytes()
