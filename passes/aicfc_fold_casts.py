"""aicfc-fold-casts: a widening cast of a product's or reduction's sum folds into the op.

    cast(matmul(A, B)) : bf16 -> f32           ->  matmul(A, B) : (bf16, bf16) -> f32
    cast(gemm_epilogue(A, B, b)) : bf16 -> f32 ->  gemm_epilogue(A, B, b32) -> f32
    cast(reduce_sum(x)) : bf16 -> f32          ->  reduce_sum(x) : bf16 -> f32
    cast(db of [gemm_]epilogue_grad(...))      ->  [gemm_]epilogue_grad(...) -> (dZ bf16, db f32)

Mixed precision (aicfc-autocast) computes products and reductions of bf16/f16 values
with fp32 accumulation, rounds the sum to the low dtype, and casts it back to f32 where
an fp32 consumer reads it: every weight and bias gradient of the backward (the cast's
VJP, for the f32 master) and the logits of the loss. This pass makes such an op write
its fp32 sum directly: one launch instead of two, half the bytes of the round trip,
and a more accurate value: the folded result is the f32 accumulation unrounded, while
the unfolded program rounded it to bf16 (8 bits of mantissa) before widening, so the
two differ by up to one bf16 rounding (2^-8 relative) and the folded one is the
closer to the exact sum.

Which results of which ops may be written wide is the op class's fact
(`OpInfo.wide_results`, dialects/wide_results.py); the verifiers accept exactly
f32 there over bf16/f16 operands. An op that adds a bias (IS_BIAS_ADD: gemm_epilogue)
adds it in its result's dtype, as cuBLASLt's epilogue adds a bias of D's type: the
folded op reads the f32 bias the low one was cast from (autocast's cast of the f32
master; unrounded), else an exact widening cast of it.

Not folded: a result with other users besides the cast (they need the rounded value);
a gemm_epilogue that also exports its pre-activation (Y and Z would both have to
widen; the saved Z of a gelu layer stays bf16 for its backward); casts to anything
but f32. The pass runs after the backward's fusion (passes/pipelines.py), once
the gradients' products and reductions and their casts exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import CastOp
from aicfc.dialects.wide_results import WIDE_FROM, wide_results


def _element(v: SSAValue) -> Attribute | None:
    return v.type.element_type if isinstance(v.type, TensorType) else None


def _bias_index(op: Operation) -> int | None:
    """The operand index of an IS_BIAS_ADD op's operand named `bias`, if present."""
    if not static_flags(op) & OpFlag.IS_BIAS_ADD:
        return None
    bias = getattr(op, "bias", None)
    return op.operands.index(bias) if isinstance(bias, SSAValue) else None


def _wide_bias(
    bias: SSAValue, wide: Attribute, before: Operation, rewriter: PatternRewriter
) -> SSAValue:
    """The bias in `wide`: the value a cast made it from when that is `wide`, else a new
    (exact) widening cast."""
    owner = bias.owner
    if isinstance(owner, CastOp) and _element(owner.input) == wide:
        return owner.input
    cast = CastOp(bias, wide)
    copy_location(before, cast)
    rewriter.insert(cast, InsertPoint.before(before))
    return cast.result


def foldable(cast: CastOp) -> tuple[Operation, int] | None:
    """(producer, result index) when `cast` widens a wide result that only it reads."""
    src = cast.input
    if not isinstance(src, OpResult) or not src.has_one_use():
        return None
    producer, index = src.op, src.index
    low = _element(src)
    if index not in wide_results(producer) or not isinstance(low, WIDE_FROM):
        return None
    if not isinstance(_element(cast.result), Float32Type):
        return None
    if not producer.operands or _element(producer.operands[0]) != low:
        return None  # already wide, or a result whose dtype is not the operands'
    if any(r.index != index and r.index in wide_results(producer) for r in producer.results):
        return None  # results that widen together (gemm_epilogue's Y and Z)
    return producer, index


class FoldWideningCast(RewritePattern):
    """cast(op(...)#i) : low -> f32  ->  op'(...)#i : f32, for i in op's wide_results."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CastOp, rewriter: PatternRewriter) -> None:
        found = foldable(op)
        if found is None:
            return
        producer, index = found
        wide = _element(op.result)
        assert wide is not None
        operands = list(producer.operands)
        b = _bias_index(producer)
        if b is not None:
            operands[b] = _wide_bias(operands[b], wide, producer, rewriter)
        fold_into(op, producer, index, operands, rewriter)


def fold_into(
    cast: CastOp,
    producer: Operation,
    index: int,
    operands: list[SSAValue],
    rewriter: PatternRewriter,
) -> None:
    """Replace `producer` by a copy with `operands` whose result #`index` has the type of
    `cast`'s result and stands for it (its uses, its name); erases both."""
    types = [r.type for r in producer.results]
    types[index] = cast.result.type
    new = type(producer).create(
        operands=operands,
        result_types=types,
        properties=dict(producer.properties),
        attributes=dict(producer.attributes),
    )
    copy_location(producer, new)
    rewriter.insert(new, InsertPoint.before(producer))
    for old, res in zip(producer.results, new.results, strict=True):
        res.name_hint = old.name_hint
    cast.result.replace_all_uses_with(new.results[index])
    if cast.result.name_hint:
        new.results[index].name_hint = cast.result.name_hint
    rewriter.erase(cast)
    for old, res in zip(producer.results, new.results, strict=True):
        old.replace_all_uses_with(res)
    rewriter.erase(producer)


@dataclass(frozen=True)
class AicfcFoldCastsPass(ModulePass):
    """Fold widening casts into the wide results of products and reductions (see the
    module docstring)."""

    name = "aicfc-fold-casts"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        PatternRewriteWalker(FoldWideningCast(), apply_recursively=False).rewrite_module(op)
