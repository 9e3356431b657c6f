"""VJP rules of the transformer's graph ops: embedding, layer norm (plain and fused with
the residual add), scale, causal mask, split, concat and fused attention (the math: the
package docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.passes.vjp_rules.building import Grad, VjpContext, VjpRule, add, constant


def _embedding(ctx: VjpContext, op: g.EmbeddingOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # out[n] = W[ids[n]]: dW = scatter-add of dy into the ids' rows; the ids get none.
    (dy,) = grads
    assert dy is not None
    dw = ctx.value(ad.EmbeddingGradOp(dy, op.ids, op.num_embeddings)) if ctx.wanted[1] else None
    return None, dw


def _layer_norm_grads(
    ctx: VjpContext, op: g.LayerNormOp | g.AddLayerNormOp, dy: Grad
) -> tuple[Grad, list[Grad]]:
    """(dx, [dweight, dbias] as present) of the layer norm part of `op`, from its saved
    statistics; (None, Nones) when y gets no gradient. The statistics results get none:
    only backward primitives read them (LayerNormBase.why_not_differentiable)."""
    params = [v for v in (op.weight, op.bias) if v is not None]
    if dy is None:
        return None, [None] * len(params)
    x = op.sum if isinstance(op, g.AddLayerNormOp) else op.input
    grad = ctx.emit(
        ad.LayerNormGradOp(dy, x, op.mean, op.rstd, op.weight, with_bias=op.bias is not None)
    )
    dx, *dparams = grad.results
    return dx, list(dparams)


def _layer_norm(ctx: VjpContext, op: g.LayerNormOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # dx, dw, db = layer_norm_grad(dy, x, mean, rstd, w), in operand order.
    dx, dparams = _layer_norm_grads(ctx, op, grads[0])
    return [dx, *dparams]


def _add_layer_norm(ctx: VjpContext, op: g.AddLayerNormOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # sum = x + r, y = LN(sum): dsum = d(sum result) + layer_norm_grad's dx, and the add
    # passes dsum to both addends.
    dsum, dy = grads[0], grads[1]
    dx, dparams = _layer_norm_grads(ctx, op, dy)
    total = add(ctx, dsum, dx)
    return [total, total, *dparams]


def _scale(ctx: VjpContext, op: g.ScaleOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    return (ctx.value(g.ScaleOp(dy, op.factor_value)),)


def _causal_mask(ctx: VjpContext, op: g.CausalMaskOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # masked scores do not reach y: their gradient is 0, the rest passes through
    (dy,) = grads
    assert dy is not None
    return (ctx.value(g.CausalMaskOp(dy, 0.0)),)


def _split(ctx: VjpContext, op: g.SplitOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    # the pieces' gradients side by side again; a piece without one contributes zeros
    pieces = [
        gr if gr is not None else constant(ctx, r.type, 0.0)
        for gr, r in zip(grads, op.outputs, strict=True)
    ]
    return (ctx.value(g.ConcatOp(pieces, op.axis_value)),)


def _concat(ctx: VjpContext, op: g.ConcatOp, grads: Sequence[Grad]) -> Sequence[Grad]:
    (dy,) = grads
    assert dy is not None
    if len(op.inputs) == 1:
        return (dy,)
    return tuple(ctx.emit(g.SplitOp(dy, op.axis_value, op.sizes())).results)


def _attention(
    ctx: VjpContext, op: g.ScaledDotProductAttentionOp, grads: Sequence[Grad]
) -> Sequence[Grad]:
    # dq, dk, dv from the saved out and lse (the probabilities are recomputed); the lse
    # result gets no gradient: only backward primitives read it.
    dout = grads[0]
    offset = () if op.offset is None else (None,)
    if dout is None:
        return (None, None, None, *offset)
    grad = ctx.emit(
        ad.ScaledDotProductAttentionGradOp(
            dout,
            op.q,
            op.k,
            op.v,
            op.result,
            op.lse,
            op.offset,
            causal=op.is_causal,
            scale=op.scale_value,
            dropout_p=op.p,
            seed=op.seed_value,
        )
    )
    return (*grad.results, *offset)


def _packed_attention(
    ctx: VjpContext, op: g.PackedQKVAttentionOp, grads: Sequence[Grad]
) -> Sequence[Grad]:
    # the packed gradient dqkv [N, T, 3D] in one op (no concat of dq, dk, dv)
    dout = grads[0]
    offset = () if op.offset is None else (None,)
    if dout is None:
        return (None, *offset)
    grad = ctx.emit(
        ad.PackedQKVAttentionGradOp(
            dout,
            op.qkv,
            op.result,
            op.lse,
            op.heads,
            op.offset,
            causal=op.is_causal,
            scale=op.scale_value,
            dropout_p=op.p,
            seed=op.seed_value,
        )
    )
    return (grad.grad_qkv, *offset)


TRANSFORMER_RULES: dict[type[Operation], VjpRule] = {
    g.EmbeddingOp: _embedding,
    g.LayerNormOp: _layer_norm,
    g.AddLayerNormOp: _add_layer_norm,
    g.ScaleOp: _scale,
    g.CausalMaskOp: _causal_mask,
    g.SplitOp: _split,
    g.ConcatOp: _concat,
    g.ScaledDotProductAttentionOp: _attention,
    g.PackedQKVAttentionOp: _packed_attention,
}
