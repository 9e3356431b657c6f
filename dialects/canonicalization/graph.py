"""Canonicalization patterns of graph ops: remove what does nothing.

Why every rewrite is exact: docs/design.md#value-preserving-rewrites.


Each pattern is rooted at one op class and says its rewrite in math form. They
run under xDSL's `canonicalize` (with its DCE), so an op made dead by a rewrite
disappears. Every rewrite keeps the value exactly (layout moves, identities);
constant folding is the pass aicfc-fold-constants. `patterns_for(cls)` is the
table the `GraphCanonicalization` trait reads.

Each pattern's `match(op)` is its whole match condition, apart from the
rewrite: `match_and_rewrite` rewrites exactly when it returns ops, and the
operator report (passes/analysis/) calls it to list what canonicalize would
change, so the two never disagree.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cache

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import (
    AddOp,
    BiasAddOp,
    BroadcastToOp,
    ConstantOp,
    GemmEpilogueOp,
    MulOp,
    ReshapeOp,
    ScaleOp,
    TransposeOp,
)
from aicfc.dialects.tensors import is_float, shape_of


class GraphRewrite(RewritePattern):
    """A canonicalization pattern whose match condition is a method of its own."""

    @abstractmethod
    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        """The ops this pattern rewrites when rooted at `op` (`op` last), or None."""


# --- layout ------------------------------------------------------------------


class TransposeOfTranspose(GraphRewrite):
    """transpose(transpose(x, p), q) -> x if p[q[i]] == i for all i, else transpose(x, r),
    r[i] = p[q[i]] (result dim i of the pair is input dim p[q[i]])."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        if isinstance(op, TransposeOp) and isinstance(inner := op.input.owner, TransposeOp):
            return (inner, op)
        return None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp, rewriter: PatternRewriter, /) -> None:
        if self.match(op) is None:
            return
        inner = op.input.owner
        assert isinstance(inner, TransposeOp)
        p, q = inner.permutation, op.permutation
        composed = [p[i] for i in q]
        if composed == list(range(len(composed))):
            rewriter.replace(op, [], [inner.input])
            return
        new = TransposeOp(inner.input, composed)
        copy_location(op, new)
        rewriter.replace(op, new)


class RemoveIdentity(GraphRewrite):
    """op(x) -> x for an op that returns its operand unchanged (AicfcOp.is_identity:
    reshape or broadcast_to to the same type, transpose by the identity permutation,
    scale by 1)."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        return (op,) if isinstance(op, AicfcOp) and op.is_identity() else None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if self.match(op) is not None:
            rewriter.replace(op, [], [op.operands[0]])


class ReshapeOfReshape(GraphRewrite):
    """reshape(reshape(x) : A -> B) : B -> C  ->  reshape(x) : A -> C (row-major order is kept)."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        if isinstance(op, ReshapeOp) and isinstance(inner := op.input.owner, ReshapeOp):
            return (inner, op)
        return None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter, /) -> None:
        if self.match(op) is None:
            return
        inner = op.input.owner
        assert isinstance(inner, ReshapeOp)
        if inner.input.type == op.result.type:
            rewriter.replace(op, [], [inner.input])
            return
        new = ReshapeOp(inner.input, shape_of(op.result.type))
        copy_location(op, new)
        rewriter.replace(op, new)


# --- elementwise -------------------------------------------------------------


def _broadcast_bias(v: SSAValue, out_shape: tuple[int, ...]) -> SSAValue | None:
    """b if v = broadcast_to(b : [C] -> [..., C]) with C the last dim of out_shape."""
    owner = v.owner
    if not isinstance(owner, Operation) or not static_flags(owner) & OpFlag.IS_BROADCAST:
        return None
    b = owner.operands[0]
    bs = shape_of(b.type)
    if len(bs) != 1 or len(out_shape) < 1 or bs[0] != out_shape[-1]:
        return None
    return b


