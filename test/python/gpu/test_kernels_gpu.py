"""Every CUDA kernel of the registry against runtime/reference.py, on the GPU.

Inputs are fresh random arrays (never zeros); outputs are poisoned (NaN, or a
sentinel for integers) before each launch, so an unwritten element fails. The
reference runs in float64 on upcast inputs; the metric is the norm-wise
relative error (F32_TOL = 1e-5 for strict fp32, TF32_TOL = 2e-3 for TF32).
Launches go through the backend's own path (registry entry -> launcher -> ABI
conversion), so the scalars reach the kernels exactly as in a program.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aicfc.runtime import reference, reference_optim, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.abi import CudaKernelError
from aicfc.runtime.cuda.context import DeviceContext
from aicfc.runtime.cuda.launch import launches_for
from aicfc.runtime.cuda.launchers.optim import launch_adam_group
from aicfc.runtime.cuda.launchers.reduce import reduce_view
from gpu.gpu_support import F32_TOL, TF32_TOL, gpu, randn, rel_err

pytestmark = gpu

POISON = {np.dtype(np.float32): np.nan, np.dtype(np.int32): -7, np.dtype(np.int64): -7}


class Ctx(DeviceContext):
    """The backend's LoadContext, with the cuBLASLt cases skipped (with the reason) where
    nvmath-python is not usable."""

    def cublaslt(self) -> Any:
        from aicfc.runtime.cuda import cublaslt

        reason = cublaslt.available()
        if reason:
            pytest.skip(reason)
        return super().cublaslt()


CTX: Ctx | None = None


def ctx() -> Ctx:
    global CTX
    if CTX is None:
        CTX = Ctx()
    return CTX


def launch(
    kernel: str,
    ins: list[np.ndarray],
    out_specs: list[tuple[tuple[int, ...], Any]],
    params: dict[str, Any] | None = None,
    alias: dict[int, int] | None = None,
    repeat: int = 1,
) -> list[np.ndarray]:
    """Run registry kernel `kernel` on `ins`; outputs are poisoned fresh buffers.

    alias maps output index -> input index to run in place (the input's buffer).
    """
    import cupy

    spec = registry.get(kernel)
    d_ins = [cupy.asarray(a) for a in ins]
    d_outs = []
    for k, (shape, dtype) in enumerate(out_specs):
        if alias and k in alias:
            d_outs.append(d_ins[alias[k]])
        else:
            d_outs.append(cupy.full(shape, POISON[np.dtype(dtype)], dtype=dtype))
    launches = launches_for(spec, d_ins, d_outs, params or {}, ctx())
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()
    for _ in range(repeat):
        for la in launches:
            la(stream)
    stream.synchronize()
    return [cupy.asnumpy(o) for o in d_outs]


# --- GEMM -------------------------------------------------------------------

F64 = np.float64
GEMM_FAMILIES = {
    "f32_s64": F32_TOL,
    "f32": F32_TOL,
    "splitk": F32_TOL,
    "tf32": TF32_TOL,
    "cublaslt_f32": F32_TOL,
    "cublaslt_tf32": TF32_TOL,
}
PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}


def gemm_kernel(op: str, family: str, pair: str) -> str:
    if family.startswith("cublaslt"):
        return f"cuda.{op}_{family}"
    return f"cuda.{op}_{family}_{pair}"


def stored(a: np.ndarray, transpose: bool) -> np.ndarray:
    return np.ascontiguousarray(a.T) if transpose else a


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("family", list(GEMM_FAMILIES))
@pytest.mark.parametrize(("m", "n", "k"), [(67, 48, 131), (256, 320, 200)])
def test_gemm_epilogue_with_bias_act_and_pre_activation(family, pair, m, n, k):
    """Y = act(op(A) op(B) + bias), Z = op(A) op(B) + bias; M != N checks the bias orientation."""
    rng = np.random.default_rng(hash((family, pair, m)) % 2**32)
    ta, tb = PAIRS[pair]
    a, b, bias = randn(rng, m, k), randn(rng, k, n), randn(rng, n)
    act = "relu" if family.startswith("cublaslt") else "gelu"
    params = {"act": act, "transpose_a": ta, "transpose_b": tb}
    y, z = launch(
        gemm_kernel("gemm_epilogue", family, pair),
        [stored(a, ta), stored(b, tb), bias],
        [((m, n), np.float32), ((m, n), np.float32)],
        params,
    )
    ref_y, ref_z = reference.gemm_epilogue(a.astype(F64), b.astype(F64), bias.astype(F64), act=act)
    tol = GEMM_FAMILIES[family]
    assert rel_err(z, ref_z) < tol
    assert rel_err(y, ref_y) < tol


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("family", list(GEMM_FAMILIES))
def test_matmul_without_bias(family, pair):
    rng = np.random.default_rng(7)
    m, n, k = 96, 40, 72
    ta, tb = PAIRS[pair]
    a, b = randn(rng, m, k), randn(rng, k, n)
    (y,) = launch(
        gemm_kernel("matmul", family, pair),
        [stored(a, ta), stored(b, tb)],
        [((m, n), np.float32)],
        {"transpose_a": ta, "transpose_b": tb},
    )
    assert rel_err(y, a.astype(F64) @ b.astype(F64)) < GEMM_FAMILIES[family]


@pytest.mark.parametrize(
    "kernel", ["cuda.gemm_epilogue_f32_s64_nn", "cuda.gemm_epilogue_cublaslt_f32"]
)
def test_bias_runs_along_n_on_a_non_square_product(kernel):
    """A bias of length N = 80 is added to every row of Y [48, 80] (never along M)."""
    rng = np.random.default_rng(3)
    a, b = randn(rng, 48, 32), randn(rng, 32, 80)
    bias = np.arange(80, dtype=np.float32) * 10.0
    (y,) = launch(kernel, [a, b, bias], [((48, 80), np.float32)], {"act": "none"})
    assert rel_err(y - bias, a.astype(F64) @ b.astype(F64)) < F32_TOL
    assert rel_err(y, reference.gemm_epilogue(a, b, bias)[0]) < F32_TOL


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize(
    ("m", "n", "k"),
    [(128, 10, 256), (10, 256, 128), (128, 256, 10), (77, 32, 300), (5, 3, 2000)],
    ids=["short_n", "short_m", "short_k", "n_32", "long_k"],
)
def test_skinny_gemm(pair, m, n, k):
    """The skinny kernel in each mode (the 10-wide layer's three products among them)."""
    rng = np.random.default_rng(m * n + k)
    ta, tb = PAIRS[pair]
    a, b, bias = randn(rng, m, k), randn(rng, k, n), randn(rng, n)
    y, z = launch(
        f"cuda.gemm_epilogue_skinny_{pair}",
        [stored(a, ta), stored(b, tb), bias],
        [((m, n), np.float32), ((m, n), np.float32)],
        {"act": "gelu", "transpose_a": ta, "transpose_b": tb},
    )
    ref_y, ref_z = reference.gemm_epilogue(
        a.astype(F64), b.astype(F64), bias.astype(F64), act="gelu"
    )
    assert rel_err(z, ref_z) < F32_TOL and rel_err(y, ref_y) < F32_TOL


@pytest.mark.parametrize(
    ("m", "n", "k", "pair"),
    [(128, 256, 784, "nt"), (128, 256, 256, "nn"), (33, 33, 1000, "tt")],
)
def test_split_k_with_many_partials(m, n, k, pair):
    """The small config's first layer (9 partials of 96-deep chunks), and 11 partials."""
    rng = np.random.default_rng(m + k)
    ta, tb = PAIRS[pair]
    a, b, bias = randn(rng, m, k), randn(rng, k, n), randn(rng, n)
    (y,) = launch(
        f"cuda.gemm_epilogue_splitk_{pair}",
        [stored(a, ta), stored(b, tb), bias],
        [((m, n), np.float32)],
        {"act": "relu", "transpose_a": ta, "transpose_b": tb},
        repeat=2,
    )
    ref = reference.gemm_epilogue(a.astype(F64), b.astype(F64), bias.astype(F64), act="relu")[0]
    assert rel_err(y, ref) < F32_TOL


@pytest.mark.parametrize(
    ("m", "n", "k", "pair"),
    [(128, 10, 256, "nt"), (128, 256, 10, "nn"), (10, 256, 128, "tn")],
)
def test_cublaslt_on_rows_that_are_not_multiples_of_16_bytes(m, n, k, pair):
    """The 10-wide layer's products (40-byte rows) through cuBLASLt, within fp32 tolerance:
    the registry no longer refuses them."""
    rng = np.random.default_rng(m + n + k)
    ta, tb = PAIRS[pair]
    a, b = randn(rng, m, k), randn(rng, k, n)
    (y,) = launch(
        "cuda.matmul_cublaslt_f32",
        [stored(a, ta), stored(b, tb)],
        [((m, n), np.float32)],
        {"transpose_a": ta, "transpose_b": tb},
    )
    assert rel_err(y, a.astype(F64) @ b.astype(F64)) < F32_TOL


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("family", ["f32_s64", "f32", "splitk", "tf32", "skinny"])
def test_gemm_epilogue_silu_in_our_kernels(family, pair):
    """act = silu (no cuBLASLt epilogue) fused in each of our GEMM kernels, with Z."""
    rng = np.random.default_rng(hash((family, pair)) % 2**32)
    ta, tb = PAIRS[pair]
    m, n, k = (67, 30, 131) if family == "skinny" else (96, 80, 131)
    a, b, bias = randn(rng, m, k), randn(rng, k, n), randn(rng, n)
    y, z = launch(
        gemm_kernel("gemm_epilogue", family, pair),
        [stored(a, ta), stored(b, tb), bias],
        [((m, n), np.float32), ((m, n), np.float32)],
        {"act": "silu", "transpose_a": ta, "transpose_b": tb},
    )
    ref_y, ref_z = reference.gemm_epilogue(
        a.astype(F64), b.astype(F64), bias.astype(F64), act="silu"
    )
    tol = TF32_TOL if family == "tf32" else F32_TOL
    assert rel_err(z, ref_z) < tol and rel_err(y, ref_y) < tol


@pytest.mark.parametrize("keep_z", [True, False], ids=["with_z", "in_place"])
@pytest.mark.parametrize("act", ["gelu", "silu"])
@pytest.mark.parametrize("prec", ["f32", "tf32"])
@pytest.mark.parametrize(
    ("a_shape", "n", "pair"),
    [((8, 256, 384), 1536, "nt"), ((67, 131), 48, "nn"), ((67, 131), 48, "tt")],
    ids=["gpt_mlp", "ragged_nn", "ragged_tt"],
)
def test_split_cublaslt_entry_against_numpy(a_shape, n, pair, prec, act, keep_z):
    """cuBLASLt's product + bias, then our exact GELU / SiLU kernel: Y and Z (or Y alone, the
    activation in place) against the float64 reference. gpt_mlp is nanogpt-char's c_fc on a
    batch of 8 ([8, 256, 384] x [1536, 384]^T, A of rank 3 folded into M = 2048)."""
    k = a_shape[-1]
    rng = np.random.default_rng(len(a_shape) * 1000 + n + k + 7 * len(act))
    ta, tb = PAIRS[pair]
    m = int(np.prod(a_shape[:-1]))
    a, b, bias = randn(rng, m, k), randn(rng, k, n), randn(rng, n)
    a_in = a.reshape(a_shape) if len(a_shape) > 2 else stored(a, ta)
    outs = [((*a_shape[:-1], n), np.float32)] * (2 if keep_z else 1)
    got = launch(
        f"cuda.gemm_epilogue_cublaslt_then_act_{prec}",
        [a_in, stored(b, tb), bias],
        outs,
        {"act": act, "transpose_a": ta, "transpose_b": tb},
        repeat=2,  # in place: a second run recomputes Z into Y before the activation
    )
    ref_y, ref_z = reference.gemm_epilogue(a.astype(F64), b.astype(F64), bias.astype(F64), act=act)
    tol = TF32_TOL if prec == "tf32" else F32_TOL
    assert rel_err(got[0].reshape(m, n), ref_y) < tol
    if keep_z:
        assert rel_err(got[1].reshape(m, n), ref_z) < tol


# --- backward epilogue, reductions, losses ---------------------------------


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_epilogue_grad(act):
    rng = np.random.default_rng(11)
    dy, saved = randn(rng, 300, 70), randn(rng, 300, 70)
    dz, db = launch(
        "cuda.epilogue_grad_f32",
        [dy, saved],
        [((300, 70), np.float32), ((70,), np.float32)],
        {"act": act},
    )
    ref_dz, ref_db = reference.epilogue_grad(dy.astype(F64), saved.astype(F64), act=act)
    assert rel_err(dz, ref_dz) < F32_TOL and rel_err(db, ref_db) < F32_TOL


@pytest.mark.parametrize("act", ["gelu", "relu"])
@pytest.mark.parametrize(
    ("m", "n"), [(16384, 1536), (2048, 512), (1000, 45)], ids=["nanogpt", "gpt_tiny", "ragged"]
)
def test_epilogue_grad_at_gpt_sizes(m, n, act):
    """dZ and dbias of a GPT's MLP (nanogpt-char's [16384, 1536]: 11 row chunks, then the
    chunk sums; gpt-tiny's [2048, 512]: 16) and a ragged case, against the float64
    reference; two runs of the same launches agree bit for bit (fixed-order sums)."""
    rng = np.random.default_rng(m + n)
    dy, saved = randn(rng, m, n), randn(rng, m, n, scale=2.0)
    if act == "relu":
        saved = np.maximum(saved, 0.0)
    outs = [((m, n), np.float32), ((n,), np.float32)]
    dz, db = launch("cuda.epilogue_grad_f32", [dy, saved], outs, {"act": act})
    again = launch("cuda.epilogue_grad_f32", [dy, saved], outs, {"act": act}, repeat=2)
    ref_dz, ref_db = reference.epilogue_grad(dy.astype(F64), saved.astype(F64), act=act)
    assert rel_err(dz, ref_dz) < F32_TOL and rel_err(db, ref_db) < F32_TOL
    assert np.array_equal(db, again[1]) and np.array_equal(dz, again[0])


@pytest.mark.parametrize(
    ("shape", "axes", "keepdims"),
    [
        ((37, 53), (0,), False),
        ((37, 53), (1,), False),
        ((37, 53), (0, 1), False),
        ((4, 5, 6), (1,), True),
        ((4, 5, 6), (1, 2), False),
        ((3000,), (0,), False),
        ((16384, 384), (0,), False),  # nanogpt-char's bias gradients: 43 row chunks
        ((64, 256, 1152), (0, 1), False),  # c_attn's, over [B, T]
        ((6, 2048, 100), (1,), True),  # chunks of each of 6 outer rows
    ],
)
def test_reduce_sum(shape, axes, keepdims):
    rng = np.random.default_rng(5)
    x = randn(rng, *shape)
    (ref,) = reference.reduce_sum(x.astype(F64), axes=axes, keepdims=keepdims)
    (out,) = launch(
        "cuda.reduce_sum_f32", [x], [(ref.shape, np.float32)], {"axes": axes, "keepdims": keepdims}
    )
    assert rel_err(out, ref) < F32_TOL


def test_reduce_sum_of_non_contiguous_axes_is_a_clear_error():
    with pytest.raises(CudaKernelError, match="one contiguous run of axes"):
        reduce_view((4, 5, 6), (0, 2))


@pytest.mark.parametrize("labels", ["i32", "i64"])
@pytest.mark.parametrize(("n", "c"), [(37, 11), (130, 1000)])
def test_cross_entropy_and_grad(labels, n, c):
    rng = np.random.default_rng(n + c)
    logits = randn(rng, n, c, scale=3.0)
    y = rng.integers(0, c, n).astype(np.int32 if labels == "i32" else np.int64)
    dloss = np.asarray(rng.uniform(0.5, 2.0), dtype=np.float32)
    (loss,) = launch(f"cuda.cross_entropy_f32_{labels}", [logits, y], [((), np.float32)], repeat=2)
    (dx,) = launch(
        f"cuda.cross_entropy_grad_f32_{labels}", [logits, y, dloss], [((n, c), np.float32)]
    )
    assert rel_err(loss, reference.cross_entropy(logits.astype(F64), y)[0]) < F32_TOL
    ref_dx = reference.cross_entropy_grad(logits.astype(F64), y, dloss.astype(F64))[0]
    assert rel_err(dx, ref_dx) < F32_TOL


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("labels", ["i32", "i64"])
@pytest.mark.parametrize(("n", "c"), [(37, 11), (130, 1000), (128, 10)])
def test_cross_entropy_with_grad(labels, n, c, with_bias):
    """The fused loss: loss, dlogits and (optionally) dbias in one launch, twice in a row
    (the workspace's ticket counter must be back at zero for the second)."""
    rng = np.random.default_rng(n * c)
    logits = randn(rng, n, c, scale=3.0)
    y = rng.integers(0, c, n).astype(np.int32 if labels == "i32" else np.int64)
    dloss = np.asarray(rng.uniform(0.5, 2.0), dtype=np.float32)
    outs = [((), np.float32), ((n, c), np.float32)] + ([((c,), np.float32)] if with_bias else [])
    got = launch(f"cuda.cross_entropy_with_grad_f32_{labels}", [logits, y, dloss], outs, repeat=2)
    ref = reference.cross_entropy_with_grad(logits.astype(F64), y, dloss.astype(F64))
    for out, expected in zip(got, ref, strict=False):
        assert rel_err(out, expected) < F32_TOL


def test_an_out_of_range_label_gives_a_nan_loss_and_a_zero_gradient_row():
    rng = np.random.default_rng(3)
    logits = randn(rng, 16, 10)
    y = rng.integers(0, 10, 16).astype(np.int32)
    y[5] = 10
    one = np.asarray(1.0, dtype=np.float32)
    loss, dx, db = launch(
        "cuda.cross_entropy_with_grad_f32_i32",
        [logits, y, one],
        [((), np.float32), ((16, 10), np.float32), ((10,), np.float32)],
    )
    assert np.isnan(loss) and not dx[5].any() and np.isfinite(dx).all()
    assert rel_err(db, dx.astype(F64).sum(axis=0)) < F32_TOL
    (unfused,) = launch("cuda.cross_entropy_f32_i32", [logits, y], [((), np.float32)])
    assert np.isnan(unfused)


def test_softmax_and_grad():
    rng = np.random.default_rng(2)
    x, dy = randn(rng, 19, 70, scale=4.0), randn(rng, 19, 70)
    (y,) = launch("cuda.softmax_f32", [x], [((19, 70), np.float32)], {"axis": -1})
    ref_y = reference.softmax(x.astype(F64), axis=1)[0]
    assert rel_err(y, ref_y) < F32_TOL
    (dx,) = launch("cuda.softmax_grad_f32", [dy, y], [((19, 70), np.float32)], {"axis": 1})
    assert rel_err(dx, reference.softmax_grad(dy.astype(F64), ref_y, axis=1)[0]) < F32_TOL


def test_mse_loss_and_grad():
    rng = np.random.default_rng(4)
    p, t = randn(rng, 130, 7), randn(rng, 130, 7)
    dloss = np.asarray(1.7, dtype=np.float32)
    (loss,) = launch("cuda.mse_loss_f32", [p, t], [((), np.float32)], repeat=3)
    (dp,) = launch("cuda.mse_loss_grad_f32", [p, t, dloss], [((130, 7), np.float32)])
    assert rel_err(loss, reference.mse_loss(p.astype(F64), t.astype(F64))[0]) < F32_TOL
    ref_dp = reference.mse_loss_grad(p.astype(F64), t.astype(F64), dloss.astype(F64))[0]
    assert rel_err(dp, ref_dp) < F32_TOL


# --- elementwise and layout ------------------------------------------------

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


@pytest.mark.parametrize("dt", ["f32", "i32", "i64"])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, dt):
    rng = np.random.default_rng(8)
    np_dt = {"f32": np.float32, "i32": np.int32, "i64": np.int64}[dt]
    if dt == "f32":
        a, b = randn(rng, 1003), randn(rng, 1003)
    else:
        a, b = (rng.integers(-(2**20), 2**20, 1003).astype(np_dt) for _ in range(2))
    (out,) = launch(f"cuda.{op}_{dt}", [a, b], [((1003,), np_dt)])
    np.testing.assert_array_equal(out, BINARY[op](a, b))


@pytest.mark.parametrize(
    ("kernel", "ref"),
    [
        ("relu", reference.relu),
        ("gelu", reference.gelu),
        ("tanh", reference.tanh),
        ("silu", reference.silu),
    ],
)
def test_unary_in_place_and_out_of_place(kernel, ref):
    rng = np.random.default_rng(9)
    x = randn(rng, 1003, scale=2.0)
    (out,) = launch(f"cuda.{kernel}_f32", [x], [((1003,), np.float32)])
    (inplace,) = launch(f"cuda.{kernel}_f32", [x], [((1003,), np.float32)], alias={0: 0})
    expected = ref(x.astype(F64))[0]
    assert rel_err(out, expected) < F32_TOL and rel_err(inplace, expected) < F32_TOL


@pytest.mark.parametrize(
    ("kernel", "ref"),
    [
        ("relu_grad", reference.relu_grad),
        ("gelu_grad", reference.gelu_grad),
        ("tanh_grad", reference.tanh_grad),
        ("silu_grad", reference.silu_grad),
    ],
)
def test_activation_grads(kernel, ref):
    rng = np.random.default_rng(10)
    dy, s = randn(rng, 1003), randn(rng, 1003, scale=2.0)
    (out,) = launch(f"cuda.{kernel}_f32", [dy, s], [((1003,), np.float32)])
    assert rel_err(out, ref(dy.astype(F64), s.astype(F64))[0]) < F32_TOL


def test_bias_add():
    rng = np.random.default_rng(12)
    x, bias = randn(rng, 33, 17), randn(rng, 17)
    (out,) = launch("cuda.bias_add_f32", [x, bias], [((33, 17), np.float32)])
    np.testing.assert_array_equal(out, x + bias)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_copy_reshape_transpose_broadcast(dtype):
    rng = np.random.default_rng(13)
    x = rng.integers(-1000, 1000, (3, 4, 5)).astype(dtype)
    suffix = "b32" if np.dtype(dtype).itemsize == 4 else "b64"
    (flat,) = launch("cuda.reshape", [x], [((60,), dtype)], {"shape": (60,)})
    np.testing.assert_array_equal(flat, x.reshape(60))
    (t,) = launch(f"cuda.transpose_{suffix}", [x], [((5, 3, 4), dtype)], {"perm": (2, 0, 1)})
    np.testing.assert_array_equal(t, np.transpose(x, (2, 0, 1)))
    col = x[0, :, :1]  # [4, 1]
    (bc,) = launch(
        f"cuda.broadcast_to_{suffix}",
        [np.ascontiguousarray(col)],
        [((3, 4, 5), dtype)],
        {"shape": (3, 4, 5)},
    )
    np.testing.assert_array_equal(bc, np.broadcast_to(col, (3, 4, 5)))


def test_copy_of_an_odd_number_of_bytes():
    x = np.arange(7, dtype=np.int32)
    (out,) = launch("cuda.copy", [x], [((7,), np.int32)])
    np.testing.assert_array_equal(out, x)


# --- dropout ------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["cuda.dropout_f32", "cuda.dropout_grad_f32"])
def test_dropout_is_bit_identical_to_the_reference_philox(kernel):
    rng = np.random.default_rng(14)
    x = randn(rng, 1001) + 3.0  # no zeros: a dropped element is exactly 0
    offset = np.asarray(12_345_678_901, dtype=np.int64)
    params = {"p": 0.3, "seed": (1 << 33) + 7}
    (out,) = launch(kernel, [x, offset], [((1001,), np.float32)], params)
    (ref,) = reference.dropout(x, offset, **params)
    np.testing.assert_array_equal(out, ref)
    keep = ref != 0
    assert 0.6 < keep.mean() < 0.8
    (other,) = launch(kernel, [x, offset + 1], [((1001,), np.float32)], params)
    assert ((other != 0) != keep).any(), "a new offset must draw a new mask"


# --- optimizers and the training loop's bookkeeping ----------------------------------

HP_NAMES = ("lr", "beta1", "beta2", "eps", "weight_decay")


def adam_args(rng, n, step, hp, scale, apply):
    """Host arrays of one adam_step launch: param, grad, m, v, step, the f64 hyperparameters
    (torch's defaults where `hp` has none), grad_scale and apply."""
    full = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, **hp}
    p, g, m = randn(rng, n), randn(rng, n), randn(rng, n, scale=0.1)
    v = np.abs(randn(rng, n, scale=0.01))
    hyper = [np.asarray(full[k], np.float64) for k in HP_NAMES]
    st = np.asarray(step, np.float32)
    return [p, g, m, v, st, *hyper, np.asarray(scale, np.float32), np.asarray(apply, np.float32)]


