"""bf16 in the NumPy reference: graph.cast rounds to nearest even (fp16's subnormals too),
low-precision ops compute in float32 inside and round once, and a cast's VJP casts the
gradient back.

Expected values come from bit arithmetic on float32 words (round to nearest even, written
out here) and from float32 NumPy, never from the code under test.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects import graph as g
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, numpy_dtype, run_func
from aicfc.runtime.reference import REFERENCE, cast

BF16 = np.dtype(ml_dtypes.bfloat16)


def rne_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 bits of float32 `x`, rounded to nearest even by integer arithmetic
    (finite inputs): add 0x7FFF plus the kept LSB, drop the low 16 bits."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    return ((u + 0x7FFF + lsb) >> 16).astype(np.uint16)


def test_bf16_is_the_element_type_of_bf16_tensors() -> None:
    module = parse_module("func.func @f(%x: tensor<2xbf16>) { func.return }")
    arg = find_func(module).body.blocks.first.args[0]  # type: ignore[union-attr]
    assert numpy_dtype(arg.type.element_type) == BF16  # type: ignore[attr-defined]


def test_cast_to_bf16_rounds_to_nearest_even() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(np.float32) * 100
    # exact ties: 1 + 2^-8 lies halfway between bf16 1.0 and 1.0078125 (even: 1.0);
    # 1 + 3 * 2^-8 between 1.0078125 and 1.015625 (even: 1.015625)
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)], np.float32)
    x = np.concatenate([x, ties])
    (y,) = cast(x, dtype="bf16")
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.view(np.uint16), rne_bf16_bits(x))
    np.testing.assert_array_equal(y[-3:].astype(np.float32), [1.0, 1.015625, -1.0])


# fp16 subnormals (exponent field 0: value = bits * 2^-24), with their expected fp16 words
# written out from that formula: the smallest 2^-24 (0x0001); 2^-25, halfway between 0 and
# 2^-24, rounds to the even 0 (and -2^-25 to -0, 0x8000); 3 * 2^-25 = 1.5 * 2^-24, halfway
# between 1 and 2 units, to the even 2 units (0x0002); just above the tie 2^-25 rounds up;
# the largest subnormal 1023 * 2^-24 (0x03FF) and the smallest normal 2^-14 (0x0400)
F16_SUBNORMALS = [
    (2.0**-24, 0x0001),
    (2.0**-25, 0x0000),
    (3 * 2.0**-25, 0x0002),
    (-(2.0**-25), 0x8000),
    (2.0**-25 * (1 + 2**-23), 0x0001),
    (1023 * 2.0**-24, 0x03FF),
    (-1023 * 2.0**-24, 0x83FF),
    (2.0**-14, 0x0400),
]


def test_cast_to_f16_rounds_subnormals_to_nearest_even() -> None:
    x = np.array([v for v, _ in F16_SUBNORMALS], np.float32)
    assert [float(v) for v in x] == [v for v, _ in F16_SUBNORMALS]  # exact in float32
    (h,) = cast(x, dtype="f16")
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.view(np.uint16), [bits for _, bits in F16_SUBNORMALS])
    # widening back is exact: (bits & 0x7FFF) * 2^-24 with the sign (every word here has
    # exponent field 0, or 1 with a zero significand, where the same formula holds)
    (back,) = cast(h, dtype="f32")
    bits = np.array([b for _, b in F16_SUBNORMALS], np.int64)
    want = np.where(bits & 0x8000, -1.0, 1.0) * (bits & 0x7FFF) * 2.0**-24
    np.testing.assert_array_equal(back, want.astype(np.float32))
    assert np.signbit(back[3]) and back[3] == 0.0


def test_cast_widening_is_exact_and_f16_overflows_to_inf() -> None:
    rng = np.random.default_rng(1)
    lo = rng.standard_normal(256).astype(BF16)
    (wide,) = cast(lo, dtype="f32")
    assert wide.dtype == np.float32
    np.testing.assert_array_equal(wide.astype(BF16).view(np.uint16), lo.view(np.uint16))
    (h,) = cast(np.array([70000.0, 65504.0], np.float32), dtype="f16")
    assert np.isinf(h[0]) and h[1] == 65504.0


def test_bf16_ops_compute_in_float32_and_round_once() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 64)).astype(BF16)
    b = rng.standard_normal((64, 8)).astype(BF16)
    bias = rng.standard_normal(8).astype(BF16)
    (y, z) = REFERENCE[g.GemmEpilogueOp](a, b, bias, act="gelu")
    assert y.dtype == BF16 and z.dtype == BF16
    z32 = a.astype(np.float32) @ b.astype(np.float32) + bias.astype(np.float32)
    np.testing.assert_array_equal(z.view(np.uint16), rne_bf16_bits(z32))
    # bf16 has an 8-bit significand: one rounding is at most 2^-8 relative (unit roundoff)
    err = np.abs(z.astype(np.float32) - z32) / np.maximum(np.abs(z32), 1e-30)
    assert err.max() <= 2.0**-8
    (s,) = REFERENCE[g.AddOp](a, a)
    np.testing.assert_array_equal(s.view(np.uint16), rne_bf16_bits(a.astype(np.float32) * 2))


def test_f32_ops_are_unchanged_by_the_wrapper() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    (y,) = REFERENCE[g.MatmulOp](a, a)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, a @ a)


CAST_STEP = """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> (tensor<f32>, tensor<8x3xf32>) {
  %xl = graph.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %wl = graph.cast %w : tensor<8x3xf32> to tensor<8x3xbf16>
  %y = graph.matmul %xl, %wl : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  %y32 = graph.cast %y : tensor<4x3xbf16> to tensor<4x3xf32>
  %l = graph.reduce_sum %y32 axes = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  %dw = autodiff.backward %l wrt %w : tensor<f32>, (tensor<8x3xf32>) -> (tensor<8x3xf32>)
  func.return %l, %dw : tensor<f32>, tensor<8x3xf32>
}
"""


def test_cast_vjp_casts_the_gradient_back_to_f32() -> None:
    from aicfc.execute import run_pipeline

    module = run_pipeline(parse_module(CAST_STEP), "aicfc-expand-backward")
    fn = find_func(module)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    loss, dw = run_func(fn, [x, w])
    assert dw.dtype == np.float32
    # d sum(X W) / dW = X^T 1, computed in bf16 storage: X rounded, ones exact
    xl = x.astype(BF16).astype(np.float32)
    expected = (xl.T @ np.ones((4, 3), np.float32)).astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(dw, expected)
    exact = float(np.sum(x.astype(np.float64) @ w.astype(np.float64)))
    # x, w and each product rounded once to bf16 (unit roundoff 2^-8): a first-order bound
    scale = float(np.sum(np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64))))
    assert abs(float(loss) - exact) <= 3 * 2.0**-8 * scale


if __name__ == "__main__":
    pytest.main([__file__])
