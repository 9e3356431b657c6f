"""Results stored in another dtype than the operands': wide (float32 over bf16/f16) and
narrow (bf16/f16 over float32).

A product or a reduction of bf16/f16 operands accumulates in float32 (cuBLASLt's
CUBLAS_COMPUTE_32F, kernels/reduce.cu). Where the program wants that sum in float32
(a weight gradient for the fp32 master, the logits of an fp32 loss), writing it
directly is one launch instead of two and is more accurate than rounding it to the
low dtype and widening it back. Which results of which ops may do so is a fact of the
op class, `OpInfo.wide_results`; these helpers are what the verifiers, the
aicfc-fold-casts pass and `kernel_params` read.

The other way round, an op that computes in float32 (a layer norm: float32 statistics
and math) may store a result in bf16/f16 directly, rounding each value to nearest even
as graph.cast would: `OpInfo.narrow_results`. The folded op computes bit for bit what
the cast of its float32 result computed (one rounding, at the same point), in one
launch and without the float32 round trip: 2 bytes written per value where the op and
the cast moved 10 (aicfc-fold-narrowing-casts).
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.flags import op_info

WIDE_FROM = (BFloat16Type, Float16Type)
"""Operand element types whose fp32 accumulation a wide result may keep."""

NARROW_TO: dict[type[Attribute], str] = {BFloat16Type: "bf16", Float16Type: "f16"}
"""Element types a narrow result may have over float32 operands, and their dtype names."""

OUT_DTYPE_PARAM = "out_dtype"
"""The kernel parameter a widened or narrowed op adds: the dtype of its wide results
("f32") or of its narrow ones ("bf16", "f16")."""


def wide_results(op: Operation | type[Operation]) -> tuple[int, ...]:
    """The result indices of `op` that may be float32 over bf16/f16 operands (OpInfo)."""
    info = op_info(op)
    return info.wide_results if info is not None else ()


def narrow_results(op: Operation | type[Operation]) -> tuple[int, ...]:
    """The result indices of `op` that may be bf16/f16 over float32 operands (OpInfo)."""
    info = op_info(op)
    return info.narrow_results if info is not None else ()


def _element(t: Attribute) -> Attribute | None:
    return t.element_type if isinstance(t, TensorType) else None


def result_element(op: Operation, index: int, operand: Attribute) -> Attribute:
    """The element type result #`index` of `op` must have, given the operands' element
    type `operand`: `operand` itself, or float32 where the op lists the result as wide,
    the operands are bf16/f16 and the result is declared float32, or bf16/f16 where it
    lists the result as narrow, the operands are float32 and the result is declared so.

    Raises VerifyException naming the op, the result and both choices when a wide or
    narrow result has any other element type (any other result is left to the caller's
    usual check against `operand`)."""
    declared = _element(op.results[index].type)
    if declared is None or declared == operand:
        return operand
    if index in narrow_results(op):
        return _narrow_element(op, index, operand, declared)
    if index not in wide_results(op):
        return operand
    if isinstance(operand, WIDE_FROM) and isinstance(declared, Float32Type):
        return declared
    raise VerifyException(
        f"{op.name}: result #{index} has element type {declared}; expected {operand} (the "
        "operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation "
        "written unrounded)"
    )


def _narrow_element(
    op: Operation, index: int, operand: Attribute, declared: Attribute
) -> Attribute:
    if isinstance(operand, Float32Type) and type(declared) in NARROW_TO:
        return declared
    raise VerifyException(
        f"{op.name}: result #{index} has element type {declared}; expected {operand} (the "
        "operands' dtype), or bf16/f16 when the operands are f32 (the float32 result "
        "rounded to nearest even as it is stored)"
    )


def narrowed_to(op: Operation) -> str | None:
    """The dtype name ("bf16", "f16") of `op`'s narrow results when they have one over
    float32 operand #0 (all of them alike: one kernel writes them), else None."""
    if not op.operands or not isinstance(_element(op.operands[0].type), Float32Type):
        return None
    names: set[str] = set()
    for i in narrow_results(op):
        e = _element(op.results[i].type) if i < len(op.results) else None
        if e is not None and type(e) in NARROW_TO:
            names.add(NARROW_TO[type(e)])
    return next(iter(names)) if len(names) == 1 else None


def out_dtype(op: Operation) -> str | None:
    """The `out_dtype` kernel parameter of `op`: "f32" when it is widened, "bf16"/"f16"
    when it is narrowed, None when its results have its operands' dtype."""
    return "f32" if is_widened(op) else narrowed_to(op)


def is_widened(op: Operation) -> bool:
    """True when a wide result of `op` is float32 over bf16/f16 operand #0."""
    if not op.operands:
        return False
    low = _element(op.operands[0].type)
    return isinstance(low, WIDE_FROM) and any(
        isinstance(_element(op.results[i].type), Float32Type)
        for i in wide_results(op)
        if i < len(op.results)
    )


__all__ = [
    "NARROW_TO",
    "OUT_DTYPE_PARAM",
    "WIDE_FROM",
    "is_widened",
    "narrow_results",
    "narrowed_to",
    "out_dtype",
    "result_element",
    "wide_results",
]
