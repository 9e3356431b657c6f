"""The fusion pattern table of `aicfc-fuse` (docs/design.md#fusion-patterns): patterns are data.

Each rule is one row: a `FusionPattern` whose steps are flag masks and
constraints (the matcher, passes/fusion/matcher.py, says how they match), and
whose builder is the function just above it. A builder takes the match and
then the op of each step, in step order (None for an absent optional step),
and returns the fused op with the values it replaces:

    act(bias_add(matmul(A, B), b))          -> gemm_epilogue(A, B, b, act)   [-> (Y, Z) for gelu]
    reduce_sum(act_grad(dY, s), leading axes) -> epilogue_grad(dY, s, act)   [-> (dZ, db)]
    epilogue_grad(matmul(A, B), s)           -> gemm_epilogue_grad(A, B, s, act) [-> (dZ, db)]
    cross_entropy(x, y), cross_entropy_grad(x, y, d) [, reduce_sum(.., leading axes)]
                                             -> cross_entropy_with_grad(x, y, d) [-> (l, dx, db)]
    matmul(dropout?(softmax(causal_mask?(scale(matmul(q, k^T))))), v)
                                    -> scaled_dot_product_attention(q, k, v)  [-> (o, lse)]
    reshape(transpose(scaled_dot_product_attention(heads(split(qkv))), [0, 2, 1, 3]))
                                    -> packed_qkv_attention(qkv)             [-> (o, lse)]
    layer_norm(add(x, r))           -> add_layer_norm(x, r)              [-> (s, y, mean, rstd)]
    add(dr, layer_norm_grad(dy, x, mean, rstd, w)#dx)  (or the add's operands swapped)
                                    -> add_layer_norm_grad(dy, dr, x, mean, rstd, w)
                                                                         [-> (dx, dw, db)]

A layer's product may have leading dims ([B, T, D] x [D, N]: a Linear on every
position); its bias gradient sums every leading axis.

Adding a pattern is adding a row (and its builder, or reusing one) below; a
new activation with an epilogue form needs nothing here: `EPILOGUE_FORMS`
(passes/fusion/constraints.py) reads the activation table.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from aicfc.dialects.activation_table import Saved
from aicfc.dialects.autodiff import (
    AddLayerNormGradOp,
    CrossEntropyWithGradOp,
    EpilogueGradOp,
    GemmEpilogueGradOp,
    LayerNormGradOp,
)
from aicfc.dialects.flags import OpFlag
from aicfc.dialects.graph import (
    ACTIVATIONS,
    Activation,
    AddLayerNormOp,
    DropoutOp,
    GemmEpilogueOp,
    LayerNormOp,
    MatmulOp,
    MatrixProductOp,
    PackedQKVAttentionOp,
    ScaledDotProductAttentionOp,
    ScaleOp,
)
from aicfc.dialects.tensors import shape_of
from aicfc.passes.fusion.constraints import (
    EPILOGUE_ACTIVATION_OF,
    EmptyEpilogue,
    HasEpilogueForm,
    HasFusedGradForm,
    HasResidualForm,
    HasResidualGradForm,
    HeadProduct,
    IsLossGrad,
    IsPart,
    IsResidualAdd,
    IsResidualGradAdd,
    LayerProduct,
    MasksWithMinusInfinity,
    OverLastAxis,
    ResultRank,
    SumsLeadingAxes,
)
from aicfc.passes.fusion.head_layout import (
    MergesHeads,
    ReadsPackedHeads,
    SwapsHeadsAndTime,
    packed_heads,
)
from aicfc.passes.fusion.matcher import Built, FusionPattern, Match, Step

F = OpFlag

# ----------------------------------------------------------------------------
# gemm -> bias_add -> activation
# ----------------------------------------------------------------------------


def build_gemm_epilogue(
    m: Match, gemm: Operation, bias_add: Operation | None, act: Operation | None
) -> Built:
    """gemm_epilogue(A, B, bias, act) with the gemm's transpose flags.

    The gemm step is a plain product (EmptyEpilogue), so the bias is the
    bias_add's (along N of the [M, N] product), or none without a bias step.
    pre_act (Z) is emitted for an activation whose gradient reads its input
    (gelu: the backward needs gelu'(Z)) and whenever Z has users outside the match.
    """
    assert isinstance(gemm, MatrixProductOp)
    bias = bias_add.operands[1] if bias_add is not None else None
    activation = EPILOGUE_ACTIVATION_OF[type(act)] if act is not None else Activation.NONE
    z = m.exports.get("pre_act")
    saves_input = (
        activation != Activation.NONE and ACTIVATIONS[activation].facts.saves == Saved.INPUT
    )
    with_pre_act = saves_input or (z is not None and m.has_outside_uses(z))
    op = GemmEpilogueOp(
        gemm.operands[0],
        gemm.operands[1],
        bias,
        activation,
        transpose_a=bool(gemm.transpose_a),
        transpose_b=bool(gemm.transpose_b),
        with_pre_act=with_pre_act and activation != Activation.NONE,
    )
    exports: dict[str, SSAValue] = {"pre_act": op.pre_act} if op.pre_act is not None else {}
    return Built(op, op.result, exports)


# act(bias_add(matmul(A, B), b)) -> gemm_epilogue(A, B, b, act); bias and act each optional.
GEMM_BIAS_ACT = FusionPattern(
    name="gemm_bias_act",
    group="forward",
    steps=(
        Step(F.IS_GEMM_LIKE, constraints=(LayerProduct(), EmptyEpilogue())),
        Step(F.IS_BIAS_ADD | F.IS_ELEMENTWISE, forbidden=F.IS_FUSED, optional=True),
        Step(
            F.IS_ACTIVATION | F.IS_ELEMENTWISE,
            forbidden=F.IS_FUSED,
            optional=True,
            exports_input="pre_act",
            constraints=(HasEpilogueForm(),),
        ),
    ),
    builder=build_gemm_epilogue,
    fused_op=GemmEpilogueOp,
)

# ----------------------------------------------------------------------------
# activation gradient -> bias gradient
# ----------------------------------------------------------------------------


def build_epilogue_grad(m: Match, act_grad: Operation, bias_grad: Operation) -> Built:
    """epilogue_grad(dY, saved, act) -> (dZ, db): the act-grad's operands, the
    reduce's result is db, and dZ is re-exported for the dW and dX products."""
    dy, saved = act_grad.operands
    op = EpilogueGradOp(dy, saved, EPILOGUE_ACTIVATION_OF[type(act_grad)])
    return Built(op, op.grad_bias, {"grad_pre_act": op.grad_pre_act})


# (act_grad(dY, saved), reduce_sum(act_grad(dY, saved), every leading axis))
#   -> epilogue_grad(dY, saved, act)
ACT_GRAD_BIAS_GRAD = FusionPattern(
    name="act_grad_bias_grad",
    group="backward",
    steps=(
        Step(
            F.IS_ACTIVATION_GRAD | F.IS_ELEMENTWISE,
            forbidden=F.IS_FUSED,
            constraints=(HasEpilogueForm(),),
        ),
        Step(
            F.IS_REDUCTION | F.IS_LINEAR,
            forbidden=F.IS_FUSED | F.IS_LOSS,
            exports_input="grad_pre_act",
            constraints=(SumsLeadingAxes(),),
        ),
    ),
    builder=build_epilogue_grad,
    fused_op=EpilogueGradOp,
)

# ----------------------------------------------------------------------------
# a product feeding a backward epilogue
# ----------------------------------------------------------------------------


def build_gemm_epilogue_grad(m: Match, gemm: Operation, epilogue: Operation) -> Built:
    """gemm_epilogue_grad(A, B, saved, act) with the product's transpose flags: the
    epilogue_grad's dZ and db become the fused op's (dY is never stored)."""
    assert isinstance(gemm, MatrixProductOp) and isinstance(epilogue, EpilogueGradOp)
    op = GemmEpilogueGradOp(
        gemm.operands[0],
        gemm.operands[1],
        epilogue.saved,
        epilogue.act.data,
        transpose_a=bool(gemm.transpose_a),
        transpose_b=bool(gemm.transpose_b),
    )
    return Built(op, op.grad_pre_act, {}, rest=(op.grad_bias,))


# epilogue_grad(matmul(A, B), saved) -> gemm_epilogue_grad(A, B, saved, act): the next
# layer's dX product with this layer's backward epilogue (cuBLASLt's DRELU_BGRAD), one
# node fewer on the backward's critical path. Runs once epilogue_grad exists (a later
# round of the pass); HAS_PARAM keeps the fused op itself out of the second step.
GEMM_EPILOGUE_GRAD = FusionPattern(
    name="gemm_epilogue_grad",
    group="backward",
    steps=(
        Step(F.IS_GEMM_LIKE, constraints=(ResultRank(2), EmptyEpilogue())),
        Step(
            F.IS_BACKWARD | F.IS_FUSED | F.IS_ACTIVATION_GRAD | F.IS_REDUCTION,
            forbidden=F.HAS_PARAM,
        ),
    ),
    builder=build_gemm_epilogue_grad,
    fused_op=GemmEpilogueGradOp,
)

# ----------------------------------------------------------------------------
# loss and its gradient (and the last bias gradient)
# ----------------------------------------------------------------------------


def build_loss_with_grad(
    m: Match, loss: Operation, loss_grad: Operation, bias_grad: Operation | None
) -> Built:
    """cross_entropy_with_grad(x, y, d) from the gradient op's operands: the loss is
    re-exported; with the bias-grad step its result is db and dx is re-exported."""
    logits, labels, dloss = loss_grad.operands
    op = CrossEntropyWithGradOp(logits, labels, dloss, with_grad_bias=bias_grad is not None)
    exports: dict[str, SSAValue] = {"loss": op.loss}
    if op.grad_bias is None:
        return Built(op, op.grad_logits, exports)
    exports["grad_logits"] = op.grad_logits
    return Built(op, op.grad_bias, exports)


# (loss(x, y), loss_grad(x, y, d), reduce_sum(loss_grad, every leading axis))
#   -> cross_entropy_with_grad(x, y, d) -> (loss, dx, db); the bias-grad step is optional.
LOSS_WITH_GRAD = FusionPattern(
    name="loss_with_grad",
    group="backward",
    steps=(
        Step(F.IS_LOSS | F.IS_REDUCTION, forbidden=F.IS_FUSED, constraints=(HasFusedGradForm(),)),
        Step(
            F.IS_BACKWARD,
            forbidden=F.IS_FUSED,
            sibling=True,
            exports_input="loss",
            constraints=(IsLossGrad(),),
        ),
        Step(
            F.IS_REDUCTION | F.IS_LINEAR,
            forbidden=F.IS_FUSED | F.IS_LOSS,
            optional=True,
            exports_input="grad_logits",
            constraints=(SumsLeadingAxes(),),
        ),
    ),
    builder=build_loss_with_grad,
    fused_op=CrossEntropyWithGradOp,
)

# ----------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------


def build_attention(
    m: Match,
    scores: Operation,
    scale: Operation,
    mask: Operation | None,
    softmax: Operation,
    dropout: Operation | None,
    values: Operation,
) -> Built:
    """scaled_dot_product_attention(q, k, v) from the chain: q and k of the scores'
    product, v of the values' product, the scale's factor, causal iff the mask step is
    present, dropout's p, seed and offset; the lse result is new (it has no users)."""
    assert isinstance(scale, ScaleOp) and isinstance(values, MatmulOp)
    q, k = scores.operands
    p, seed, offset = 0.0, 0, None
    if dropout is not None:
        assert isinstance(dropout, DropoutOp)
        p, seed, offset = dropout.p.value.data, dropout.seed.value.data, dropout.offset
    op = ScaledDotProductAttentionOp(
        q, k, values.rhs, offset, mask is not None, scale.factor_value, p, seed
    )
    return Built(op, op.result, {})


def _same_keys_and_values(scores: Operation, scale: Operation, *rest: Operation | None) -> bool:
    """v has k's shape [B, H, S, d] (the fused op takes one head size)."""
    values = rest[-1]
    return values is not None and shape_of(values.operands[1].type) == shape_of(
        scores.operands[1].type
    )


# matmul(dropout?(softmax(causal_mask?(scale(matmul(q, k, transpose_b)))), axis=-1), v)
#   -> scaled_dot_product_attention(q, k, v [, offset]) causal? scale dropout_p? seed?
# Without the mask step the fused op is not causal; without the scale step nothing fuses.
ATTENTION = FusionPattern(
    name="attention",
    group="forward",
    steps=(
        Step(F.IS_GEMM_LIKE, constraints=(HeadProduct(transpose_b=True),)),
        Step(F.IS_ELEMENTWISE | F.IS_LINEAR, forbidden=F.IS_FUSED, constraints=(IsPart("scale"),)),
        Step(
            F.IS_ELEMENTWISE,
            optional=True,
            constraints=(IsPart("mask"), MasksWithMinusInfinity()),
        ),
        Step(F.IS_REDUCTION, forbidden=F.IS_LOSS, constraints=(IsPart("softmax"), OverLastAxis())),
        Step(
            F.IS_ELEMENTWISE | F.IS_STOCHASTIC,
            optional=True,
            stochastic=True,
            constraints=(IsPart("dropout"),),
        ),
        Step(F.IS_GEMM_LIKE, constraints=(HeadProduct(transpose_b=False),)),
    ),
    builder=build_attention,
    fused_op=ScaledDotProductAttentionOp,
    condition=_same_keys_and_values,
)

# ----------------------------------------------------------------------------
# attention on the heads of a packed qkv projection
# ----------------------------------------------------------------------------


def build_packed_qkv_attention(
    m: Match, attention: Operation, transpose: Operation, reshape: Operation
) -> Built:
    """packed_qkv_attention(qkv) with the attention's properties and offset: qkv and the
    head count from the layout in front of it (packed_heads), which the op absorbs; its
    out [N, T, D] replaces the reshape's result, and the lse is new (it has no users)."""
    assert isinstance(attention, ScaledDotProductAttentionOp)
    src = packed_heads(attention)
    assert src is not None  # the first step's ReadsPackedHeads
    op = PackedQKVAttentionOp(
        src.qkv,
        src.heads,
        attention.offset,
        attention.is_causal,
        attention.scale_value,
        attention.p,
        attention.seed_value,
    )
    return Built(op, op.result, {}, absorbed=src.layout)


# reshape(transpose(sdpa(heads(q), heads(k), heads(v)), [0, 2, 1, 3]), [N, T, D])
#   with q, k, v = split(qkv, axis=-1, sizes=[D, D, D]) and heads(x) = transpose(reshape(
#   x, [N, T, H, d]), [0, 2, 1, 3])  ->  packed_qkv_attention(qkv) heads = H
# Runs once the attention pattern has formed the sdpa (a later round of the pass).
PACKED_QKV_ATTENTION = FusionPattern(
    name="packed_qkv_attention",
    group="forward",
    steps=(
        Step(
            F.IS_FUSED | F.IS_REDUCTION,
            stochastic=True,
            constraints=(ReadsPackedHeads(),),
        ),
        Step(F.IS_LAYOUT, forbidden=F.IS_FUSED, constraints=(SwapsHeadsAndTime(),)),
        Step(F.IS_LAYOUT, forbidden=F.IS_FUSED, constraints=(MergesHeads(),)),
    ),
    builder=build_packed_qkv_attention,
    fused_op=PackedQKVAttentionOp,
)

# ----------------------------------------------------------------------------
# residual add -> layer norm
# ----------------------------------------------------------------------------


def build_add_layer_norm(m: Match, add: Operation, norm: Operation) -> Built:
    """add_layer_norm(x, r, weight, bias, eps): the add's operands, the norm's parameters;
    the sum is re-exported (the residual stream reads it) and mean, rstd replace the
    norm's."""
    assert isinstance(norm, LayerNormOp)
    x, r = add.operands
    op = AddLayerNormOp(x, r, norm.weight, norm.bias, norm.eps_value)
    return Built(op, op.result, {"sum": op.sum}, rest=(op.mean, op.rstd))


# layer_norm(add(x, r)) -> add_layer_norm(x, r) -> (sum, y, mean, rstd); the sum keeps its
# other users (the residual stream) through the fused op's first result.
ADD_LAYER_NORM = FusionPattern(
    name="add_layer_norm",
    group="forward",
    steps=(
        Step(F.IS_ELEMENTWISE | F.IS_LINEAR, forbidden=F.IS_FUSED, constraints=(IsResidualAdd(),)),
        Step(
            F.IS_NORMALIZATION,
            forbidden=F.IS_FUSED,
            exports_input="sum",
            constraints=(HasResidualForm(),),
        ),
    ),
    builder=build_add_layer_norm,
    fused_op=AddLayerNormOp,
)

# ----------------------------------------------------------------------------
# layer norm gradient -> the residual stream's gradient add
# ----------------------------------------------------------------------------


def build_add_layer_norm_grad(m: Match, norm_grad: Operation, add: Operation) -> Built:
    """add_layer_norm_grad(dy, dr, x, mean, rstd, weight): the norm gradient's operands and
    dr, the add's other operand; its dx replaces the add's sum and its dweight, dbias
    the norm gradient's (the step's replaces_rest)."""
    assert isinstance(norm_grad, LayerNormGradOp)
    dx = norm_grad.grad_input
    dr = add.operands[1] if add.operands[0] is dx else add.operands[0]
    op = AddLayerNormGradOp(
        norm_grad.grad,
        dr,
        norm_grad.input,
        norm_grad.mean,
        norm_grad.rstd,
        norm_grad.weight,
        with_bias=norm_grad.grad_bias is not None,
    )
    replaced = tuple(zip(norm_grad.results[1:], op.results[1:], strict=True))
    return Built(op, op.grad_input, {}, replaced=replaced)


def _residual_grad_add(via_operand: int, name: str) -> FusionPattern:
    """add(dr, layer_norm_grad#dx) with dx at the add's operand `via_operand`."""
    return FusionPattern(
        name=name,
        group="backward",
        steps=(
            Step(
                F.IS_BACKWARD | F.IS_NORMALIZATION,
                forbidden=F.IS_FUSED,
                constraints=(HasResidualGradForm(),),
            ),
            Step(
                F.IS_ELEMENTWISE | F.IS_LINEAR,
                forbidden=F.IS_FUSED,
                via_operand=via_operand,
                replaces_rest=True,
                constraints=(IsResidualGradAdd(),),
            ),
        ),
        builder=build_add_layer_norm_grad,
        fused_op=AddLayerNormGradOp,
    )


# add(dr, layer_norm_grad(dy, x, ...)#dx) -> add_layer_norm_grad(dy, dr, x, ...): the
# gradient of a residual stream is its skip path's plus the norm's dx (add_layer_norm's
# VJP emits add(ds, dx)); the kernel adds dr as it stores dx, so dx is never stored
# alone. Runs after aicfc-expand-backward; dw and db keep their users.
LAYER_NORM_GRAD_ADD = _residual_grad_add(1, "layer_norm_grad_add")
LAYER_NORM_GRAD_ADD_LHS = _residual_grad_add(0, "layer_norm_grad_add_lhs")
"""The same with dx the add's first operand (an accumulation in the other order)."""

# ----------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------

FUSION_PATTERNS: tuple[FusionPattern, ...] = (
    ATTENTION,
    PACKED_QKV_ATTENTION,
    GEMM_BIAS_ACT,
    ADD_LAYER_NORM,
    ACT_GRAD_BIAS_GRAD,
    GEMM_EPILOGUE_GRAD,
    LOSS_WITH_GRAD,
    LAYER_NORM_GRAD_ADD,
    LAYER_NORM_GRAD_ADD_LHS,
)
"""Every pattern, tried in this order at each op (block order)."""

PATTERN_GROUPS: dict[str, tuple[FusionPattern, ...]] = {
    "all": FUSION_PATTERNS,
    "forward": tuple(p for p in FUSION_PATTERNS if p.group == "forward"),
    "backward": tuple(p for p in FUSION_PATTERNS if p.group == "backward"),
}
"""Values of the pass option `patterns`."""
