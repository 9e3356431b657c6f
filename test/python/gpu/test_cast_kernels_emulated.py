"""kernels/cast.cu on the CPU emulator (cuda_emu.h's bf16/f16 words), behind its launcher:
every cast is bitwise reference.cast (ml_dtypes / NumPy astype: round to nearest even),
on fresh random values plus exact ties, signed zeros, inf, NaN, fp16's overflow and fp16's
subnormals; the subnormals also against their fp16 words written out by hand."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from precision.test_bf16_reference import F16_SUBNORMALS

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def values(rng: np.random.Generator) -> np.ndarray:
    x = (rng.standard_normal(997) * 50).astype(np.float32)
    special = np.array(
        [
            1 + 2**-8,
            1 + 3 * 2**-8,
            -(1 + 2**-8),
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            70000.0,
            65504.0,
            65520.0,
            1e-30,
            3.0e38,
        ],
        np.float32,
    )  # bf16 ties both ways, f16: max, the tie above max (-> inf), overflow, underflow
    subnormals = np.array([v for v, _ in F16_SUBNORMALS], np.float32)
    return np.concatenate([x, special, subnormals])


@pytest.mark.parametrize(
    ("src", "dst"), [("f32", "bf16"), ("f32", "f16"), ("bf16", "f32"), ("f16", "f32")]
)
def test_cast_kernels_are_bitwise_the_reference(src: str, dst: str) -> None:
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore"):
        x = values(rng).astype(DTYPES[src])
    (want,) = reference.cast(x, dtype=dst)
    out = EmuArray(np.full(x.shape, np.nan, np.float32).astype(DTYPES[dst]))
    spec = registry.get(f"cuda.cast_{src}_{dst}")
    for launch in launches_for(spec, [EmuArray(x)], [out], {"dtype": dst}, EmuContext()):
        launch(NullStream())
    got, ref = (
        out.array.view(np.uint16 if dst != "f32" else np.uint32),
        want.view(np.uint16 if dst != "f32" else np.uint32),
    )
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(got[~nan], ref[~nan])
    assert np.isnan(out.array[nan].astype(np.float32)).all()


def test_f16_cast_kernels_round_subnormals_to_nearest_even() -> None:
    x = np.array([v for v, _ in F16_SUBNORMALS], np.float32)
    words = np.array([bits for _, bits in F16_SUBNORMALS], np.uint16)
    half = EmuArray(np.full(x.shape, np.nan, np.float16))
    run("cuda.cast_f32_f16", [x], [half], {"dtype": "f16"})
    np.testing.assert_array_equal(half.array.view(np.uint16), words)
    # and back: exact, (word & 0x7FFF) * 2^-24 with the sign (exponent field 0, or 1 with a
    # zero significand, in every word here)
    wide = EmuArray(np.full(x.shape, np.nan, np.float32))
    run("cuda.cast_f16_f32", [words.view(np.float16)], [wide], {"dtype": "f32"})
    sign = np.where(words & 0x8000, -1.0, 1.0)
    want = (sign * (words & 0x7FFF).astype(np.float64) * 2.0**-24).astype(np.float32)
    np.testing.assert_array_equal(wide.array.view(np.uint32), want.view(np.uint32))


def run(kernel: str, ins: list[np.ndarray], outs: list[EmuArray], params: dict) -> None:
    spec = registry.get(kernel)
    for launch in launches_for(spec, [EmuArray(a) for a in ins], outs, params, EmuContext()):
        launch(NullStream())


def poisoned(shape: tuple[int, ...], dt: str) -> EmuArray:
    return EmuArray(np.full(shape, np.nan, np.float32).astype(DTYPES[dt]))


def norm_err(got: np.ndarray, want: np.ndarray) -> float:
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(g - w) / np.linalg.norm(w))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_low_precision_epilogue_grad_computes_in_fp32_and_rounds_once(dt: str, act: str) -> None:
    rng = np.random.default_rng(9)
    m, n = 70, 45
    dy = rng.standard_normal((m, n)).astype(DTYPES[dt])
    saved = rng.standard_normal((m, n)).astype(DTYPES[dt])
    dz, db = poisoned((m, n), dt), poisoned((n,), dt)
    run(f"cuda.epilogue_grad_{dt}", [dy, saved], [dz, db], {"act": act})
    want_dz, want_db = reference.REFERENCE[ad.EpilogueGradOp](dy, saved, act=act)
    unit = {"bf16": 2.0**-8, "f16": 2.0**-11}[dt]
    # dZ is elementwise, fp32 math and one rounding: relu's is bitwise the reference; gelu's
    # erf/exp in C and in NumPy differ in the last fp32 bits, which can tip one rounding
    if act == "relu":
        np.testing.assert_array_equal(dz.array.view(np.uint16), want_dz.view(np.uint16))
    else:
        got, want = dz.array.astype(np.float64), want_dz.astype(np.float64)
        assert (np.abs(got - want) <= 2 * unit * np.abs(want) + 1e-30).all()
    # dbias sums fp32 dZ in another order, then rounds once: within one rounding (2^-8 for
    # bf16, 2^-11 for f16) of the float64 sum of the same fp32 dZ
    exact = reference.epilogue_grad(dy.astype(np.float64), saved.astype(np.float64), act=act)[1]
    assert norm_err(db.array, exact) <= unit
    assert norm_err(want_db, exact) <= unit


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize(
    ("shape", "axes"), [((64, 37), (0,)), ((3, 50, 8), (1,)), ((6, 300), (1,))]
)
def test_low_precision_reduce_sum(dt: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(DTYPES[dt])
    (want,) = reference.REFERENCE[g.ReduceSumOp](x, axes=axes)
    out = poisoned(want.shape, dt)
    run(f"cuda.reduce_sum_{dt}", [x], [out], {"axes": axes})
    exact = x.astype(np.float64).sum(axis=axes)
    unit = {"bf16": 2.0**-8, "f16": 2.0**-11}[dt]
    # both sum in fp32 (in different orders) and round once: each within one rounding of
    # the float64 sum, so within two of each other
    assert norm_err(out.array, exact) <= unit
    assert norm_err(want, exact) <= unit
    assert norm_err(out.array, want) <= 2 * unit


def within_one_rounding(got: np.ndarray, want: np.ndarray, dt: str) -> bool:
    """|got - want| <= 2 units of roundoff of `dt` relative to want, elementwise: the C and
    NumPy transcendental functions differ in their last fp32 bits, which can tip a rounding."""
    unit = {"bf16": 2.0**-8, "f16": 2.0**-11}[dt]
    g, w = got.astype(np.float64), want.astype(np.float64)
    return bool((np.abs(g - w) <= 2 * unit * np.abs(w) + 1e-6).all())


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_low_precision_elementwise_kernels_are_the_reference(dt: str) -> None:
    rng = np.random.default_rng(13)
    n, c = 1000, 40
    a = (rng.standard_normal(n) * 3).astype(DTYPES[dt])
    b = (rng.standard_normal(n) * 3).astype(DTYPES[dt])
    bias = rng.standard_normal(c).astype(DTYPES[dt])
    cases = [
        ("add", [a, b], {}, g.AddOp, True),
        ("mul", [a, b], {}, g.MulOp, True),
        ("relu", [a], {}, g.ReluOp, True),
        ("relu_grad", [a, b], {}, ad.ReluGradOp, True),
        ("gelu", [a], {}, g.GeluOp, False),
        ("gelu_grad", [a, b], {}, ad.GeluGradOp, False),
    ]
    for name, ins, params, op, bitwise in cases:
        out = poisoned((n,), dt)
        run(f"cuda.{name}_{dt}", ins, [out], params)
        (want,) = reference.REFERENCE[op](*ins, **params)
        if bitwise:
            np.testing.assert_array_equal(out.array.view(np.uint16), want.view(np.uint16), name)
        else:
            assert within_one_rounding(out.array, want, dt), name
    x = a.reshape(25, c)
    out = poisoned((25, c), dt)
    run(f"cuda.bias_add_{dt}", [x, bias], [out], {})
    (want,) = reference.REFERENCE[g.BiasAddOp](x, bias)
    np.testing.assert_array_equal(out.array.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_low_precision_dropout_and_layouts_move_the_reference_bits(dt: str) -> None:
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 6, 12)).astype(DTYPES[dt])
    offset = np.asarray(5, np.int64)
    out = poisoned(x.shape, dt)
    run(f"cuda.dropout_{dt}", [x, offset], [out], {"p": 0.25, "seed": 3})
    (want,) = reference.REFERENCE[g.DropoutOp](x, offset, p=0.25, seed=3)
    np.testing.assert_array_equal(out.array.view(np.uint16), want.view(np.uint16))
    out = poisoned((12, 2, 6), dt)
    run("cuda.transpose_b16", [x], [out], {"perm": (2, 0, 1)})
    np.testing.assert_array_equal(out.array.view(np.uint16), x.transpose(2, 0, 1).view(np.uint16))
    parts = [poisoned((2, 6, 4), dt) for _ in range(3)]
    run("cuda.split_b16", [x], parts, {"axis": 2, "sizes": (4, 4, 4)})
    for k, part in enumerate(parts):
        np.testing.assert_array_equal(part.array, x[..., 4 * k : 4 * k + 4])


def test_loss_scaling_kernels_are_the_reference() -> None:
    rng = np.random.default_rng(19)
    grad = rng.standard_normal(777).astype(np.float32) * 1e4
    scale = np.asarray(1024.0, np.float32)
    for poison in (None, np.inf, np.nan):
        gv = grad.copy()
        if poison is not None:
            gv[300] = poison
        out, found = EmuArray(np.full(777, np.nan, np.float32)), EmuArray(np.float32([7.0]))
        run("cuda.unscale_grad_f32", [gv, scale], [out, found], {})
        want, want_found = reference.REFERENCE[ad.UnscaleGradOp](gv, scale)
        np.testing.assert_array_equal(out.array, want)
        assert float(found.array[0]) == float(want_found) == (0.0 if poison is None else 1.0)
    new, old = (
        rng.standard_normal(50).astype(np.float32),
        rng.standard_normal(50).astype(np.float32),
    )
    for flag in (0.0, 1.0):
        out = EmuArray(np.full(50, np.nan, np.float32))
        run("cuda.amp_select_f32", [np.asarray(flag, np.float32), new, old], [out], {})
        np.testing.assert_array_equal(out.array, old if flag else new)
    cases = ((1024.0, 3.0, 1.0), (1024.0, 3.0, 0.0), (1024.0, 9.0, 0.0), (3e38, 9.0, 0.0))
    for start, tracker, flag in cases:  # the last: growing would overflow, the scale stays
        s1, t1 = EmuArray(np.float32([np.nan])), EmuArray(np.float32([np.nan]))
        ins = [np.asarray(v, np.float32) for v in (start, tracker, flag)]
        run("cuda.update_scale_f32", ins, [s1, t1], {"growth_interval": 10})
        ws, wt = reference.REFERENCE[ad.UpdateScaleOp](*ins, growth_interval=10)
        assert (float(s1.array[0]), float(t1.array[0])) == (float(ws), float(wt))


F32_SUM = 1e-5
"""Relative error of a float32 sum of a few hundred terms against the float64 one (fp32
accumulation, unrounded): far below one bf16 (2^-8) or f16 (2^-11) rounding."""


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize(
    ("shape", "axes"), [((64, 37), (0,)), ((3, 50, 8), (1,)), ((300, 45), (0,)), ((6, 300), (1,))]
)
def test_wide_reduce_sum_writes_the_fp32_sum(
    dt: str, shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    """reduce_sum_<dt>_f32 (a cast folded into the reduction, aicfc-fold-casts): the float32
    sum of the low values, unrounded; [300, 45] over rows splits into chunks (f32 partials)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape).astype(DTYPES[dt])
    out = poisoned(x.astype(np.float64).sum(axis=axes).shape, "f32")
    run(f"cuda.reduce_sum_{dt}_f32", [x], [out], {"axes": axes, "out_dtype": "f32"})
    exact = x.astype(np.float64).sum(axis=axes)
    assert out.array.dtype == np.float32
    assert norm_err(out.array, exact) <= F32_SUM
    (want,) = reference.REFERENCE[g.ReduceSumOp](x, axes=axes, out_dtype="f32")
    assert want.dtype == np.float32 and norm_err(want, exact) <= F32_SUM


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("m", [70, 300])
def test_wide_epilogue_grad_writes_dbias_in_fp32(dt: str, act: str, m: int) -> None:
    """epilogue_grad_<dt>_f32: dZ as the low kernel's (bitwise for relu), dbias the float32
    column sums of the unrounded fp32 dZ; 300 rows split into two chunks of f32 partials
    added by sum_partials_f32 (two launches), 70 rows are one."""
    rng = np.random.default_rng(13)
    n = 45
    spec = registry.get(f"cuda.epilogue_grad_{dt}_f32")
    shapes = [EmuArray(np.zeros((m, n), DTYPES[dt])) for _ in range(3)]
    plan = launches_for(spec, shapes[:2], [shapes[2], EmuArray(np.zeros(n, np.float32))],
                        {"act": act, "out_dtype": "f32"}, EmuContext())  # fmt: skip
    assert [la.name for la in plan][1:] == (["cuda.sum_partials_f32"] if m == 300 else [])
    dy = rng.standard_normal((m, n)).astype(DTYPES[dt])
    saved = rng.standard_normal((m, n)).astype(DTYPES[dt])
    dz, db = poisoned((m, n), dt), poisoned((n,), "f32")
    run(f"cuda.epilogue_grad_{dt}_f32", [dy, saved], [dz, db], {"act": act, "out_dtype": "f32"})
    want_dz, want_db = reference.REFERENCE[ad.EpilogueGradOp](dy, saved, act=act, out_dtype="f32")
    assert want_db.dtype == np.float32 and want_dz.dtype == DTYPES[dt]
    if act == "relu":
        np.testing.assert_array_equal(dz.array.view(np.uint16), want_dz.view(np.uint16))
    else:
        assert within_one_rounding(dz.array, want_dz, dt)
    exact = reference.epilogue_grad(dy.astype(np.float64), saved.astype(np.float64), act=act)[1]
    assert norm_err(db.array, exact) <= F32_SUM
    assert norm_err(want_db, exact) <= F32_SUM


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("offset", [0, 1], ids=["packs", "misaligned"])
def test_low_precision_elementwise_kernels_compute_in_fp32_and_round_once(dt, offset) -> None:
    """109 elements: 13 packs of 8 and a tail of 5 where the buffers are 16-byte aligned;
    one element in (every pointer 2 bytes past a pack), the scalar loop alone. add and mul
    are bitwise the float32 result rounded once; gelu within one unit of the low dtype
    (the device's erff against NumPy's erf in float32)."""
    rng = np.random.default_rng(11 + offset)
    n = 109

    def low(values: np.ndarray) -> np.ndarray:
        base = np.concatenate([np.zeros(offset, np.float32), values]).astype(DTYPES[dt])
        return base[offset:]  # a view: its pointer moves with `offset`

    a, b = (
        low(rng.standard_normal(n).astype(np.float32)),
        low(rng.standard_normal(n).astype(np.float32)),
    )
    for op, want in [
        ("add", a.astype(np.float32) + b.astype(np.float32)),
        ("mul", a.astype(np.float32) * b.astype(np.float32)),
    ]:
        out = EmuArray(low(np.full(n, np.nan, np.float32)))
        assert (out.data.ptr % 16 == 0) == (offset == 0)
        run(f"cuda.{op}_{dt}", [a, b], [out], {})
        np.testing.assert_array_equal(
            out.array.view(np.uint16), want.astype(DTYPES[dt]).view(np.uint16), err_msg=op
        )
    out = EmuArray(low(np.full(n, np.nan, np.float32)))
    run(f"cuda.gelu_{dt}", [a], [out], {})
    x = a.astype(np.float64)
    want = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    unit = {"bf16": 2.0**-8, "f16": 2.0**-11}[dt]
    err = np.abs(out.array.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-3)
    assert err.max() <= unit, err.max()