@pytest.mark.parametrize(
    ("hp", "decoupled"),
    [
        ({"lr": 1e-3}, False),
        ({"lr": 3e-3, "weight_decay": 0.01}, False),
        ({"lr": 2e-3, "weight_decay": 0.1, "beta1": 0.8}, True),
    ],
)
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("apply", [1.0, 0.0])
def test_multi_tensor_adam_updates_every_tensor_in_one_launch(hp, decoupled, in_place, apply):
    """Each tensor's own hyperparameter buffers, gradient scale and apply flag, read from
    device memory; apply = 0 leaves everything bit-identical."""
    import cupy

    rng = np.random.default_rng(15)
    sizes, steps, scales = [5000, 37, 1024 * 9 + 3], [0.0, 5.0, 41.0], [0.5, 1.0, 0.25]
    group, host = [], []
    for n, s, c in zip(sizes, steps, scales, strict=True):
        args = adam_args(rng, n, s, hp, c, apply)
        ins = [cupy.asarray(a) for a in args]
        if in_place:
            outs = [ins[0], ins[2], ins[3], ins[4]]
        else:
            outs = [cupy.full(a.shape, np.nan, np.float32) for a in (args[0], *args[2:5])]
        group.append((ins, outs))
        host.append(args)
    spec = registry.get("cuda.adam_step_multi_tensor_f32")
    params = {"decoupled_weight_decay": True} if decoupled else {}
    (la,) = launch_adam_group(spec, group, params, ctx())
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()
    la(stream)
    stream.synchronize()
    for (_, outs), args in zip(group, host, strict=True):
        ref = reference.adam_step(*args, decoupled_weight_decay=decoupled)
        for got, want in zip(outs, ref, strict=True):
            assert rel_err(cupy.asnumpy(got), want) < 1e-6
        if apply == 0.0:
            for got, before in zip(outs, [args[0], *args[2:5]], strict=True):
                assert cupy.asnumpy(got).tobytes() == before.tobytes()
    # A new learning rate written into its buffer is read by the same bound launch.
    for ins, _ in group:
        ins[5].fill(0.0)
    before = [cupy.asnumpy(outs[0]) for _, outs in group]
    la(stream)
    stream.synchronize()
    if in_place:  # lr = 0: the decoupled decay is 1 and the step size 0, params stay
        for (_, outs), b in zip(group, before, strict=True):
            assert cupy.asnumpy(outs[0]).tobytes() == b.tobytes()
    # The ticket counter was reset: the second launch advanced every step counter again.
    advance = 1.0 if apply else 0.0
    assert [float(outs[3].get()) for _, outs in group] == [
        (s + 2 * advance if in_place else s + advance) for s in steps
    ]


