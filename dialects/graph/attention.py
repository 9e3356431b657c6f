"""Attention: graph.causal_mask and the fused graph.scaled_dot_product_attention.

The unfused form of attention is a chain of plain ops (torch's
scaled_dot_product_attention, written out; Vaswani et al. 2017, "Attention is all you
need", eq. 1):

    s = graph.matmul q, k transpose_b        [B, H, T, S]
    s = graph.scale s factor = 1/sqrt(d)
    s = graph.causal_mask s                   (decoder self-attention only)
    p = graph.softmax s axis = -1
    p = graph.dropout p, offset               (training with dropout only)
    o = graph.matmul p, v                     [B, H, T, d]

aicfc-fuse turns the chain into one graph.scaled_dot_product_attention (the fusion
table's `attention` pattern), whose backward (autodiff.scaled_dot_product_attention_grad)
recomputes the probabilities from the saved row log-sum-exp, as FlashAttention does
(Dao et al. 2022; Dao 2023), so no [T, S] tensor is saved between the passes.

In a transformer block q, k and v are head views of one packed projection: qkv [N, T,
3D] split into three [N, T, D], each reshaped to [N, T, H, d] and transposed to [N, H, T,
d], and the output goes back by the inverse transpose and a reshape to [N, T, D]. The
fusion table's `packed_qkv_attention` pattern folds those layout ops into
graph.packed_qkv_attention, which reads the heads in place (strided) from qkv and writes
[N, T, D] directly; its backward writes the packed gradient [N, T, 3D], so neither the
split, the transposes nor the concat of the three gradients runs.
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.checks import verify_attention, verify_attention_properties
from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp, statistics_used, unit_flag
from aicfc.dialects.params import ParamValue
from aicfc.dialects.tensors import fmt_shape, numel, ranked, require_float, require_result, tensor
from aicfc.dialects.wide_results import WIDE_FROM, result_element

F = OpFlag

LSE_NOT_DIFFERENTIABLE = (
    "its lse result is the row log-sum-exp saved for the backward; differentiating "
    "through it is not supported"
)


@irdl_op_definition
class CausalMaskOp(GraphOp):
    """y[..., i, j] = fill if j > i else x[..., i, j] over the last two dims [T, S].

    Top-left aligned, as torch.tril and torch's scaled_dot_product_attention(is_causal=
    True): query i sees keys 0..i. `fill` defaults to -inf (absent from the IR), so a
    softmax after it gives masked keys probability 0; its VJP is the same op with fill
    0.0 on dy (a masked score gets no gradient).

    ```mlir
    %m = graph.causal_mask %s : tensor<2x4x8x8xf32>
    %dm = graph.causal_mask %ds fill = 0.000000e+00 : tensor<2x4x8x8xf32>
    ```
    """

    name = "graph.causal_mask"
    DISPLAY_NAME: ClassVar[str] = "CausalMask"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    fill = opt_prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.COLLAPSES_INFO, OUT0_IN0))
    assembly_format = "$input (`fill` `=` $fill^)? attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, fill: float = -math.inf):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"fill": None if fill == -math.inf else FloatAttr(fill, Float64Type())},
        )

    @property
    def fill_value(self) -> float:
        return -math.inf if self.fill is None else float(self.fill.value.data)

    def kernel_params(self) -> dict[str, ParamValue]:
        return {"fill": self.fill_value}

    def semantic_flags(self) -> OpFlag:
        # with fill 0 (the VJP's form) it is a linear projection
        f = super().semantic_flags()
        return f | F.IS_LINEAR if self.fill_value == 0.0 else f

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_float(self.name, "input", x)
        if len(x.get_shape()) < 2:
            raise VerifyException(
                f"{self.name}: input must have rank >= 2 ([..., T, S]), got "
                f"{fmt_shape(x.get_shape())}"
            )
        if math.isnan(self.fill_value):
            raise VerifyException(f"{self.name}: fill must not be nan")


class AttentionBase(AicfcOp):
    """Properties shared by the attention op and its gradient: causal, scale, dropout."""

    causal = opt_prop_def(UnitAttr)
    scale = prop_def(FloatAttr[Float64Type])
    dropout_p = opt_prop_def(FloatAttr[Float64Type])
    seed = opt_prop_def(IntegerAttr[I64])

    @staticmethod
    def attention_properties(
        d: int, causal: bool, scale: float | None, dropout_p: float, seed: int
    ) -> dict[str, Attribute | None]:
        return {
            "causal": unit_flag(causal),
            "scale": FloatAttr(1.0 / math.sqrt(d) if scale is None else scale, Float64Type()),
            "dropout_p": FloatAttr(dropout_p, Float64Type()) if dropout_p else None,
            "seed": IntegerAttr(seed, i64) if dropout_p else None,
        }

    @property
    def is_causal(self) -> bool:
        return self.causal is not None

    @property
    def scale_value(self) -> float:
        return float(self.scale.value.data)

    @property
    def p(self) -> float:
        return 0.0 if self.dropout_p is None else float(self.dropout_p.value.data)

    @property
    def seed_value(self) -> int:
        return 0 if self.seed is None else int(self.seed.value.data)

    def attention_shape(self) -> tuple[int, int, int, int, int]:
        """(B, H, T, S, d) of q [B, H, T, d] and k [B, H, S, d]."""
        b, h, t, d = ranked(self.name, "q", self.operands[0]).get_shape()
        s = ranked(self.name, "k", self.operands[1]).get_shape()[2]
        return b, h, t, s, d

    def verify_properties(self, offset: SSAValue | None) -> None:
        seed_without_p = self.seed is not None and self.dropout_p is None
        verify_attention_properties(self.name, offset, self.scale_value, self.p, seed_without_p)


class PackedHeadsBase(AttentionBase):
    """The head count of the packed attention ops, whose qkv operand (operand QKV_OPERAND)
    is [N, T, 3 H d]."""

    QKV_OPERAND: ClassVar[int] = 0
    num_heads = prop_def(IntegerAttr[I64])

    @property
    def heads(self) -> int:
        return int(self.num_heads.value.data)

    def attention_shape(self) -> tuple[int, int, int, int, int]:
        """(N, H, T, T, d) of qkv [N, T, 3 H d]."""
        n, t, d3 = ranked(self.name, "qkv", self.operands[self.QKV_OPERAND]).get_shape()
        return n, self.heads, t, t, d3 // (3 * self.heads)


class AttentionForwardBase(GraphOp, AttentionBase):
    """What the forward attention ops share: stochastic only with dropout, their FLOPs,
    and no gradient through the lse result (result 1)."""

    def semantic_flags(self) -> OpFlag:
        f = super().semantic_flags()
        return f if self.p > 0 else f & ~F.IS_STOCHASTIC

    def flops(self) -> int:
        """4 B H T S d for the two products (q k^T and P v; 4 B H T^2 d when S = T), plus
        about 5 per score for the scale, mask, softmax and dropout."""
        b, h, t, s, d = self.attention_shape()
        return 4 * b * h * t * s * d + 5 * b * h * t * s

    def why_not_differentiable(self) -> str | None:
        if statistics_used((self.results[1],)):
            return LSE_NOT_DIFFERENTIABLE
        return super().why_not_differentiable()


@irdl_op_definition
class ScaledDotProductAttentionOp(AttentionForwardBase):
    """out = dropout(softmax(scale q k^T [causal mask])) v, and the row log-sum-exp.

    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=scale, dropout_p=dropout_p). q [B, H, T, d], k and v [B, H, S, d]; out
    [B, H, T, d] and lse [B, H, T] = log(sum_j exp(scale q_i . k_j)) over the unmasked j
    (natural log, before dropout), both in q's dtype. `scale` defaults to 1/sqrt(d) and
    is always in the IR; `causal` masks key j > query i (top-left, as graph.causal_mask).
    Dropout (dropout_p > 0, with the Philox `offset` operand and `seed`) keeps element
    (b, h, i, j) of the flattened [B, H, T, S] probabilities by graph.dropout's mask
    (runtime/reference.py dropout_keep) and scales the kept ones by 1/(1 - p): the op
    equals the unfused chain with graph.dropout on the probabilities.

    ```mlir
    %o, %lse = graph.scaled_dot_product_attention %q, %k, %v causal scale = 2.500000e-01
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
        -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
    ```
    """

    name = "graph.scaled_dot_product_attention"
    DISPLAY_NAME: ClassVar[str] = "ScaledDotProductAttention"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    result = result_def(TensorType)
    lse = result_def(TensorType)
    traits = traits_def(
        Pure(),
        OpInfo(F.IS_FUSED | F.IS_REDUCTION | F.COLLAPSES_INFO | F.IS_STOCHASTIC),
    )
    assembly_format = (
        "$q `,` $k `,` $v (`offset` $offset^)? (`causal` $causal^)? `scale` `=` $scale "
        "(`dropout_p` `=` $dropout_p^)? (`seed` `=` $seed^)? attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        offset: SSAValue | None = None,
        causal: bool = True,
        scale: float | None = None,
        dropout_p: float = 0.0,
        seed: int = 0,
    ):
        t = ranked(self.name, "q", q)
        shape = t.get_shape()
        super().__init__(
            operands=[q, k, v, [offset] if offset is not None else []],
            result_types=[t, tensor(shape[:3], t.element_type)],
            properties=self.attention_properties(shape[-1], causal, scale, dropout_p, seed),
        )

    def verify_(self) -> None:
        qt, lse = verify_attention(self.name, self.q, self.k, self.v)
        self.verify_properties(self.offset)
        require_result(self.name, self.result.type, qt)
        require_result(self.name, self.lse.type, lse)


@irdl_op_definition
class PackedQKVAttentionOp(PackedHeadsBase, AttentionForwardBase):
    """graph.scaled_dot_product_attention on the heads of a packed projection, in place.

    qkv [N, T, 3D] holds q, k, v at columns [0, D), [D, 2D), [2D, 3D) and head h of each
    at columns [h d, (h + 1) d) of its part (d = D / num_heads): the op equals

        q, k, v = split(qkv, axis=-1, sizes=[D, D, D])
        q_h = transpose(reshape(q, [N, T, H, d]), [0, 2, 1, 3])      (same for k, v)
        o, lse = scaled_dot_product_attention(q_h, k_h, v_h, ...)
        out = reshape(transpose(o, [0, 2, 1, 3]), [N, T, D])

    with out [N, T, D] (heads merged, nanoGPT's y.transpose(1, 2).view(N, T, D)) and lse
    [N, H, T]. Causal, scale, dropout (the mask of the [N, H, T, T] probabilities) are
    scaled_dot_product_attention's.

    ```mlir
    %o, %lse = graph.packed_qkv_attention %qkv heads = 2 causal scale = 2.500000e-01
        : (tensor<2x8x96xf32>) -> (tensor<2x8x32xf32>, tensor<2x2x8xf32>)
    ```
    """

    name = "graph.packed_qkv_attention"
    DISPLAY_NAME: ClassVar[str] = "PackedQKVAttention"
    qkv = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    result = result_def(TensorType)
    lse = result_def(TensorType)
    traits = traits_def(
        Pure(),
        OpInfo(F.IS_FUSED | F.IS_REDUCTION | F.COLLAPSES_INFO | F.IS_STOCHASTIC, wide_results=(1,)),
    )
    assembly_format = (
        "$qkv (`offset` $offset^)? `heads` `=` $num_heads (`causal` $causal^)? `scale` `=` "
        "$scale (`dropout_p` `=` $dropout_p^)? (`seed` `=` $seed^)? attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        qkv: SSAValue,
        num_heads: int,
        offset: SSAValue | None = None,
        causal: bool = True,
        scale: float | None = None,
        dropout_p: float = 0.0,
        seed: int = 0,
    ):
        t = ranked(self.name, "qkv", qkv)
        n, tt, d3 = t.get_shape()
        d = d3 // 3
        props = self.attention_properties(d // num_heads, causal, scale, dropout_p, seed)
        super().__init__(
            operands=[qkv, [offset] if offset is not None else []],
            result_types=[
                tensor((n, tt, d), t.element_type),
                tensor((n, num_heads, tt), t.element_type),
            ],
            properties={**props, "num_heads": IntegerAttr(num_heads, i64)},
        )

    def verify_(self) -> None:
        out, lse = verify_packed_qkv(self.name, self.qkv, self.heads)
        self.verify_properties(self.offset)
        require_result(self.name, self.result.type, out)
        require_result(
            self.name,
            self.lse.type,
            tensor(lse.get_shape(), result_element(self, 1, lse.element_type)),
        )


def verify_packed_qkv(
    op_name: str, qkv: SSAValue, heads: int
) -> tuple[TensorType[Attribute], TensorType[Attribute]]:
    """Check qkv [N, T, 3 H d] (float, H = heads >= 1); returns the types of out [N, T, H d]
    and lse [N, H, T] in qkv's element type (over bf16/f16 qkv the lse may be float32
    instead: graph.packed_qkv_attention's wide result, see `lse_types`)."""
    t = ranked(op_name, "qkv", qkv)
    require_float(op_name, "qkv", t)
    shape = t.get_shape()
    if heads < 1:
        raise VerifyException(f"{op_name}: heads must be >= 1, got {heads}")
    if len(shape) != 3 or shape[2] % (3 * heads) or shape[2] == 0:
        raise VerifyException(
            f"{op_name}: qkv must be [N, T, 3 D] with D a multiple of heads = {heads} "
            f"(q, k, v of {heads} heads each), got {fmt_shape(shape)}"
        )
    n, tt, d3 = shape
    return tensor((n, tt, d3 // 3), t.element_type), tensor((n, heads, tt), t.element_type)


def lse_types(lse: TensorType[Attribute]) -> tuple[TensorType[Attribute], ...]:
    """The lse types packed attention may have for `lse` of qkv's element type: that one,
    and float32 where qkv is bf16/f16 (the row statistics kept in float32, as the
    low-precision kernels write them: dialects/wide_results.py)."""
    if isinstance(lse.element_type, WIDE_FROM):
        return (lse, tensor(lse.get_shape(), Float32Type()))
    return (lse,)


def score_elements(op: AttentionBase) -> int:
    """B H T S: the elements of the score matrix an attention op never stores."""
    b, h, t, s, _ = op.attention_shape()
    return numel((b, h, t, s))
