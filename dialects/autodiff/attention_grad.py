"""The backward of fused attention: autodiff.scaled_dot_product_attention_grad and
autodiff.packed_qkv_attention_grad."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.checks import verify_attention
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.attention import (
    AttentionBase,
    PackedHeadsBase,
    lse_types,
    verify_packed_qkv,
)
from aicfc.dialects.tensors import ranked, require_result

F = OpFlag


class AttentionGradBase(AttentionBase):
    """What the attention gradient ops share: their traits (irdl includes a base class's
    traits_def in each op) and their FLOPs."""

    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_BACKWARD | F.IS_FUSED | F.IS_REDUCTION,
            differentiable=False,
            why_not="second-order differentiation of attention is not supported",
        ),
    )

    def flops(self) -> int:
        """10 B H T S d for the five products q k^T (recomputing P), dout v^T, Pd^T dout,
        dS k and dS^T q (2.5 times the forward's 4 B H T S d, as FlashAttention-2 counts
        them), plus about 8 per score for the mask, exp, dropout and dS."""
        b, h, t, s, d = self.attention_shape()
        return 10 * b * h * t * s * d + 8 * b * h * t * s


@irdl_op_definition
class ScaledDotProductAttentionGradOp(AttentionGradBase):
    """dq, dk, dv of graph.scaled_dot_product_attention, the composite of its parts with
    the probabilities recomputed from the saved row log-sum-exp (FlashAttention-2's
    backward, Dao 2023, Algorithm 2):

        P = exp(scale q k^T - lse) (masked: 0),  Pd = P * M / (1 - p)  (M: dropout's keep
        mask, the forward's; Pd = P without dropout),  Delta = rowsum(dout * out),
        dv = Pd^T dout,  dP = (dout v^T) * M / (1 - p),  dS = P * (dP - Delta),
        dq = scale dS k,  dk = scale dS^T q.

    Saved from the forward: q, k, v, out and lse, never the [B, H, T, S] probabilities.
    Operands dout, q, out [B, H, T, d], k, v [B, H, S, d], lse [B, H, T] and the Philox
    offset (with dropout); the properties are the forward's.

    ```mlir
    %dq, %dk, %dv = autodiff.scaled_dot_product_attention_grad %do, %q, %k, %v, %o, %lse
        causal scale = 2.500000e-01 : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
        tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
        -> (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
    ```
    """

    name = "autodiff.scaled_dot_product_attention_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    grad = operand_def(TensorType)
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    out = operand_def(TensorType)
    lse = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    grad_q = result_def(TensorType)
    grad_k = result_def(TensorType)
    grad_v = result_def(TensorType)
    assembly_format = (
        "$grad `,` $q `,` $k `,` $v `,` $out `,` $lse (`offset` $offset^)? "
        "(`causal` $causal^)? `scale` `=` $scale (`dropout_p` `=` $dropout_p^)? "
        "(`seed` `=` $seed^)? attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        grad: SSAValue,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        out: SSAValue,
        lse: SSAValue,
        offset: SSAValue | None = None,
        causal: bool = True,
        scale: float | None = None,
        dropout_p: float = 0.0,
        seed: int = 0,
    ):
        d = ranked(self.name, "q", q).get_shape()[-1]
        super().__init__(
            operands=[grad, q, k, v, out, lse, [offset] if offset is not None else []],
            result_types=[q.type, k.type, v.type],
            properties=self.attention_properties(d, causal, scale, dropout_p, seed),
        )

    def verify_(self) -> None:
        qt, lse = verify_attention(self.name, self.q, self.k, self.v)
        self.verify_properties(self.offset)
        for what, v in (("grad", self.grad), ("out", self.out)):
            if ranked(self.name, what, v) != qt:
                raise VerifyException(f"{self.name}: {what} must have q's type {qt}, got {v.type}")
        if ranked(self.name, "lse", self.lse) != lse:
            raise VerifyException(f"{self.name}: lse must be {lse}, got {self.lse.type}")
        require_result(self.name, self.grad_q.type, qt)
        require_result(self.name, self.grad_k.type, ranked(self.name, "k", self.k))
        require_result(self.name, self.grad_v.type, ranked(self.name, "v", self.v))


@irdl_op_definition
class PackedQKVAttentionGradOp(PackedHeadsBase, AttentionGradBase):
    """dqkv of graph.packed_qkv_attention: scaled_dot_product_attention_grad's dq, dk, dv
    of the heads (the same math), written straight into the packed layout of qkv, i.e.
    concat([merge(dq), merge(dk), merge(dv)], axis=-1) with merge(x) = reshape(transpose(
    x, [0, 2, 1, 3]), [N, T, D]).

    Operands dout and out [N, T, D], qkv [N, T, 3D], lse [N, H, T] and the Philox offset
    (with dropout); the result grad_qkv has qkv's type; the properties are the forward's.

    ```mlir
    %dqkv = autodiff.packed_qkv_attention_grad %do, %qkv, %o, %lse heads = 2 causal
        scale = 2.500000e-01 : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>,
        tensor<2x2x8xf32>) -> tensor<2x8x96xf32>
    ```
    """

    name = "autodiff.packed_qkv_attention_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    grad = operand_def(TensorType)
    qkv = operand_def(TensorType)
    out = operand_def(TensorType)
    lse = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    grad_qkv = result_def(TensorType)
    QKV_OPERAND: ClassVar[int] = 1
    assembly_format = (
        "$grad `,` $qkv `,` $out `,` $lse (`offset` $offset^)? `heads` `=` $num_heads "
        "(`causal` $causal^)? `scale` `=` $scale (`dropout_p` `=` $dropout_p^)? "
        "(`seed` `=` $seed^)? attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        grad: SSAValue,
        qkv: SSAValue,
        out: SSAValue,
        lse: SSAValue,
        num_heads: int,
        offset: SSAValue | None = None,
        causal: bool = True,
        scale: float | None = None,
        dropout_p: float = 0.0,
        seed: int = 0,
    ):
        d = ranked(self.name, "qkv", qkv).get_shape()[-1] // (3 * num_heads)
        props = self.attention_properties(d, causal, scale, dropout_p, seed)
        super().__init__(
            operands=[grad, qkv, out, lse, [offset] if offset is not None else []],
            result_types=[qkv.type],
            properties={**props, "num_heads": IntegerAttr(num_heads, i64)},
        )

    def verify_(self) -> None:
        out, lse = verify_packed_qkv(self.name, self.qkv, self.heads)
        self.verify_properties(self.offset)
        for what, v in (("grad", self.grad), ("out", self.out)):
            if ranked(self.name, what, v) != out:
                raise VerifyException(f"{self.name}: {what} must be {out}, got {v.type}")
        allowed = lse_types(lse)
        if ranked(self.name, "lse", self.lse) not in allowed:
            raise VerifyException(
                f"{self.name}: lse must be {' or '.join(map(str, allowed))}, got {self.lse.type}"
            )
        require_result(self.name, self.grad_qkv.type, ranked(self.name, "qkv", self.qkv))
