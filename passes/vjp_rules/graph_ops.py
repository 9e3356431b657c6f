"""VJP rules of the graph ops of the MLP family: products, elementwise ops, activations,
dropout, layouts, reductions and losses (the math: the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.activation_table import Saved
from aicfc.dialects.graph import ACTIVATION_OF, ACTIVATIONS, Activation, ActivationOp
from aicfc.dialects.tensors import shape_of
from aicfc.passes.vjp_rules.building import (
    Grad,
    VjpContext,
    VjpRule,
    add,
    broadcast,
    matmul_grads,
    reduce,
    reshape,
    scale,
    sum_to,
)


def _matmul(ctx: VjpContext, op: g.MatmulOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dc,) = grads
    assert dc is not None
    return matmul_grads(
        ctx, dc, op.lhs, op.rhs, bool(op.transpose_a), bool(op.transpose_b), *ctx.wanted
    )


def _gemm_epilogue(ctx: VjpContext, op: g.GemmEpilogueOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # Y = act(Z), Z = op(A) op(B) + bias: dZ = dY * act'(.) + d pre_act.
    dy = grads[0]
    d_pre = grads[1] if len(grads) > 1 else None
    act = op.activation
    dz: Grad = None
    if dy is not None:
        if act == Activation.NONE:
            dz = dy
        else:
            row = ACTIVATIONS[act]
            saved: SSAValue | None = op.result if row.facts.saves == Saved.OUTPUT else op.pre_act
            if saved is None:  # recompute Z with the same GEMM and bias, no activation
                saved = ctx.value(
                    g.GemmEpilogueOp(
                        op.lhs,
                        op.rhs,
                        op.bias,
                        Activation.NONE,
                        bool(op.transpose_a),
                        bool(op.transpose_b),
                    )
                )
            dz = ctx.value(row.grad(dy, saved))  # relu'(z) = (y > 0); gelu'(z) reads Z
    dz = add(ctx, dz, d_pre)
    assert dz is not None
    want_a, want_b = ctx.wanted[0], ctx.wanted[1]
    da, db = matmul_grads(
        ctx, dz, op.lhs, op.rhs, bool(op.transpose_a), bool(op.transpose_b), want_a, want_b
    )
    if op.bias is None:
        return da, db
    # sum_rows(dZ) over every leading axis, never a transpose
    rank = len(shape_of(dz.type))
    dbias = reduce(ctx, dz, range(rank - 1)) if ctx.wanted[2] else None
    return da, db, dbias


def _bias_add(ctx: VjpContext, op: g.BiasAddOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    rank = len(shape_of(op.input.type))
    return dy, reduce(ctx, dy, range(rank - 1)) if ctx.wanted[1] else None


def _add(ctx: VjpContext, op: g.AddOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dz,) = grads
    return dz, dz


def _sub(ctx: VjpContext, op: g.SubOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dz,) = grads
    assert dz is not None
    return dz, scale(ctx, dz, -1.0) if ctx.wanted[1] else None


def _mul(ctx: VjpContext, op: g.MulOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dz,) = grads
    assert dz is not None
    da = ctx.value(g.MulOp(dz, op.rhs)) if ctx.wanted[0] else None
    db = ctx.value(g.MulOp(dz, op.lhs)) if ctx.wanted[1] else None
    return da, db


def _activation(ctx: VjpContext, op: ActivationOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = act_grad(dy, saved): saved is the input or the output, as the row says.
    (dy,) = grads
    assert dy is not None
    row = ACTIVATION_OF[type(op)]
    return (ctx.value(row.grad(dy, row.saved_value(op))),)


def _dropout(ctx: VjpContext, op: g.DropoutOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    p, seed = op.p.value.data, op.seed.value.data
    return ctx.value(ad.DropoutGradOp(dy, op.offset, p, seed)), None


def _reshape(ctx: VjpContext, op: g.ReshapeOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    return (reshape(ctx, dy, shape_of(op.input.type)),)


def _transpose(ctx: VjpContext, op: g.TransposeOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    perm = op.permutation
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    if inverse == list(range(len(perm))):
        return (dy,)
    return (ctx.value(g.TransposeOp(dy, inverse)),)


def _broadcast_to(ctx: VjpContext, op: g.BroadcastToOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # Sum over the new leading axes and the size-1 axes that were stretched.
    (dy,) = grads
    assert dy is not None
    return (sum_to(ctx, dy, shape_of(op.input.type)),)


def _reduce_sum(ctx: VjpContext, op: g.ReduceSumOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # Each input element contributes once to its output element: broadcast back.
    (dy,) = grads
    assert dy is not None
    src = shape_of(op.input.type)
    axes = sorted(a % len(src) for a in op.axes_list)
    if not op.keepdims and axes != list(range(len(axes))):
        # a reduced axis that is not leading: restore it as size 1 (right-aligned broadcast)
        dy = reshape(ctx, dy, [1 if i in axes else d for i, d in enumerate(src)])
    return (broadcast(ctx, dy, src),)


def _cast(ctx: VjpContext, op: g.CastOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = cast(dy) back to x's element type (the gradient flows in the forward's dtypes)
    (dy,) = grads
    assert dy is not None
    x = op.input.type
    assert isinstance(x, TensorType)
    return (ctx.value(g.CastOp(dy, x.element_type)),)


def _softmax(ctx: VjpContext, op: g.SoftmaxOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    return (ctx.value(ad.SoftmaxGradOp(dy, op.result, op.axis.value.data)),)


def _cross_entropy(ctx: VjpContext, op: g.CrossEntropyOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dl,) = grads
    assert dl is not None
    return ctx.value(ad.CrossEntropyGradOp(op.logits, op.labels, dl)), None


def _mse_loss(ctx: VjpContext, op: g.MseLossOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dl,) = grads
    assert dl is not None
    dp = ctx.value(ad.MseLossGradOp(op.pred, op.target, dl))
    return (dp if ctx.wanted[0] else None), (scale(ctx, dp, -1.0) if ctx.wanted[1] else None)


GRAPH_RULES: dict[type[Operation], VjpRule] = {
    g.MatmulOp: _matmul,
    g.GemmEpilogueOp: _gemm_epilogue,
    g.BiasAddOp: _bias_add,
    g.AddOp: _add,
    g.SubOp: _sub,
    g.MulOp: _mul,
    g.CastOp: _cast,
    **{row.forward: _activation for row in ACTIVATIONS.values()},
    g.DropoutOp: _dropout,
    g.ReshapeOp: _reshape,
    g.TransposeOp: _transpose,
    g.BroadcastToOp: _broadcast_to,
    g.SoftmaxOp: _softmax,
    g.ReduceSumOp: _reduce_sum,
    g.CrossEntropyOp: _cross_entropy,
    g.MseLossOp: _mse_loss,
}
