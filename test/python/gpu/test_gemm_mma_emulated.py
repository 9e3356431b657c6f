"""kernels/gemm_mma.cu (the tensor-core latency GEMMs) on the CPU, through cuda_emu.h.

Behind the backend's real launchers (registry row -> launcher -> ABI -> kernel), each form
(bf16, f16, their float32-result "wide" forms, tf32) and transpose pair at ragged shapes
(the issue's widths 10, 100, 255, 256 and batches 1, 7, 128: partial tiles, K not a
multiple of the mma's k, chunks of K split over blocks). The reference is NumPy's float64
product of the inputs rounded as the kernel rounds them (bf16 / f16: ml_dtypes, NumPy;
tf32: round to nearest, ties away, 10 mantissa bits), then runtime/reference.py's
epilogue in float64. Inputs are fresh random arrays, outputs poisoned with NaN, every
case runs twice (the second launch must find its tickets at zero).

Tolerances (norm-wise relative error): a float32 result 1e-5 (exact products, float32
sums in another order); a bf16 result 4e-3 and an f16 one 1e-3 (one rounding of the
result, at most 2^-9 and 2^-11 relative, plus the float32 sums).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err
from gpu.test_mma_fragments import tf32_round

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}
STORAGE = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
FORMS = {  # form -> (operand dtype, result dtype), as runtime/registry_cuda_mma.py's rows
    "bf16": ("bf16", "bf16"),
    "bf16_f32": ("bf16", "f32"),
    "f16": ("f16", "f16"),
    "f16_f32": ("f16", "f32"),
    "tf32": ("f32", "f32"),
}
TOL = {"f32": F32_TOL, "bf16": 4e-3, "f16": 1e-3}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random values stored in `dtype` (tf32's operands are float32)."""
    return rng.standard_normal(shape).astype(STORAGE[dtype])


def rounded64(x: np.ndarray, form: str) -> np.ndarray:
    """`x` in float64 as the kernel's tensor cores see it (tf32 rounds float32 inputs)."""
    return (tf32_round(x) if form == "tf32" else x).astype(np.float64)


def run(kernel: str, ins: list[np.ndarray], outs: list[np.ndarray], params: dict[str, Any],
        ctx: EmuContext) -> tuple[list[np.ndarray], Any]:  # fmt: skip
    """The outputs of `kernel` launched `ctx.times` times (default once), and its launch."""
    wrapped = [EmuArray(o) for o in outs]
    (launch,) = launches_for(registry.get(kernel), [EmuArray(a) for a in ins], wrapped, params, ctx)
    for _ in range(getattr(ctx, "times", 1)):
        launch(NullStream())
    return [w.array for w in wrapped], launch


def twice() -> EmuContext:
    """A context on one multiprocessor (the fewest splits) whose cases run twice."""
    ctx = EmuContext()
    ctx.sm_count = 1
    ctx.times = 2  # type: ignore[attr-defined]
    return ctx


def tickets_are_zero(ctx: EmuContext, launch: Any, strips: bool) -> bool:
    (ws,) = ctx.keep
    n = launch.grid[0] * launch.grid[1] + (launch.grid[0] if strips else 0)
    return not ws.array[: 4 * n].any()


def forward_case(op: str, form: str, pair: str, m: int, n: int, k: int, act: str, seed: int,
                 ctx: EmuContext | None = None) -> tuple[float, float, Any]:  # fmt: skip
    """Errors of Y and Z (Z: nan for matmul, which has none) and the launch."""
    rng = np.random.default_rng(seed)
    dt, out = FORMS[form]
    ta, tb = PAIRS[pair]
    a, b = operand(rng, (m, k), dt), operand(rng, (k, n), dt)
    ins = [a.T.copy() if ta else a, b.T.copy() if tb else b]
    y = np.full((m, n), np.nan, STORAGE[out])
    params: dict[str, Any] = {"transpose_a": ta, "transpose_b": tb}
    if form.endswith("_f32"):
        params["out_dtype"] = "f32"
    ctx = ctx or EmuContext()
    a64, b64 = rounded64(a, form), rounded64(b, form)
    if op == "matmul":
        (y,), launch = run(f"cuda.matmul_mma_{form}_{pair}", ins, [y], params, ctx)
        return rel_err(y, a64 @ b64), float("nan"), launch
    bias = operand(rng, (n,), out)
    z = np.full((m, n), np.nan, STORAGE[out])
    params["act"] = act
    (y, z), launch = run(f"cuda.gemm_epilogue_mma_{form}_{pair}", [*ins, bias], [y, z], params, ctx)
    ref_y, ref_z = reference.gemm_epilogue(a64, b64, bias.astype(np.float64), act=act)
    assert tickets_are_zero(ctx, launch, strips=False)
    return rel_err(y, ref_y), rel_err(z, ref_z), launch


FORM_PAIRS = [(f, "nn") for f in FORMS] + [
    (f, p) for f in ("bf16", "tf32") for p in PAIRS if p != "nn"
]  # every form once, every pair for a 16-bit and the tf32 form


