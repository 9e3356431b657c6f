"""kernels/gemm_mma.cu (the tensor-core latency GEMMs) on the GPU.

The emulated tests (test_gemm_mma_emulated.py) check the index math on small cases; these
run the hardware's mma.sync at the issue's ragged shapes (widths 10, 100, 255, 256;
batches 1, 7, 128) and at every product of the small MLP's train step (784-256-256-10,
batch 128), each form (bf16, f16, their float32-result forms, tf32) and transpose pair,
behind the backend's launchers. The reference is NumPy's float64 product of the inputs
rounded as the kernel rounds them, then runtime/reference.py's epilogue; outputs are
poisoned with NaN; each case runs twice and must give bit-identical results (the split-K
sums are in a fixed order). bf16 cases need CuPy with bfloat16 arrays (CuPy 14) and skip
with the reason otherwise. Tolerances as the emulated tests': a float32 result 1e-5, bf16
4e-3, f16 1e-3 (norm-wise relative error).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aicfc.runtime import reference, registry
from aicfc.runtime.cuda.context import DeviceContext
from aicfc.runtime.cuda.launch import launches_for
from gpu.gpu_support import gpu, rel_err
from gpu.test_gemm_mma_emulated import FORMS, PAIRS, STORAGE, TOL, rounded64
from gpu.test_mixed_precision_gpu import need

pytestmark = gpu

CTX: DeviceContext | None = None


def ctx() -> DeviceContext:
    global CTX
    if CTX is None:
        CTX = DeviceContext()
    return CTX


def run_twice(kernel: str, ins: list[np.ndarray], outs: list[np.ndarray],
              params: dict[str, Any]) -> list[np.ndarray]:  # fmt: skip
    """`kernel`'s outputs (poisoned copies of `outs` on the device) after one launch; the
    second launch must reproduce them bit for bit."""
    import cupy

    d_ins = [cupy.asarray(a) for a in ins]
    d_outs = [cupy.asarray(o) for o in outs]
    launches = launches_for(registry.get(kernel), d_ins, d_outs, params, ctx())
    stream = cupy.cuda.Stream(non_blocking=True)
    results = []
    for _ in range(2):
        for la in launches:
            la(stream)
        stream.synchronize()
        results.append([cupy.asnumpy(o) for o in d_outs])
    for first, second in zip(*results, strict=True):
        assert np.array_equal(first.view(np.uint8), second.view(np.uint8))
    return results[0]


def gemm(op: str, form: str, pair: str, m: int, n: int, k: int, act: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dt, out = FORMS[form]
    need(dt)  # bf16 buffers need CuPy 14 (ml_dtypes' bfloat16); the skip says so
    ta, tb = PAIRS[pair]
    a = rng.standard_normal((m, k)).astype(STORAGE[dt])
    b = rng.standard_normal((k, n)).astype(STORAGE[dt])
    ins = [np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b]
    params: dict[str, Any] = {"transpose_a": ta, "transpose_b": tb}
    if form.endswith("_f32"):
        params["out_dtype"] = "f32"
    a64, b64 = rounded64(a, form), rounded64(b, form)
    poison = np.full((m, n), np.nan, STORAGE[out])
    tol = TOL[out]
    if op == "matmul":
        (y,) = run_twice(f"cuda.matmul_mma_{form}_{pair}", ins, [poison], params)
        assert rel_err(y, a64 @ b64) < tol
        return
    bias = rng.standard_normal(n).astype(STORAGE[out])
    params["act"] = act
    y, z = run_twice(f"cuda.gemm_epilogue_mma_{form}_{pair}", [*ins, bias], [poison, poison],
                     params)  # fmt: skip
    ref_y, ref_z = reference.gemm_epilogue(a64, b64, bias.astype(np.float64), act=act)
    assert rel_err(y, ref_y) < tol and rel_err(z, ref_z) < tol


def epilogue_grad(form: str, pair: str, m: int, n: int, k: int, act: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dt, out = FORMS[form]
    need(dt)  # bf16 buffers need CuPy 14 (ml_dtypes' bfloat16); the skip says so
    ta, tb = PAIRS[pair]
    a = rng.standard_normal((m, k)).astype(STORAGE[dt])
    b = rng.standard_normal((k, n)).astype(STORAGE[dt])
    saved = (rng.standard_normal((m, n)) * 2).astype(STORAGE[dt])
    ins = [np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b, saved]
    params: dict[str, Any] = {"act": act, "transpose_a": ta, "transpose_b": tb}
    if form.endswith("_f32"):
        params["out_dtype"] = "f32"
    outs = [np.full((m, n), np.nan, STORAGE[dt]), np.full(n, np.nan, STORAGE[out])]
    dz, db = run_twice(f"cuda.gemm_epilogue_grad_mma_{form}_{pair}", ins, outs, params)
    ref_dz, ref_db = reference.gemm_epilogue_grad(
        rounded64(a, form), rounded64(b, form), saved.astype(np.float64), act=act
    )
    assert rel_err(dz, ref_dz) < TOL[dt] and rel_err(db, ref_db) < TOL[dt]


RAGGED = [(1, 10, 256), (7, 100, 255), (128, 255, 100), (7, 256, 10), (128, 10, 1000)]


@pytest.mark.parametrize(("m", "n", "k"), RAGGED, ids=lambda v: str(v))
@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("form", list(FORMS))
def test_gemm_epilogue_and_matmul_at_ragged_shapes(form, pair, m, n, k):
    gemm("gemm_epilogue", form, pair, m, n, k, "gelu", seed=m + n + k)
    gemm("matmul", form, pair, m, n, k, "none", seed=m * n + k)


@pytest.mark.parametrize(("m", "n", "k"), RAGGED, ids=lambda v: str(v))
@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("form", list(FORMS))
def test_gemm_epilogue_grad_at_ragged_shapes(form, pair, m, n, k):
    epilogue_grad(form, pair, m, n, k, "relu", seed=m + n + k)


SMALL_MLP = [  # (op, pair, M, N, K, act) of the small MLP's train step, as lowered
    ("gemm_epilogue", "nt", 128, 256, 784, "relu"),
    ("gemm_epilogue", "nt", 128, 256, 256, "relu"),
    ("gemm_epilogue", "nt", 128, 10, 256, "none"),
    ("matmul", "tn", 10, 256, 128, "none"),
    ("matmul", "tn", 256, 256, 128, "none"),
    ("matmul", "tn", 256, 784, 128, "none"),
    ("gemm_epilogue_grad", "nn", 128, 256, 10, "relu"),
    ("gemm_epilogue_grad", "nn", 128, 256, 256, "relu"),
]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize(("op", "pair", "m", "n", "k", "act"), SMALL_MLP, ids=lambda v: str(v))
def test_the_small_mlp_products(form, op, pair, m, n, k, act):
    if op == "gemm_epilogue_grad":
        epilogue_grad(form, pair, m, n, k, act, seed=m + n + k)
    else:
        gemm(op, form, pair, m, n, k, act, seed=m + n + k)
