"""VJP rules of the backward primitives (second order; the math: the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.graph import ACTIVATIONS
from aicfc.dialects.tensors import numel, shape_of
from aicfc.passes.vjp_rules.building import (
    Grad,
    VjpContext,
    VjpRule,
    add,
    broadcast,
    constant,
    reduce,
    scale,
    sum_all,
)


def _relu_grad(ctx: VjpContext, op: ad.ReluGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = dy * (y > 0): linear in dy; a step function of y (zero gradient a.e.).
    (gx,) = grads
    assert gx is not None
    return ctx.value(ad.ReluGradOp(gx, op.saved)) if ctx.wanted[0] else None, None


def _tanh_grad(ctx: VjpContext, op: ad.TanhGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = dy (1 - y^2): d dy = g (1 - y^2), d y = -2 g dy y.
    (gx,) = grads
    assert gx is not None
    d_dy = ctx.value(ad.TanhGradOp(gx, op.saved)) if ctx.wanted[0] else None
    d_y = None
    if ctx.wanted[1]:
        g_dy = ctx.value(g.MulOp(gx, op.grad))
        d_y = scale(ctx, ctx.value(g.MulOp(g_dy, op.saved)), -2.0)
    return d_dy, d_y


def _softmax_grad(ctx: VjpContext, op: ad.SoftmaxGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = y (dy - s), s = sum_axis(dy y): d dy = softmax_grad(g, y);
    # d y = g (dy - s) - dy sum_axis(g y).
    (gx,) = grads
    assert gx is not None
    axis = op.axis.value.data
    y, dy = op.output, op.grad
    d_dy = ctx.value(ad.SoftmaxGradOp(gx, y, axis)) if ctx.wanted[0] else None
    d_y = None
    if ctx.wanted[1]:
        shape = shape_of(y.type)

        def rowsum(x: SSAValue) -> SSAValue:
            return broadcast(ctx, reduce(ctx, x, [axis % len(shape)], keepdims=True), shape)

        s = rowsum(ctx.value(g.MulOp(dy, y)))
        t = rowsum(ctx.value(g.MulOp(gx, y)))
        first = ctx.value(g.MulOp(gx, ctx.value(g.SubOp(dy, s))))
        d_y = ctx.value(g.SubOp(first, ctx.value(g.MulOp(dy, t))))
    return d_dy, d_y


def _cross_entropy_grad(
    ctx: VjpContext, op: ad.CrossEntropyGradOp, grads: Sequence[Grad]
) -> Sequence[Grad]:
    # dx = (softmax(x) - onehot) dL / N over logits [..., C] (N rows):
    # d x = softmax_grad(g, softmax(x)) * dL / N, d dL = sum(g * cross_entropy_grad(x, labels, 1)).
    (gx,) = grads
    assert gx is not None
    shape = shape_of(op.logits.type)
    axis, rows = len(shape) - 1, numel(shape[:-1])
    d_x = d_dl = None
    if ctx.wanted[0]:
        p = ctx.value(g.SoftmaxOp(op.logits, axis))
        jg = ctx.value(ad.SoftmaxGradOp(gx, p, axis))
        factor = broadcast(ctx, scale(ctx, op.grad, 1.0 / rows), shape)
        d_x = ctx.value(g.MulOp(jg, factor))
    if ctx.wanted[2]:
        unit = ctx.value(
            ad.CrossEntropyGradOp(op.logits, op.labels, constant(ctx, op.grad.type, 1.0))
        )
        d_dl = sum_all(ctx, ctx.value(g.MulOp(gx, unit)))
    return d_x, None, d_dl


def _mse_loss_grad(ctx: VjpContext, op: ad.MseLossGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dp = 2 (p - t) dL / n: d p = -d t = g * 2 dL / n, d dL = sum(g * mse_loss_grad(p, t, 1)).
    (gx,) = grads
    assert gx is not None
    shape = shape_of(op.pred.type)
    d_p = d_t = d_dl = None
    if ctx.wanted[0] or ctx.wanted[1]:
        factor = broadcast(ctx, scale(ctx, op.grad, 2.0 / numel(shape)), shape)
        d_p = ctx.value(g.MulOp(gx, factor))
        d_t = scale(ctx, d_p, -1.0) if ctx.wanted[1] else None
    if ctx.wanted[2]:
        unit = ctx.value(ad.MseLossGradOp(op.pred, op.target, constant(ctx, op.grad.type, 1.0)))
        d_dl = sum_all(ctx, ctx.value(g.MulOp(gx, unit)))
    return (d_p if ctx.wanted[0] else None), d_t, d_dl


def _dropout_grad(ctx: VjpContext, op: ad.DropoutGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx = dy * mask / (1 - p): a fixed diagonal map, its own transpose.
    (gx,) = grads
    assert gx is not None
    p, seed = op.p.value.data, op.seed.value.data
    return ctx.value(ad.DropoutGradOp(gx, op.offset, p, seed)), None


def _epilogue_grad(ctx: VjpContext, op: ad.EpilogueGradOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dZ = act_grad(dY, saved), db = sum_rows(dZ): db is linear in dZ, so the gradient
    # of dZ is gZ + broadcast(gb) and the rest is the VJP of act_grad (operands grad,
    # saved, as epilogue_grad's). Only where act_grad has one (EpilogueGradOp says so).
    g_dz, g_db = grads
    shape = shape_of(op.grad.type)
    g_total = add(ctx, g_dz, broadcast(ctx, g_db, shape) if g_db is not None else None)
    assert g_total is not None
    return PRIMITIVE_RULES[ACTIVATIONS[op.act.data].grad](ctx, op, [g_total])


def _embedding_grad(
    ctx: VjpContext, op: ad.EmbeddingGradOp, grads: Sequence[Grad]
) -> Sequence[Grad]:
    # dW[v] = sum_{n: ids[n] = v} dy[n] is linear in dy; its transpose gathers:
    # d dy[n] = g[ids[n]], an embedding of the ids in g.
    (gw,) = grads
    assert gw is not None
    return ctx.value(g.EmbeddingOp(op.ids, gw)) if ctx.wanted[0] else None, None


PRIMITIVE_RULES: dict[type[Operation], VjpRule] = {
    ad.ReluGradOp: _relu_grad,
    ad.TanhGradOp: _tanh_grad,
    ad.SoftmaxGradOp: _softmax_grad,
    ad.CrossEntropyGradOp: _cross_entropy_grad,
    ad.MseLossGradOp: _mse_loss_grad,
    ad.DropoutGradOp: _dropout_grad,
    ad.EpilogueGradOp: _epilogue_grad,
    ad.EmbeddingGradOp: _embedding_grad,
}
