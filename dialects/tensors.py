"""Small helpers over builtin tensor types shared by the dialects.

Shapes are tuples of ints (static shapes only); dtypes are the builtin element
types f16, bf16, f32, f64 (float tensors) and i32, i64 (labels, counters).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

FLOAT_TYPES = (Float16Type, BFloat16Type, Float32Type, Float64Type)

_BYTES: dict[type[Attribute], int] = {
    Float16Type: 2,
    BFloat16Type: 2,
    Float32Type: 4,
    Float64Type: 8,
}


def is_float(element_type: Attribute) -> bool:
    return isinstance(element_type, FLOAT_TYPES)


def is_int(element_type: Attribute) -> bool:
    return isinstance(element_type, IntegerType) and element_type.width.data in (32, 64)


def itemsize(element_type: Attribute) -> int:
    """Bytes per element of a float or integer element type."""
    if isinstance(element_type, IntegerType):
        return int(element_type.width.data) // 8
    return _BYTES[type(element_type)]


def shape_of(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def tensor_bytes(t: Attribute) -> int:
    """Bytes of a static tensor type (0 for non-tensors)."""
    if not isinstance(t, TensorType):
        return 0
    return numel(t.get_shape()) * itemsize(t.element_type)


def fmt_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def tensor(shape: Sequence[int], element_type: Attribute = f32) -> TensorType[Attribute]:
    return TensorType(element_type, list(shape))


def ranked(op_name: str, what: str, value: SSAValue | Attribute) -> TensorType[Attribute]:
    """The static tensor type of `value`, or a VerifyException naming op and operand."""
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        raise VerifyException(f"{op_name}: {what} must be a statically shaped tensor, got {t}")
    return t


def require_float(op_name: str, what: str, t: TensorType[Attribute]) -> None:
    if not is_float(t.element_type):
        raise VerifyException(
            f"{op_name}: {what} must have a float element type (f16, bf16, f32, f64), "
            f"got {t.element_type}"
        )


def require_number(op_name: str, what: str, t: TensorType[Attribute]) -> None:
    """A float or i32/i64 element type (the dtypes every kernel family holds)."""
    if not (is_float(t.element_type) or is_int(t.element_type)):
        raise VerifyException(
            f"{op_name}: {what} must have a float or i32/i64 element type, got {t.element_type}"
        )


def require_nonempty(op_name: str, what: str, t: TensorType[Attribute]) -> None:
    """At least one element: a mean over no elements is undefined (0/0)."""
    if numel(t.get_shape()) == 0:
        raise VerifyException(
            f"{op_name}: {what} must have at least one element (a mean over none is "
            f"undefined), got {fmt_shape(t.get_shape())}"
        )


def require_same_dtype(op_name: str, pairs: Sequence[tuple[str, TensorType[Attribute]]]) -> None:
    first_name, first = pairs[0]
    for name, t in pairs[1:]:
        if t.element_type != first.element_type:
            raise VerifyException(
                f"{op_name}: {name} has element type {t.element_type} but {first_name} "
                f"has {first.element_type}; they must match"
            )


def require_result(op_name: str, declared: Attribute, expected: TensorType[Attribute]) -> None:
    """Compare a declared result type with the inferred one, naming both."""
    if declared != expected:
        raise VerifyException(f"{op_name}: result type is {declared}, expected {expected}")


def broadcast_shape(op_name: str, src: Sequence[int], dst: Sequence[int]) -> None:
    """Check NumPy broadcasting of `src` to `dst` (right-aligned; each dim equal or 1)."""
    if len(src) > len(dst):
        raise VerifyException(
            f"{op_name}: cannot broadcast rank {len(src)} {fmt_shape(src)} to lower rank "
            f"{len(dst)} {fmt_shape(dst)}"
        )
    offset = len(dst) - len(src)
    for i, d in enumerate(src):
        if d != 1 and d != dst[offset + i]:
            raise VerifyException(
                f"{op_name}: cannot broadcast {fmt_shape(src)} to {fmt_shape(dst)}: "
                f"dim {i} is {d}, target dim {offset + i} is {dst[offset + i]}"
            )


# --- shape inference shared by the verifiers and the ops' builders ---------


def matmul_shape(
    op_name: str,
    a: TensorType[Attribute],
    b: TensorType[Attribute],
    transpose_a: bool,
    transpose_b: bool,
) -> tuple[int, int, int]:
    """(M, N, K) of op(A) @ op(B) over the last two dims, or a VerifyException naming them.

    Both operands have rank >= 2; the transpose flags apply to their last two dims.
    """
    sa, sb = a.get_shape(), b.get_shape()
    if len(sa) < 2 or len(sb) < 2:
        raise VerifyException(
            f"{op_name}: operands must have rank >= 2 ([..., M, K] and [..., K, N]), got lhs "
            f"{fmt_shape(sa)} and rhs {fmt_shape(sb)}"
        )
    m, ka = (sa[-1], sa[-2]) if transpose_a else (sa[-2], sa[-1])
    kb, n = (sb[-1], sb[-2]) if transpose_b else (sb[-2], sb[-1])
    if ka != kb:
        raise VerifyException(
            f"{op_name}: contraction dimensions differ: lhs {fmt_shape(sa)}"
            f"{' (transposed)' if transpose_a else ''} has K={ka}, rhs {fmt_shape(sb)}"
            f"{' (transposed)' if transpose_b else ''} has K={kb}"
        )
    return m, n, ka


def batch_shape(op_name: str, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """The broadcast batch dims of two products' operands [..., M, K] and [..., K, N]
    (torch.matmul: right-aligned, each pair equal or one of them 1)."""
    ba, bb = tuple(a[:-2]), tuple(b[:-2])
    rank = max(len(ba), len(bb))
    pa, pb = (1,) * (rank - len(ba)) + ba, (1,) * (rank - len(bb)) + bb
    out = []
    for i, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if x != y and 1 not in (x, y):
            raise VerifyException(
                f"{op_name}: batch dims {fmt_shape(ba)} of lhs and {fmt_shape(bb)} of rhs do "
                f"not broadcast: dim {i} of the batch is {x} and {y}"
            )
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def axis_in_range(op_name: str, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise VerifyException(f"{op_name}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def reduce_shape(
    op_name: str, shape: Sequence[int], axes: Sequence[int], keepdims: bool
) -> list[int]:
    rank = len(shape)
    norm = [axis_in_range(op_name, a, rank) for a in axes]
    if len(set(norm)) != len(norm):
        raise VerifyException(f"{op_name}: axes {list(axes)} repeat a dimension")
    if keepdims:
        return [1 if i in norm else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in norm]


def verify_rng_offset(op_name: str, offset: SSAValue) -> None:
    t = ranked(op_name, "offset", offset)
    if tuple(t.get_shape()) != () or t.element_type != i64:
        raise VerifyException(f"{op_name}: offset must be a scalar tensor<i64>, got {t}")