@pytest.mark.parametrize(
    "hp",
    [
        {"momentum": 0.0},
        {"momentum": 0.9, "weight_decay": 0.01},
        {"momentum": 0.9, "nesterov": True},
    ],
)
@pytest.mark.parametrize("apply", [1.0, 0.0])
def test_sgd(hp, apply):
    rng = np.random.default_rng(16)
    p, g, buf = randn(rng, 777), randn(rng, 777), randn(rng, 777)
    has_buf = hp["momentum"] != 0.0
    hyper = [np.asarray(v, np.float64) for v in (0.05, hp["momentum"], hp.get("weight_decay", 0.0))]
    control = [np.asarray(0.5, np.float32), np.asarray(apply, np.float32)]
    ins = [p, g, *hyper, *control] + ([buf] if has_buf else [])
    outs = [((777,), np.float32)] * (2 if has_buf else 1)
    params = {"nesterov": True} if hp.get("nesterov") else {}
    got = launch("cuda.sgd_step_f32", ins, outs, params)
    ref = reference.sgd_step(*ins, **params)
    for a, b in zip(got, ref, strict=True):
        assert rel_err(a, b) < 1e-6
    if apply == 0.0:
        assert got[0].tobytes() == p.tobytes()


def test_lr_schedule_on_the_device_follows_the_reference_and_the_counter():
    """SequentialLR(LinearLR, CosineAnnealingLR) over 300 launches of one bound kernel: lr
    from the device counter, which the kernel advances in place."""
    import cupy

    kinds, milestones, coefficients = (
        "linear,cosine",
        (20,),
        (0.1, 1.0, 20.0, 0.0, 280.0, 1e-5, 0.0, 0.0),
    )
    epoch = cupy.zeros((), np.int64)
    apply = cupy.ones((), np.float32)
    initial = [
        cupy.asarray(np.asarray(3e-4, np.float64)),
        cupy.asarray(np.asarray(0.1, np.float64)),
    ]
    lrs = [cupy.full((), np.nan, np.float64) for _ in initial]
    params = {"kinds": kinds, "milestones": milestones, "coefficients": coefficients}
    (la,) = launches_for(
        registry.get("cuda.lr_schedule"), [epoch, apply, *initial], [epoch, *lrs], params, ctx()
    )
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()
    for t in range(300):
        la(stream)
        stream.synchronize()
        for base, lr in zip((3e-4, 0.1), lrs, strict=True):
            want = reference_optim.schedule_lr(base, t, kinds, milestones, coefficients)
            assert abs(float(lr.get()) - want) <= 1e-14 * want
    assert int(epoch.get()) == 300


