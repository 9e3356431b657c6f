"""layernorm.cu's narrow entries on the CPU emulator: aicfc_[add_]layer_norm_f32_{bf16,f16}
(y stored in bf16/f16 over float32 operands, aicfc-fold-narrowing-casts), behind the
registry entries' real launchers.

Each runs on fresh random float32 rows of ragged and aligned widths (odd D takes the
scalar path, D a multiple of 4 the 16-byte one; the team grows with D), with and without
the affine operands and the residual, its outputs poisoned first. Checked:
- y is bit for bit the f32 kernel's y rounded by graph.cast's reference (ml_dtypes /
  NumPy astype, to nearest even): the one rounding the cast did, at the same point;
- the sum, mean and rstd are bit for bit the f32 kernel's (float32 math unchanged);
- y against the NumPy reference of the narrowed op (runtime/reference.py, out_dtype) within
  one rounding of the low dtype (norm-wise, LOW_TOL), the statistics within F32_TOL.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects import graph as g
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
LOW_TOL = {"bf16": 2.0**-8, "f16": 2.0**-11}
"""Norm-wise relative error of y against the reference: one rounding of the low dtype
(half an ulp, 2^-9 resp. 2^-12, where both round the same float32 value; a float32
difference of the sums' order can move a value across a rounding boundary: one ulp)."""
SHAPES = [(7, 5), (5, 37), (6, 64), (3, 130), (4, 384), (2, 1030)]
EPS = 1e-5


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def run(kernel: str, ins: list[np.ndarray], outs: list[np.ndarray], params: dict) -> None:
    wrapped = [EmuArray(a) for a in outs]
    for launch in launches_for(
        registry.get(kernel), [EmuArray(a) for a in ins], wrapped, params, EmuContext()
    ):
        launch(NullStream())
    for a, w in zip(outs, wrapped, strict=True):
        a[...] = w.array


def poisoned(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return np.full(shape, np.nan, np.float32).astype(dtype)


def forward(
    low: str | None, x: np.ndarray, r: np.ndarray | None, affine: list[np.ndarray]
) -> list[np.ndarray]:
    """[s,] y, mean, rstd from cuda.[add_]layer_norm_f32[_<low>]."""
    n, d = x.shape
    y = poisoned((n, d), LOW[low] if low else np.float32)
    stats = [poisoned((n,)), poisoned((n,))]
    op = "layer_norm" if r is None else "add_layer_norm"
    kernel = f"cuda.{op}_f32" + (f"_{low}" if low else "")
    params: dict = {"eps": EPS, **({"out_dtype": low} if low else {})}
    ins = [x, *([r] if r is not None else []), *affine]
    outs = [*([poisoned((n, d))] if r is not None else []), y, *stats]
    run(kernel, ins, outs, params)
    return outs


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("low", sorted(LOW))
@pytest.mark.parametrize("residual", [False, True], ids=["layer_norm", "add_layer_norm"])
@pytest.mark.parametrize("affine", ["wb", "w", "none"])
@pytest.mark.parametrize(("n", "d"), SHAPES, ids=[f"{n}x{d}" for n, d in SHAPES])
def test_narrow_layer_norm_is_the_cast_of_the_f32_kernel(n, d, affine, residual, low):
    rng = np.random.default_rng(1000 * n + d + 7 * residual + len(affine))
    x = (rng.standard_normal((n, d)) * 2.0 + 0.5).astype(np.float32)
    r = rng.standard_normal((n, d)).astype(np.float32) * 3 if residual else None
    ws = [
        rng.standard_normal(d).astype(np.float32) for _ in range({"wb": 2, "w": 1}.get(affine, 0))
    ]
    got = forward(low, x, r, ws)
    want = forward(None, x, r, ws)
    y, y32 = got[-3], want[-3]
    assert y.dtype == LOW[low]
    (cast,) = reference.cast(y32, dtype=low)
    np.testing.assert_array_equal(bits(y), bits(cast))
    for a, b in zip(got[:-3] + got[-2:], want[:-3] + want[-2:], strict=True):
        np.testing.assert_array_equal(bits(a), bits(b))  # sum, mean, rstd: float32, unchanged
    cls = g.LayerNormOp if r is None else g.AddLayerNormOp
    ins = [x, *([r] if r is not None else []), *ws]
    ref = reference.REFERENCE[cls](*ins, eps=EPS, out_dtype=low)
    assert ref[-3].dtype == LOW[low]
    assert rel_err(y.astype(np.float64), ref[-3].astype(np.float64)) <= LOW_TOL[low]
    for a, b in zip(got[-2:], ref[-2:], strict=True):
        assert b.dtype == np.float32 and rel_err(a, b) <= F32_TOL
    if r is not None:
        np.testing.assert_array_equal(got[0], ref[0])  # one float32 add
