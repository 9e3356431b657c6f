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

Ops whose OpInfo says `differentiable=False` (graph.constant, autodiff.backward,
adam_step, sgd_step, gelu_grad, silu_grad, layer_norm_grad,
scaled_dot_product_attention_grad, packed_qkv_attention_grad) have no rule by design.

The rules live by family: building.py (the context and the shared pieces),
graph_ops.py (the MLP's ops), transformer_ops.py (embedding, layer norm, attention
and their layout ops) and primitives.py (second order). The math, per op (dY: the
gradient of the result; shapes as in dialects/graph/):

    matmul        C = op(A) op(B):  d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC,
                  expressed with graph.matmul transpose flags, never graph.transpose;
                  batched products sum each gradient over the batch dims its operand
                  was broadcast along; a matrix B under a batched A ([B, T, D] x [D, N])
                  gets dB from the folded rows: [B T, D]^T [B T, N]
    gemm_epilogue Y = act(Z), Z = op(A) op(B) + b (the composite of its parts):
                  dZ = dY * act'(.) (+ d pre_act), then dA, dB as matmul, db = sum_rows(dZ)
                  over every leading axis; dZ keeps the forward layout, db reduces dZ
                  (docs/design.md#composite-backward)
    bias_add      dx = dy, db = sum over all leading axes of dy
    cast          dx = cast(dy) to x's element type
    add / sub     da = dz, db = +-dz;  mul: da = dz * b, db = dz * a;  scale: dx = c dy
    relu / gelu / tanh    relu_grad(dy, y) / gelu_grad(dy, x) / tanh_grad(dy, y): every
                  activation's rule is its gradient op on what its row saves (x or y)
    dropout       dropout_grad(dy, offset): the same mask, so the same linear map
    reshape / transpose   the inverse reshape / the inverse permutation
    broadcast_to  sum over the broadcast axes, reshape back for size-1 dims
    split / concat        concat of the pieces' gradients (zeros for an unused piece) /
                  split of dy at the inputs' sizes
    reduce_sum    reshape to keepdims form, broadcast back to the input shape
    softmax       softmax_grad(dy, y, axis)
    causal_mask   dx = causal_mask(dy, fill = 0): a masked score gets no gradient
    cross_entropy cross_entropy_grad(logits, labels, dL);  mse_loss: +-mse_loss_grad(p, t, dL)
    embedding     out[n] = W[ids[n]]:  dW = embedding_grad(dy, ids, V) (scatter-add)
    layer_norm    dx, dw, db = layer_norm_grad(dy, x, mean, rstd, w): with xhat = (x - mean)
                  rstd, g = dy w: dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)),
                  dw = sum_rows(dy xhat), db = sum_rows(dy) (the saved mean and rstd,
                  which get no gradient themselves)
    add_layer_norm        s = x + r, y = LN(s): dx = dr = ds + layer_norm_grad(dy, s, ...)
    scaled_dot_product_attention   dq, dk, dv = scaled_dot_product_attention_grad(dout,
                  q, k, v, out, lse): the composite of its parts, P recomputed from lse
                  (FlashAttention-2: Delta = rowsum(dout out), dS = P (dP - Delta))
    packed_qkv_attention   dqkv = packed_qkv_attention_grad(dout, qkv, out, lse): the
                  same dq, dk, dv of the heads, written packed as qkv [N, T, 3D] is

Backward primitives (second order):

    relu_grad     d dy = relu_grad(g, y); d y = 0 a.e. (a step function of y)
    tanh_grad     dx = dy (1 - y^2):  d dy = tanh_grad(g, y),  d y = -2 g dy y
    softmax_grad  dx = y (dy - s), s = sum(dy y):  d dy = softmax_grad(g, y) (the Jacobian
                  diag(y) - y y^T is symmetric),  d y = g (dy - s) - dy sum(g y)
    cross_entropy_grad  dx = (softmax(x) - onehot) dL / N (N rows of [..., C]):
                  d x = softmax_grad(g, softmax(x)) dL / N,
                  d dL = sum(g * cross_entropy_grad(x, y, 1))
    mse_loss_grad dp = 2 (p - t) dL / n:
                  d p = -d t = 2 g dL / n,  d dL = sum(g * mse_loss_grad(p, t, 1))
    dropout_grad  linear in dy with a fixed mask: d dy = dropout_grad(g, offset)
    epilogue_grad dZ = act_grad(dY, s), db = sum_rows(dZ): the VJP of act_grad with the
                  gradient gZ + broadcast(gb) of dZ (relu: d dY = relu_grad(gZ + gb, Y),
                  d Y = 0 a.e.); the gelu form needs gelu'' (no op computes it): not
                  differentiable
    embedding_grad        linear in dy: d dy = embedding(ids, g) (the gather)
"""

from __future__ import annotations

from xdsl.ir import Operation

from aicfc.dialects.base import AicfcOp
from aicfc.passes.vjp_rules.building import Grad, VjpContext, VjpRule, splat
from aicfc.passes.vjp_rules.graph_ops import GRAPH_RULES
from aicfc.passes.vjp_rules.primitives import PRIMITIVE_RULES
from aicfc.passes.vjp_rules.transformer_ops import TRANSFORMER_RULES


def why_not_differentiable(op: Operation) -> str | None:
    """Why `op` has no VJP, or None if VJP_RULES can differentiate this instance.

    The op's own reason (AicfcOp.why_not_differentiable: OpInfo, or a property such
    as epilogue_grad's act), else no rule in the table.
    """
    why = op.why_not_differentiable() if isinstance(op, AicfcOp) else None
    if why is None and type(op) not in VJP_RULES:
        return "no VJP rule is registered for it (passes/vjp_rules/)"
    return why


VJP_RULES: dict[type[Operation], VjpRule] = {
    **GRAPH_RULES,
    **TRANSFORMER_RULES,
    **PRIMITIVE_RULES,
}
"""The VJP of every differentiable graph op and backward primitive, keyed by op class.

Not here by design (OpInfo.differentiable is False, with the reason): graph.constant,
autodiff.backward, autodiff.adam_step, autodiff.sgd_step, autodiff.gelu_grad,
autodiff.silu_grad, autodiff.layer_norm_grad, autodiff.scaled_dot_product_attention_grad,
autodiff.packed_qkv_attention_grad."""

__all__ = ["VJP_RULES", "Grad", "VjpContext", "VjpRule", "splat", "why_not_differentiable"]
