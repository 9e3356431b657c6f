"""Every float in IR text survives print -> parse -> print bit for bit (aicfc/float_literals.py).

Dense constants of f16, bf16, f32 and f64 (every bit pattern: NaN payloads,
signalling NaNs, ±inf, -0.0, subnormals, the integers 2^23..2^24 that print in
hex), in custom and generic syntax, as a splat, a list and the >100-element
hex string; and the f64 float properties of aicfc's ops (lr, p, ...), whose
custom syntax prints a typeless hex form for large integer values.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aicfc.dialects.graph import ConstantOp
from aicfc.ir import IRError, parse_module, print_module

WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f16_bits(x: float) -> int:
    return int(np.array(x, np.float16).view(np.uint16))


SPECIAL = {
    "f16": [0x7E00, 0x7E01, 0x7D55, 0xFC00, 0x7C00, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x7C01],
    "bf16": [0x7FC0, 0x7FC1, 0x7F81, 0xFF80, 0x7F80, 0x8000, 0x0001, 0x007F, 0x7F7F],
    "f32": [
        *(0x7FC00000, 0x7FC00001, 0x7F800001, 0xFFFFFFFF, 0x7F800000, 0xFF800000, 0x80000000),
        *(0x00000001, 0x007FFFFF, f32_bits(16777216.0), f32_bits(8388608.0)),
        *(
            f32_bits(-16777215.0),
            *(f32_bits(float(2**23 + k)) for k in (1, 12345, 2**22, 2**23 - 1)),
        ),
    ],
    "f64": [
        *(0x7FF8000000000000, 0x7FF0000000000001, 0x7FF8DEADBEEF0001, 0xFFF0000000000000),
        *(0x8000000000000000, 0x0000000000000001, f64_bits(2.0**53), f64_bits(2.0**60 + 2**8)),
        *(f64_bits(16777216.0), f64_bits(1e-3), f64_bits(1e308)),
    ],
}


def constant_text(dtype: str, bits: list[int], shape: tuple[int, ...]) -> str:
    """A module with one graph.constant of `bits` (row-major) in the exact hex-string form."""
    width = WIDTH[dtype] // 8
    raw = b"".join(b.to_bytes(width, "little") for b in bits)
    tensor = f"tensor<{''.join(f'{d}x' for d in shape)}{dtype}>"
    return (
        f"func.func @f() -> {tensor} {{\n"
        f'  %c = graph.constant dense<"0x{raw.hex().upper()}"> : {tensor}\n'
        f"  func.return %c : {tensor}\n}}\n"
    )


def constant_bytes(module) -> bytes:
    (op,) = [o for o in module.walk() if isinstance(o, ConstantOp)]
    return op.value.data.data


def assert_round_trips(text: str, generic: bool) -> str:
    """print(parse(text)) reads back to the same bytes and the same text; returns that text."""
    original = parse_module(text)
    first = print_module(original, generic=generic)
    again = parse_module(first)
    assert constant_bytes(again) == constant_bytes(original), first
    assert print_module(again, generic=generic) == first
    return first


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("dtype", list(WIDTH))
def test_special_values_round_trip_as_list_splat_and_hex_string(dtype, generic):
    bits = SPECIAL[dtype]
    assert_round_trips(constant_text(dtype, bits, (len(bits),)), generic)
    for b in bits:
        assert_round_trips(constant_text(dtype, [b, b], (2,)), generic)  # splat
    many = (bits * 200)[:150]  # more than 100 elements: xDSL's hex-string form
    assert_round_trips(constant_text(dtype, many, (10, 15)), generic)


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("dtype", list(WIDTH))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_bit_patterns_round_trip(dtype, generic, data):
    bits = data.draw(st.lists(st.integers(0, 2 ** WIDTH[dtype] - 1), min_size=1, max_size=6))
    assert_round_trips(constant_text(dtype, bits, (len(bits),)), generic)
    assert_round_trips(constant_text(dtype, [bits[0]] * 3, (3,)), generic)


def test_a_splat_of_minus_zero_keeps_its_sign():
    """0.0 == -0.0, so a value-based splat test printed [-0.0, 0.0] as one 0.0."""
    text = constant_text("f32", [0x80000000, 0x00000000], (2,))
    printed = assert_round_trips(text, generic=False)
    assert "dense<[-0.000000e+00, 0.000000e+00]>" in printed


@pytest.mark.parametrize(
    ("literal", "dtype", "bits"),
    [
        ("16777216.0", "f32", 0x4B800000),
        ("0x4B800000", "f32", 0x4B800000),  # what xDSL and MLIR print for it
        ("0x7FC00000", "f32", 0x7FC00000),  # upstream mlir-opt's NaN
        ("0x7fc00001", "f32", 0x7FC00001),
        ("0x7E01", "f16", 0x7E01),
        ("0x7FC1", "bf16", 0x7FC1),
        ("0x4340000000000000", "f64", 0x4340000000000000),
        ("1.0e39", "f32", 0x7F800000),  # out of range: +inf, as MLIR's APFloat
        ("-1.0e39", "f32", 0xFF800000),
        ("1.0e17", "f16", 0x7C00),
        ("65520.0", "f16", 0x7C00),  # the midpoint to the next binade rounds (to even) to inf
        ("65504.0", "f16", 0x7BFF),  # the largest finite f16 stays finite
        ("3.4028235e38", "f32", 0x7F7FFFFF),
        ("1.0e400", "f64", 0x7FF0000000000000),
        (str(10**400), "f64", 0x7FF0000000000000),  # an integer literal past f64
        ("16777217", "f32", 0x4B800000),  # an integer literal rounds to nearest even
    ],
)
def test_a_literal_reads_as_mlir_reads_it(literal, dtype, bits):
    """Hex literals are bit patterns of the element type; decimal ones round to it."""
    tensor = f"tensor<{dtype}>"
    module = parse_module(
        f"func.func @f() -> {tensor} {{\n  %c = graph.constant dense<{literal}> : {tensor}\n"
        f"  func.return %c : {tensor}\n}}\n"
    )
    assert constant_bytes(module) == bits.to_bytes(WIDTH[dtype] // 8, "little")
    assert print_module(parse_module(print_module(module))) == print_module(module)


def test_a_list_with_an_out_of_range_element_is_inf_not_an_internal_error():
    module = parse_module(
        "func.func @f() -> tensor<2xf32> {\n"
        "  %c = graph.constant dense<[1.0e39, 1.5]> : tensor<2xf32>\n"
        "  func.return %c : tensor<2xf32>\n}\n"
    )
    values = np.frombuffer(constant_bytes(module), np.float32)
    assert math.isinf(values[0]) and values[0] > 0 and values[1] == 1.5


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("0x1FFFF", "hexadecimal float literal 0x1FFFF does not fit in f16 (16 bits)"),
        ("-0x7C00", "hexadecimal float literal should not have a leading minus"),
    ],
)
def test_a_bad_hex_literal_is_a_located_error(literal, message):
    text = (
        "func.func @f() -> tensor<f16> {\n"
        f"  %c = graph.constant dense<{literal}> : tensor<f16>\n"
        "  func.return %c : tensor<f16>\n}\n"
    )
    with pytest.raises(IRError) as info:
        parse_module(text, "c.mlir")
    assert re.fullmatch(rf"c\.mlir:2:\d+: error: {re.escape(message)}", str(info.value))


def clip_text(bits: int) -> str:
    """An f64 property in IR text (clip_grad_norm's max_norm; the optimizers' lr was one,
    and is an operand now)."""
    return (
        "func.func @f(%g: tensor<4xf32>) -> tensor<f32> {\n"
        f'  %n, %c = "autodiff.clip_grad_norm"(%g) <{{max_norm = 0x{bits:016X} : f64}}> : '
        "(tensor<4xf32>) -> (tensor<f32>, tensor<f32>)\n"
        "  func.return %c : tensor<f32>\n}\n"
    )


def max_norm_of(module) -> float:
    (op,) = [o for o in module.walk() if o.name == "autodiff.clip_grad_norm"]
    return op.max_norm.value.data


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@settings(max_examples=40, deadline=None)
@given(x=st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False))
@example(x=16777216.0)
@example(x=2.0**53)
@example(x=2.0**60)
@example(x=5e-324)
@example(x=1e-8)
def test_float_properties_round_trip(generic, x):
    """An f64 property of 16777216.0 printed `0x4170000000000000` in custom syntax, which the
    parser refused ('Expected float literal'; it was the optimizers' lr = 16777216.0)."""
    module = parse_module(clip_text(f64_bits(x)))
    first = print_module(module, generic=generic)
    again = parse_module(first)
    assert f64_bits(max_norm_of(again)) == f64_bits(x), first
    assert print_module(again, generic=generic) == first


def test_two_to_the_24_prints_and_reads_in_custom_syntax():
    printed = print_module(parse_module(clip_text(f64_bits(16777216.0))))
    assert "max_norm = 0x4170000000000000 :" in printed
    assert max_norm_of(parse_module(printed)) == 16777216.0
