"""Results written in float32 from bf16/f16 operands: fp32 accumulation stored unrounded.

A product or a reduction of bf16/f16 operands accumulates in float32 (cuBLASLt's
CUBLAS_COMPUTE_32F, kernels/reduce.cu). Where the program wants that sum in float32
(a weight gradient for the fp32 master, the logits of an fp32 loss), writing it
directly is one launch instead of two and is more accurate than rounding it to the
low dtype and widening it back. Which results of which ops may do so is a fact of the
op class, `OpInfo.wide_results`; these helpers are what the verifiers, the
aicfc-fold-casts pass and `kernel_params` read.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.flags import op_info

WIDE_FROM = (BFloat16Type, Float16Type)
"""Operand element types whose fp32 accumulation a wide result may keep."""

OUT_DTYPE_PARAM = "out_dtype"
"""The kernel parameter a widened op adds ("f32"): the dtype of its wide results."""


def wide_results(op: Operation | type[Operation]) -> tuple[int, ...]:
    """The result indices of `op` that may be float32 over bf16/f16 operands (OpInfo)."""
    info = op_info(op)
    return info.wide_results if info is not None else ()


def _element(t: Attribute) -> Attribute | None:
    return t.element_type if isinstance(t, TensorType) else None


def result_element(op: Operation, index: int, operand: Attribute) -> Attribute:
    """The element type result #`index` of `op` must have, given the operands' element
    type `operand`: `operand` itself, or float32 where the op lists the result as wide,
    the operands are bf16/f16 and the result is declared float32.

    Raises VerifyException naming the op, the result and both choices when a wide
    result has any other element type (a result that is not wide is left to the
    caller's usual check against `operand`)."""
    declared = _element(op.results[index].type)
    if declared is None or declared == operand or index not in wide_results(op):
        return operand
    if isinstance(operand, WIDE_FROM) and isinstance(declared, Float32Type):
        return declared
    raise VerifyException(
        f"{op.name}: result #{index} has element type {declared}; expected {operand} (the "
        "operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation "
        "written unrounded)"
    )


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


__all__ = ["OUT_DTYPE_PARAM", "WIDE_FROM", "is_widened", "result_element", "wide_results"]