@pytest.mark.parametrize("sizes", [[5000, 37, 9219], [3], [1 << 20, 1]])
def test_clip_grad_norm_is_deterministic_and_matches_the_reference(sizes):
    rng = np.random.default_rng(23)
    grads = [randn(rng, n, scale=0.3) for n in sizes]
    outs = [((), np.float32), ((), np.float32)]
    first = launch("cuda.clip_grad_norm_f32", grads, outs, {"max_norm": 1.0}, repeat=3)
    again = launch("cuda.clip_grad_norm_f32", grads, outs, {"max_norm": 1.0})
    assert [a.tobytes() for a in first] == [a.tobytes() for a in again]
    norm, coef = reference.clip_grad_norm(*grads, max_norm=1.0)
    assert rel_err(first[0], norm) <= 2**-23 and rel_err(first[1], coef) <= 2**-22


def test_accumulation_and_the_window_mean():
    rng = np.random.default_rng(24)
    g, acc = randn(rng, 1003), randn(rng, 1003)
    for reset in (0.0, 1.0):
        r = np.asarray(reset, np.float32)
        got = launch(
            "cuda.accumulate_grad_f32", [g, acc, r], [((1003,), np.float32)] * 2, {"every": 3}
        )
        want = reference.accumulate_grad(g, acc, r, every=3)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))
    count = np.asarray(2, np.int64)
    new, apply = launch(
        "cuda.accumulation_step", [count], [((), np.int64), ((), np.float32)], {"every": 3}
    )
    assert (int(new), float(apply)) == (0, 1.0)


