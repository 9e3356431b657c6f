"""Float literals in IR text that survive print -> parse -> print bit for bit.

MLIR (and xDSL's printer, which mirrors it) writes a float as a hexadecimal bit
pattern where a decimal form would not read back exactly: NaN (with its
payload), ±inf, and integer-valued floats too long for the default format
(16777216.0 in f32 is `0x4B800000`, 2^53 in f64 `0x4340000000000000`). MLIR's
parser reads such a literal as the bits of the float type it is parsed for.
xDSL 0.74 (and 0.75) does not: in a dense literal `dense<0x4B800000> :
tensor<f32>` it converts the integer 1266679808 to a float, and a float
property in custom syntax (`lr = 0x4170000000000000`) is refused. This module
holds the parser and printer hooks that `aicfc.ir` installs in its parser and
printer (no change to xDSL itself):

- `parse_dense_float`: a dense literal of a float type is built from bits:
  a hex element is the type's bit pattern (`0x7FC00001` stays that NaN), a
  decimal one is rounded to the type (round to nearest even) and one beyond
  the type's range is ±inf, as MLIR's APFloat does (`1.0e39` in f32, `1.0e17`
  in f16; xDSL raised OverflowError);
- `parse_float_bits`: a hex literal where a typeless float is expected (the
  f64 properties of aicfc's ops: lr, eps, p, ...) is the f64 bit pattern;
- `print_dense_float`: the printer writes dense float elements from their
  bytes, so a NaN payload (lost by Python's float conversions of f16 and
  signalling f32 NaNs) and -0.0 in a splat (xDSL compares values, and
  0.0 == -0.0) are kept; finite values use xDSL's (MLIR's) format.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from xdsl.dialects.builtin import (
    AnyFloat,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float64Type,
    RankedStructure,
)
from xdsl.ir import Attribute
from xdsl.printer import Printer
from xdsl.utils.mlir_lexer import MLIRTokenKind

if TYPE_CHECKING:
    from xdsl.parser import Parser

# xDSL's float types are a Union alias; these are the classes it names.
_FLOAT_TYPES = cast(tuple[type, ...], AnyFloat.__args__)


def is_float_type(t: object) -> bool:
    return isinstance(t, _FLOAT_TYPES)


def encode(value: float | int, t: AnyFloat) -> bytes:
    """The bytes (little-endian) of `value` rounded to `t`; ±inf beyond its range."""
    try:
        x = float(value)
    except OverflowError:  # an integer literal past f64's range
        x = math.inf if value > 0 else -math.inf
    try:
        return t.pack([x])
    except OverflowError:  # rounds past the largest finite value of `t`
        return t.pack([math.copysign(math.inf, x)])


def bits_to_bytes(bits: int, t: AnyFloat) -> bytes | None:
    """The bytes of bit pattern `bits` for `t`, or None when it does not fit its width."""
    if bits < 0 or bits.bit_length() > t.bitwidth:
        return None
    return bits.to_bytes(t.compile_time_size, "little")


def _is_hex(text: str) -> bool:
    return text[:2] in ("0x", "0X")


def parse_float_bits(parser: Parser) -> float | None:
    """A hex integer literal read as the bits of an f64 (the type of every typeless float
    property of aicfc's ops), or None when the next token is no hex literal."""
    token = parser._current_token
    if token.kind != MLIRTokenKind.INTEGER_LIT or not _is_hex(token.text):
        return None
    bits = int(token.text, 16)
    raw = bits_to_bytes(bits, Float64Type())
    if raw is None:
        parser.raise_error(f"hexadecimal float literal {token.text} does not fit in f64 (64 bits)")
    parser._consume_token(MLIRTokenKind.INTEGER_LIT)
    return Float64Type().unpack(raw, 1)[0]


def parse_dense_float(
    parser: Parser, type: RankedStructure[AnyFloat] | None
) -> DenseIntOrFPElementsAttr | None:
    """`dense<...> : T` of a float element type, built from bits (see module docstring).

    Called at the `<` of a dense attribute with its type when the caller knows it.
    Returns None, with the parser back at the `<`, for what xDSL reads right (an
    integer or complex element type, an empty literal, the `"0x..."` hex-string form).
    """
    start = parser.pos
    parser.parse_punctuation("<", " in dense attribute")
    if parser._current_token.kind in (MLIRTokenKind.GREATER, MLIRTokenKind.STRING_LIT):
        parser._resume_from(start)
        return None
    elements, shape = parser._parse_tensor_literal()
    parser.parse_punctuation(">", " in dense attribute")
    if type is None:
        parser.parse_punctuation(":", " in dense attribute")
        type = cast(RankedStructure[AnyFloat], parser._parse_dense_literal_type())
    element_type = type.get_element_type()
    if not is_float_type(element_type):
        parser._resume_from(start)
        return None
    t = element_type
    type_shape = list(type.get_shape())
    if shape and shape != type_shape:
        parser.raise_error(
            f"Shape mismatch in dense literal. Expected {type_shape} "
            f"shape from the type, but got {shape} shape."
        )
    if not shape and len(elements) != 1:
        parser.raise_error("Expected one element in a splat dense literal")
    raw = b"".join(_element_bytes(parser, e, t) for e in elements)
    if not shape:
        raw *= math.prod(type_shape)
    return DenseIntOrFPElementsAttr(type, BytesAttr(raw))


def _element_bytes(parser: Parser, e: object, t: AnyFloat) -> bytes:
    value = e.value  # type: ignore[attr-defined]  # AttrParser._TensorLiteralElement
    span = e.span  # type: ignore[attr-defined]
    if isinstance(value, tuple):
        parser.raise_error("No conversion from complex to float", span)
    text = span.text.lstrip("-").lstrip()
    if isinstance(value, int) and not isinstance(value, bool) and _is_hex(text):
        if value < 0:
            parser.raise_error("hexadecimal float literal should not have a leading minus", span)
        raw = bits_to_bytes(value, t)
        if raw is None:
            parser.raise_error(
                f"hexadecimal float literal {text} does not fit in {t.name} ({t.bitwidth} bits)",
                span,
            )
        return raw
    return encode(value, t)


def format_bits(raw: bytes) -> str:
    """A bit pattern as xDSL prints NaN and inf: `0x` and the big-endian hex digits."""
    return f"0x{raw[::-1].hex()}"


def representable(value: float, t: AnyFloat) -> float:
    """`value` as `t` can hold it: ±inf where it rounds past `t`'s range (a FloatAttr of f32
    holding 1e39, which xDSL's print_float would fail on with OverflowError)."""
    if math.isfinite(value):
        try:
            t.pack([value])
        except OverflowError:
            return math.copysign(math.inf, value)
    return value


def print_dense_float(printer: Printer, attr: DenseIntOrFPElementsAttr) -> None:
    """Print `dense<...> : T` of a float element type from its bytes (see module docstring)."""
    t = cast(AnyFloat, attr.get_element_type())
    size = t.compile_time_size
    raw = attr.data.data
    items = [raw[i : i + size] for i in range(0, len(raw), size)]

    def element(b: bytes) -> None:
        value = t.unpack(b, 1)[0]
        if math.isnan(value) or math.isinf(value):
            printer.print_string(format_bits(b))
        else:  # finite values decode exactly; xDSL's format reads back exactly
            printer.print_float(value, t)

    def nested(chunk: list[bytes], shape: list[int]) -> None:
        printer.print_string("[")
        if len(shape) > 1:
            k = len(chunk) // shape[0] if shape[0] else 0
            rows = [chunk[i : i + k] for i in range(0, len(chunk), k)] if k else []
            printer.print_list(rows, lambda row: nested(row, shape[1:]))
        else:
            printer.print_list(chunk, element)
        printer.print_string("]")

    printer.print_string("dense<")
    if not items:
        pass
    elif all(b == items[0] for b in items):
        element(items[0])
    elif len(items) > 100:  # xDSL's (and MLIR's) form for large constants: exact bytes
        printer.print_string(f'"0x{raw.hex().upper()}"')
    else:
        nested(items, list(attr.get_shape()))
    printer.print_string("> : ")
    printer.print_attribute(attr.type)


class ExactFloatPrinter(Printer):
    """xDSL's Printer with dense float elements printed from their bytes and floats that
    overflow their type printed as ±inf (see the module docstring)."""

    def print_attribute(self, attribute: Attribute) -> None:
        if isinstance(attribute, DenseIntOrFPElementsAttr) and is_float_type(
            attribute.get_element_type()
        ):
            print_dense_float(self, attribute)
            return
        super().print_attribute(attribute)

    def print_float(self, value: float, type: AnyFloat) -> None:
        super().print_float(representable(value, type), type)