@pytest.mark.parametrize(("form", "pair"), FORM_PAIRS)
def test_gemm_epilogue_each_form_and_pair_at_a_ragged_shape(form, pair):
    """M = 7 (a partial row tile), N = 40 (two column tiles, one partial), K = 10 (a partial
    k step), bias and GELU, Y and Z."""
    ey, ez, launch = forward_case("gemm_epilogue", form, pair, 7, 40, 10, "gelu", seed=3)
    assert launch.grid == (2, 1, 1)
    tol = TOL[FORMS[form][1]]
    assert ey < tol and ez < tol


def test_gemm_epilogue_adds_two_chunks_of_k_in_order():
    """K = 130 in two chunks of 96 (one multiprocessor: the fewest splits), the last one 34
    deep; run twice, so the tile's ticket must be back at zero after the first."""
    ctx = twice()
    ey, ez, launch = forward_case("gemm_epilogue", "bf16_f32", "nt", 7, 10, 130, "relu", 4, ctx)
    assert launch.grid == (1, 1, 2) and int(launch.args[-1]) == 96
    assert ey < F32_TOL and ez < F32_TOL


@pytest.mark.parametrize(
    ("form", "pair", "m", "n", "k"),
    [
        ("bf16", "nt", 1, 255, 10),
        ("f16_f32", "tn", 128, 10, 16),
        ("tf32", "nn", 7, 100, 24),
        ("bf16_f32", "tt", 7, 256, 7),
    ],
    ids=["batch_1_n_255", "batch_128_n_10", "batch_7_n_100", "batch_7_n_256"],
)
def test_matmul_at_the_issue_shapes(form, pair, m, n, k):
    ey, _, _ = forward_case("matmul", form, pair, m, n, k, "none", seed=m + n + k)
    assert ey < TOL[FORMS[form][1]]


@pytest.mark.parametrize("act", ["none", *EPILOGUE_ACTIVATIONS])
def test_gemm_epilogue_each_activation(act):
    ey, ez, _ = forward_case("gemm_epilogue", "bf16_f32", "nt", 33, 10, 16, act, seed=9)
    assert ey < F32_TOL and ez < F32_TOL


def grad_case(form: str, pair: str, m: int, n: int, k: int, act: str, seed: int,
              ctx: EmuContext) -> tuple[float, float, Any]:  # fmt: skip
    """Errors of dZ and dbias of gemm_epilogue_grad and the launch."""
    rng = np.random.default_rng(seed)
    dt, out = FORMS[form]
    ta, tb = PAIRS[pair]
    a, b = operand(rng, (m, k), dt), operand(rng, (k, n), dt)
    saved = (rng.standard_normal((m, n)) * 2).astype(STORAGE[dt])  # both signs for relu
    ins = [a.T.copy() if ta else a, b.T.copy() if tb else b, saved]
    dz = np.full((m, n), np.nan, STORAGE[dt])
    db = np.full(n, np.nan, STORAGE[out])
    params: dict[str, Any] = {"act": act, "transpose_a": ta, "transpose_b": tb}
    if form.endswith("_f32"):
        params["out_dtype"] = "f32"
    (dz, db), launch = run(f"cuda.gemm_epilogue_grad_mma_{form}_{pair}", ins, [dz, db], params,
                           ctx)  # fmt: skip
    ref_dz, ref_db = reference.gemm_epilogue_grad(
        rounded64(a, form), rounded64(b, form), saved.astype(np.float64), act=act
    )
    assert tickets_are_zero(ctx, launch, strips=True)
    return rel_err(dz, ref_dz), rel_err(db, ref_db), launch


@pytest.mark.parametrize(("form", "pair"), FORM_PAIRS)
def test_gemm_epilogue_grad_each_form_and_pair(form, pair):
    """M = 37 (two row tiles of one column strip, the second partial: the strip's column
    sums added in tile order), N = 10, K = 10, ReLU's gradient."""
    edz, edb, launch = grad_case(form, pair, 37, 10, 10, "relu", seed=5, ctx=EmuContext())
    assert launch.grid == (1, 2, 1)
    tol = TOL[FORMS[form][0]]  # dZ and the sums of dZ as stored round as the operands do
    assert edz < tol and edb < tol


def test_gemm_epilogue_grad_adds_two_chunks_of_k():
    """K = 128 in two chunks of 64; run twice (tile and strip tickets back at zero)."""
    edz, edb, launch = grad_case("tf32", "nt", 7, 10, 128, "silu", seed=6, ctx=twice())
    assert launch.grid == (1, 1, 2) and int(launch.args[-1]) == 64
    assert edz < F32_TOL and edb < F32_TOL


def test_gemm_epilogue_grad_of_the_small_mlp_dx():
    """The small MLP's last dX: dY [M, 10] W [10, N], K = 10 (one partial k16 step), at
    batch 128 and N = 40 (8 tiles in 2 strips of 4)."""
    edz, edb, launch = grad_case("bf16_f32", "nn", 128, 40, 10, "relu", seed=8, ctx=EmuContext())
    assert launch.grid == (2, 4, 1)
    assert edz < TOL["bf16"] and edb < TOL["bf16"]