# --- the ABI and its errors ----------------------------------------------------


def test_every_registered_cuda_source_loads_with_the_abi_version():
    sources = {k.source for k in registry.REGISTRY if k.family == "cuda" and k.source}
    for source in sorted(sources):
        module = cuda_abi.load_module(source)
        assert cuda_abi._read_abi_version(module, source) == cuda_abi.KERNEL_ABI_VERSION


def test_an_abi_version_mismatch_is_refused(monkeypatch):
    monkeypatch.setattr(cuda_abi, "KERNEL_ABI_VERSION", 99)
    monkeypatch.setattr(cuda_abi, "_MODULES", {})
    with pytest.raises(
        CudaKernelError, match="speaks launch ABI version 1, this runtime speaks 99"
    ):
        cuda_abi.load_module("elementwise.cu")


def test_a_refused_launch_names_the_kernel_shapes_and_cuda_error():
    import cupy

    spec = registry.get("cuda.relu_f32")
    x = cupy.ones(10, np.float32)
    bad = cuda_abi.kernel_launch(spec, (1,), (4096,), [x, x], {"n": 10})
    with pytest.raises(
        CudaKernelError, match=r'kernel "cuda.relu_f32" \(float32\[10\], float32\[10\]\)'
    ):
        bad(cupy.cuda.Stream(non_blocking=True))