class AddOfBroadcastToBiasAdd(GraphRewrite):
    """add(a, broadcast_to(b : [C] -> [..., C])) -> bias_add(a, b), and the same with the
    operands swapped (add is commutative). bias_add is what aicfc-fuse folds into a
    gemm_epilogue, and it never materialises the broadcast."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        """(broadcast_to, add), the rhs tried first as the broadcast bias."""
        if not isinstance(op, AddOp):
            return None
        t = op.result.type
        if not isinstance(t, TensorType) or not is_float(t.element_type):
            return None
        out_shape = tuple(t.get_shape())
        for other in (op.rhs, op.lhs):
            if _broadcast_bias(other, out_shape) is not None:
                assert isinstance(other.owner, Operation)
                return (other.owner, op)
        return None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AddOp, rewriter: PatternRewriter, /) -> None:
        matched = self.match(op)
        if matched is None:
            return
        broadcast = matched[0].results[0]
        x = op.lhs if broadcast is op.rhs else op.rhs
        new = BiasAddOp(x, matched[0].operands[0])
        copy_location(op, new)
        rewriter.replace(op, new)


def splat_value(v: SSAValue) -> float | None:
    """c if v is a float graph.constant whose every element is c, else None."""
    owner = v.owner
    if not isinstance(owner, ConstantOp):
        return None
    t = owner.result.type
    if not isinstance(t, TensorType) or not is_float(t.element_type):
        return None
    values = owner.value.get_values()
    if not values or any(x != values[0] for x in values):
        return None
    return float(values[0])


class MulBySplatToScale(GraphRewrite):
    """mul(x, splat c) -> scale(x, c), and the same with the operands swapped (mul is
    commutative): the product by a scalar needs no constant tensor. Exact: scale
    multiplies by c in x's dtype, the element the constant holds."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        """(constant, mul), the rhs tried first as the constant."""
        if not isinstance(op, MulOp):
            return None
        for other in (op.rhs, op.lhs):
            if splat_value(other) is not None:
                assert isinstance(other.owner, Operation)
                return (other.owner, op)
        return None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter, /) -> None:
        matched = self.match(op)
        if matched is None:
            return
        constant = matched[0].results[0]
        x = op.lhs if constant is op.rhs else op.rhs
        factor = splat_value(constant)
        assert factor is not None
        new = ScaleOp(x, factor)
        copy_location(op, new)
        rewriter.replace(op, new)


# --- fused ops ---------------------------------------------------------------


class DropUnusedPreAct(GraphRewrite):
    """gemm_epilogue(...) -> (y, z) with z unused  ->  gemm_epilogue(...) -> y.

    aicfc-fuse keeps Z (cuBLASLt's GELU_AUX) for the backward of GELU; an
    inference graph never reads it, and writing it costs M*N stores."""

    def match(self, op: Operation) -> tuple[Operation, ...] | None:
        if isinstance(op, GemmEpilogueOp) and op.pre_act is not None and not op.pre_act.uses:
            return (op,)
        return None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GemmEpilogueOp, rewriter: PatternRewriter, /) -> None:
        if self.match(op) is None:
            return
        new = GemmEpilogueOp(
            op.lhs,
            op.rhs,
            op.bias,
            op.activation,
            transpose_a=op.transpose_a is not None,
            transpose_b=op.transpose_b is not None,
        )
        new.attributes.update(op.attributes)
        copy_location(op, new)
        rewriter.replace(op, new, [new.result, None])


# --- the table ---------------------------------------------------------------

_BY_CLASS: dict[type[Operation], tuple[GraphRewrite, ...]] = {
    TransposeOp: (TransposeOfTranspose(), RemoveIdentity()),
    ReshapeOp: (ReshapeOfReshape(), RemoveIdentity()),
    BroadcastToOp: (RemoveIdentity(),),
    AddOp: (AddOfBroadcastToBiasAdd(),),
    MulOp: (MulBySplatToScale(),),
    ScaleOp: (RemoveIdentity(),),
    GemmEpilogueOp: (DropUnusedPreAct(),),
}
"""Op class -> its structural patterns (constant folding is the pass aicfc-fold-constants,
which needs the NumPy reference that a dialect may not import)."""


@cache
def patterns_for(op_class: type[Operation]) -> tuple[GraphRewrite, ...]:
    """The canonicalization patterns rooted at `op_class`."""
    return _BY_CLASS.get(op_class, ())
