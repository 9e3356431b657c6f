"""aicfc-fold-narrowing-casts: a cast of a float32 result to bf16/f16 folds into the op.

    %s, %y, %m, %r = add_layer_norm(x, res, w, b) : f32;  %yl = cast %y : f32 -> bf16
      ->  %s, %yl, %m, %r = add_layer_norm(x, res, w, b) : (f32 ...) -> (f32, bf16, f32, f32)
    cast(layer_norm(x, w, b)#0) : f32 -> bf16  ->  layer_norm(x, w, b) -> (bf16, f32, f32)

Mixed precision (aicfc-autocast) runs layer norm in float32 (Policy.FP32, as torch's
autocast does): the residual stream and the statistics stay f32, and the normalised
output is cast to the low dtype for the product that follows. This pass makes the op
store that output in the low dtype itself: its float32 math is unchanged and each value
is rounded to nearest even as it is stored, which is exactly what graph.cast of the f32
value computed (one rounding at the same point), so the folded program is bit for bit
the unfolded one, in one launch instead of two and with the f32 round trip gone.

Which results of which ops may be stored narrow is the op class's fact
(`OpInfo.narrow_results`, dialects/wide_results.py); the verifiers accept exactly bf16/f16
there over float32 operands, and `kernel_params` names the dtype (out_dtype) so the
kernel that runs the op is one that rounds as it stores.

Safe for fp16 as for bf16: the folded op writes the same fp16 values the cast wrote, the
overflows to inf included, so the loss scaling of fp16 (aicfc-loss-scale) sees what it saw
(unlike aicfc-fold-casts, whose wide result hides an fp16 overflow). The pipeline runs
it for both (passes/pipelines.py), after the backward's fusion, once nothing reads the
f32 value but the cast.

Not folded: a result with other users besides the cast (they read the f32 value); a cast
to anything but bf16/f16, or of a result whose op's operands are not f32; ops whose
narrow results would be cast to two dtypes.
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

from aicfc.dialects.graph import CastOp
from aicfc.dialects.wide_results import NARROW_TO, narrow_results
from aicfc.passes.aicfc_fold_casts import fold_into


def _element(v: SSAValue) -> Attribute | None:
    return v.type.element_type if isinstance(v.type, TensorType) else None


def foldable(cast: CastOp) -> tuple[Operation, int] | None:
    """(producer, result index) when `cast` narrows an f32 narrow result that only it reads."""
    src = cast.input
    if not isinstance(src, OpResult) or not src.has_one_use():
        return None
    producer, index = src.op, src.index
    if index not in narrow_results(producer) or not isinstance(_element(src), Float32Type):
        return None
    low = _element(cast.result)
    if type(low) not in NARROW_TO:
        return None
    if not producer.operands or not isinstance(_element(producer.operands[0]), Float32Type):
        return None
    others = {
        _element(r)
        for r in producer.results
        if r.index != index and r.index in narrow_results(producer)
    }
    if others - {low, Float32Type()}:
        return None  # a narrow result already in another low dtype: one dtype per kernel
    return producer, index


class FoldNarrowingCast(RewritePattern):
    """cast(op(...)#i) : f32 -> bf16/f16  ->  op'(...)#i : bf16/f16, i in op's narrow_results."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CastOp, rewriter: PatternRewriter) -> None:
        found = foldable(op)
        if found is None:
            return
        producer, index = found
        fold_into(op, producer, index, list(producer.operands), rewriter)


@dataclass(frozen=True)
class AicfcFoldNarrowingCastsPass(ModulePass):
    """Fold narrowing casts into the narrow results of float32 ops (see the module
    docstring)."""

    name = "aicfc-fold-narrowing-casts"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        PatternRewriteWalker(FoldNarrowingCast(), apply_recursively=False).rewrite_module(op)
