"""The VJP rule table: op class -> vector-Jacobian product (reverse-mode rules).

`aicfc-expand-backward` walks the ops between a loss and the values it is
differentiated with respect to, in reverse, and asks `VJP_RULES[type(op)]` for
the gradient of each operand (JAX's `primitive_transposes`, tinygrad's pattern
lists: the rules are data, the pass only walks). A rule is

    rule(ctx, op, grads) -> operand_grads

- `grads[i]` is dL/d(result i), or None where result i receives no gradient
  (at least one is not None);
- it returns one entry per operand: dL/d(operand j) with the operand's type, or
  None where the operand is not differentiable (integer labels, the dropout
  offset), its gradient is zero almost everywhere (the saved output of
  relu_grad), or `ctx.wanted[j]` is False (the pass does not need it);
- it emits new ops only through `ctx.emit`, which inserts them after the
  `autodiff.backward` being expanded and gives them the forward op's location.

Ops whose OpInfo says `differentiable=False` (graph.constant,
autodiff.backward, adam_step, sgd_step, gelu_grad) have no rule by design.

The math, per op (dY: gradient of the result; shapes as in dialects/graph/):

    matmul        C = op(A) op(B):  d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC,
                  expressed with graph.matmul transpose flags, never graph.transpose
    gemm_epilogue Y = act(Z), Z = op(A) op(B) + b (the composite of its parts):
                  dZ = dY * act'(.) (+ d pre_act), then dA, dB as matmul, db = sum_rows(dZ);
                  dZ keeps the forward layout, db reduces dZ (docs/design.md#composite-backward)
    bias_add      dx = dy, db = sum over all leading axes of dy
    add / sub     da = dz, db = +-dz;  mul: da = dz * b, db = dz * a
    relu / gelu / tanh    relu_grad(dy, y) / gelu_grad(dy, x) / tanh_grad(dy, y): every
                  activation's rule is its gradient op on what its row saves (x or y)
    dropout       dropout_grad(dy, offset): the same mask, so the same linear map
    reshape / transpose   the inverse reshape / the inverse permutation
    broadcast_to  sum over the broadcast axes, reshape back for size-1 dims
    reduce_sum    reshape to keepdims form, broadcast back to the input shape
    softmax       softmax_grad(dy, y, axis)
    cross_entropy cross_entropy_grad(logits, labels, dL);  mse_loss: +-mse_loss_grad(p, t, dL)

Backward primitives (second order):

    relu_grad     d dy = relu_grad(g, y); d y = 0 a.e. (a step function of y)
    tanh_grad     dx = dy (1 - y^2):  d dy = tanh_grad(g, y),  d y = -2 g dy y
    softmax_grad  dx = y (dy - s), s = sum(dy y):  d dy = softmax_grad(g, y) (the Jacobian
                  diag(y) - y y^T is symmetric),  d y = g (dy - s) - dy sum(g y)
    cross_entropy_grad  dx = (softmax(x) - onehot) dL / N:
                  d x = softmax_grad(g, softmax(x)) dL / N,
                  d dL = sum(g * cross_entropy_grad(x, y, 1))
    mse_loss_grad dp = 2 (p - t) dL / n:
                  d p = -d t = 2 g dL / n,  d dL = sum(g * mse_loss_grad(p, t, 1))
    dropout_grad  linear in dy with a fixed mask: d dy = dropout_grad(g, offset)
    epilogue_grad dZ = act_grad(dY, s), db = sum_rows(dZ): the VJP of act_grad with the
                  gradient gZ + broadcast(gb) of dZ (relu: d dY = relu_grad(gZ + gb, Y),
                  d Y = 0 a.e.); the gelu form needs gelu'' (no op computes it): not
                  differentiable
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xdsl.builder import Builder
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.activation_table import Saved
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.graph import ACTIVATION_OF, ACTIVATIONS, Activation, ActivationOp
from aicfc.dialects.tensors import numel, shape_of

Grad = SSAValue | None
OpT = TypeVar("OpT", bound=Operation)


@dataclass
class VjpContext:
    """Where a rule builds: the insertion point, the forward op and the wanted operands.

    builder: inserts after the `autodiff.backward` being expanded.
    op:      the forward op whose VJP is being built (its location is copied).
    wanted:  per operand, whether the pass needs its gradient.
    created: every op emitted so far in this expansion (shared across rules).
    """

    builder: Builder
    op: Operation
    wanted: tuple[bool, ...]
    created: set[Operation] = field(default_factory=set)

    def emit(self, new: OpT) -> OpT:
        """Insert `new` at the builder's point with the forward op's location."""
        self.builder.insert(new)
        copy_location(self.op, new)
        self.created.add(new)
        return new

    def value(self, new: Operation) -> SSAValue:
        """Insert a one-result op and return its result."""
        return self.emit(new).results[0]


VjpRule = Callable[[VjpContext, Any, Sequence[Grad]], Sequence[Grad]]
"""rule(ctx, forward op, result grads) -> operand grads (see the module docstring)."""


# ----------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------


def splat(t: Attribute, v: float) -> g.ConstantOp:
    """A graph.constant of float tensor type `t` with every element `v` (not inserted)."""
    assert isinstance(t, TensorType)
    return g.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [v]))


def constant(ctx: VjpContext, t: Attribute, v: float) -> SSAValue:
    """A splat graph.constant of tensor type `t` filled with `v`."""
    return ctx.value(splat(t, v))


def scale(ctx: VjpContext, x: SSAValue, v: float) -> SSAValue:
    """x * v (graph.mul with a splat constant)."""
    return ctx.value(g.MulOp(x, constant(ctx, x.type, v)))


def add(ctx: VjpContext, a: Grad, b: Grad) -> Grad:
    """a + b where either may be absent (None means zero)."""
    if a is None or b is None:
        return a if b is None else b
    return ctx.value(g.AddOp(a, b))


def reduce(ctx: VjpContext, x: SSAValue, axes: Sequence[int], keepdims: bool = False) -> SSAValue:
    """graph.reduce_sum over `axes` (x itself when there is nothing to reduce)."""
    if not axes:
        return x
    return ctx.value(g.ReduceSumOp(x, list(axes), keepdims))


def reshape(ctx: VjpContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if shape_of(x.type) == tuple(shape) else ctx.value(g.ReshapeOp(x, shape))


def broadcast(ctx: VjpContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if shape_of(x.type) == tuple(shape) else ctx.value(g.BroadcastToOp(x, shape))


def sum_all(ctx: VjpContext, x: SSAValue) -> SSAValue:
    """Sum of every element, as a rank-0 tensor."""
    return reduce(ctx, x, range(len(shape_of(x.type))))


def matmul_grads(
    ctx: VjpContext,
    dc: SSAValue,
    a: SSAValue,
    b: SSAValue,
    ta: bool,
    tb: bool,
    want_a: bool,
    want_b: bool,
) -> tuple[Grad, Grad]:
    """dA, dB of C = op(A) op(B) with transpose flags only (no graph.transpose).

    d op(A) = dC op(B)^T and d op(B) = op(A)^T dC. A transposed operand gets the
    transpose of that, which swaps the product's operands:
    dA = op(B) dC^T if transpose_a else dC op(B)^T,
    dB = dC^T op(A) if transpose_b else op(A)^T dC.
    """
    da = db = None
    if want_a:
        da = ctx.value(g.MatmulOp(b, dc, tb, True) if ta else g.MatmulOp(dc, b, False, not tb))
    if want_b:
        db = ctx.value(g.MatmulOp(dc, a, True, ta) if tb else g.MatmulOp(a, dc, not ta, False))
    return da, db


# ----------------------------------------------------------------------------
# graph ops
# ----------------------------------------------------------------------------


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
    dbias = reduce(ctx, dz, [0]) if ctx.wanted[2] else None  # sum_rows(dZ), never a transpose
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
    src, dst = shape_of(op.input.type), shape_of(op.result.type)
    lead = len(dst) - len(src)
    axes = list(range(lead)) + [
        lead + i for i, d in enumerate(src) if d == 1 and dst[lead + i] != 1
    ]
    return (reshape(ctx, reduce(ctx, dy, axes), src),)


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


# ----------------------------------------------------------------------------
# Backward primitives (second-order rules)
# ----------------------------------------------------------------------------


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
    # dx = (softmax(x) - onehot) dL / N: d x = softmax_grad(g, softmax(x)) * dL / N,
    # d dL = sum(g * cross_entropy_grad(x, labels, 1)).
    (gx,) = grads
    assert gx is not None
    shape = shape_of(op.logits.type)
    d_x = d_dl = None
    if ctx.wanted[0]:
        p = ctx.value(g.SoftmaxOp(op.logits, 1))
        jg = ctx.value(ad.SoftmaxGradOp(gx, p, 1))
        factor = broadcast(ctx, scale(ctx, op.grad, 1.0 / shape[0]), shape)
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
    return VJP_RULES[ACTIVATIONS[op.act.data].grad](ctx, op, [g_total])


# ----------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------


def why_not_differentiable(op: Operation) -> str | None:
    """Why `op` has no VJP, or None if VJP_RULES can differentiate this instance.

    The op's own reason (AicfcOp.why_not_differentiable: OpInfo, or a property such
    as epilogue_grad's act), else no rule in the table.
    """
    why = op.why_not_differentiable() if isinstance(op, AicfcOp) else None
    if why is None and type(op) not in VJP_RULES:
        return "no VJP rule is registered for it (passes/vjp_rules.py)"
    return why


VJP_RULES: dict[type[Operation], VjpRule] = {
    g.MatmulOp: _matmul,
    g.GemmEpilogueOp: _gemm_epilogue,
    g.BiasAddOp: _bias_add,
    g.AddOp: _add,
    g.SubOp: _sub,
    g.MulOp: _mul,
    **{row.forward: _activation for row in ACTIVATIONS.values()},
    g.DropoutOp: _dropout,
    g.ReshapeOp: _reshape,
    g.TransposeOp: _transpose,
    g.BroadcastToOp: _broadcast_to,
    g.SoftmaxOp: _softmax,
    g.ReduceSumOp: _reduce_sum,
    g.CrossEntropyOp: _cross_entropy,
    g.MseLossOp: _mse_loss,
    ad.ReluGradOp: _relu_grad,
    ad.TanhGradOp: _tanh_grad,
    ad.SoftmaxGradOp: _softmax_grad,
    ad.CrossEntropyGradOp: _cross_entropy_grad,
    ad.MseLossGradOp: _mse_loss_grad,
    ad.DropoutGradOp: _dropout_grad,
    ad.EpilogueGradOp: _epilogue_grad,
}
"""The VJP of every differentiable graph op and backward primitive, keyed by op class.

Not here by design (OpInfo.differentiable is False, with the reason): graph.constant,
autodiff.backward, autodiff.adam_step, autodiff.sgd_step, autodiff.gelu_grad."""
