"""Scalar kernel parameters: Python values <-> attributes.

An op's properties become the scalar parameters of the kernel that runs it
(`exec.launch ... params {...}`), and the same Python dict reaches the NumPy
reference implementation. One encoding serves both: bool, int (i64), float
(f64), str, tuples of ints (array<i64>) and tuples of floats (array<f64>).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException

ParamValue = int | float | bool | str | tuple[int, ...] | tuple[float, ...]

# Properties that describe IR structure rather than a kernel parameter.
_STRUCTURAL = frozenset({"operandSegmentSizes", "resultSegmentSizes", "value"})


def to_python(key: str, a: Attribute) -> ParamValue:
    """One attribute as a Python scalar (see module docstring)."""
    if isinstance(a, UnitAttr):
        return True
    if isinstance(a, IntegerAttr):
        t = cast(IntegerType, a.type)
        return bool(a.value.data) if t.width.data == 1 else int(a.value.data)
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, EnumAttribute):
        return str(a.data.value)
    if isinstance(a, DenseArrayBase):
        if isinstance(a.elt_type, Float64Type):
            return tuple(float(x) for x in a.get_values())
        return tuple(int(x) for x in a.get_values())
    raise VerifyException(f"kernel parameter {key!r}: unsupported attribute {a}")


def to_attr(key: str, v: ParamValue) -> Attribute:
    if isinstance(v, bool):
        return BoolAttr.from_bool(v)
    if isinstance(v, int):
        return IntegerAttr(v, i64)
    if isinstance(v, float):
        return FloatAttr(v, Float64Type())
    if isinstance(v, str):
        return StringAttr(v)
    if isinstance(v, tuple | list):
        if any(isinstance(x, float) for x in v):
            return DenseArrayBase.from_list(Float64Type(), [float(x) for x in v])
        return DenseArrayBase.from_list(i64, [int(x) for x in v])
    raise TypeError(f"kernel parameter {key!r}: unsupported value {v!r}")


def params_to_attr(params: Mapping[str, ParamValue]) -> DictionaryAttr:
    return DictionaryAttr({k: to_attr(k, v) for k, v in params.items()})


def attr_to_params(attr: DictionaryAttr | None) -> dict[str, ParamValue]:
    if attr is None:
        return {}
    return {k: to_python(k, a) for k, a in attr.data.items()}


def properties_to_params(op: Operation) -> dict[str, ParamValue]:
    """An op's scalar properties as kernel parameters (absent optional ones omitted)."""
    return {k: to_python(k, a) for k, a in op.properties.items() if k not in _STRUCTURAL}
