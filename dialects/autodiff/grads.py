"""Backward primitives of graph ops that are neither activations nor losses.

softmax_grad, dropout_grad, epilogue_grad (the backward of a GEMM epilogue),
gemm_epilogue_grad (a product with that backward as its epilogue), embedding_grad (a
deterministic scatter-add), layer_norm_grad and add_layer_norm_grad (layer_norm_grad
with the residual stream's gradient added to dx: made by aicfc-fuse); the activations'
gradient ops live with their forward ops (dialects/graph/activations.py), the losses' in
loss_grads.py and attention's in attention_grad.py.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedResultSegments,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS, one_of
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.checks import verify_ids, verify_layer_norm
from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo, op_info
from aicfc.dialects.graph import ActivationAttr
from aicfc.dialects.graph.activations import ACTIVATIONS, Activation
from aicfc.dialects.graph.base import unit_flag
from aicfc.dialects.tensors import (
    axis_in_range,
    fmt_shape,
    matmul_shape,
    numel,
    ranked,
    require_float,
    require_result,
    require_same_dtype,
    tensor,
    verify_rng_offset,
)
from aicfc.dialects.wide_results import result_element

F = OpFlag


@irdl_op_definition
class SoftmaxGradOp(AicfcOp):
    """dx = y * (dy - sum(dy * y, axis)), with y the softmax's output.

    ```mlir
    %dx = autodiff.softmax_grad %dy, %y axis = 1 : tensor<8x10xf32>
    ```
    """

    name = "autodiff.softmax_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    output = operand_def(T)
    result = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_REDUCTION, OUT0_IN0))
    assembly_format = "$grad `,` $output `axis` `=` $axis attr-dict `:` type($result)"

    def __init__(self, grad: SSAValue, output: SSAValue, axis: int):
        super().__init__(
            operands=[grad, output],
            result_types=[grad.type],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        t = ranked(self.name, "grad", self.grad)
        require_float(self.name, "grad", t)
        axis_in_range(self.name, self.axis.value.data, len(t.get_shape()))


@irdl_op_definition
class DropoutGradOp(AicfcOp):
    """dx = dy * mask / (1 - p), recomputing the forward's Philox mask from (seed, offset).

    ```mlir
    %dx = autodiff.dropout_grad %dy, %offset p = 0.1 seed = 7 : tensor<8x16xf32>, tensor<i64>
    ```
    """

    name = "autodiff.dropout_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    offset = operand_def(TensorType)
    result = result_def(T)
    p = prop_def(FloatAttr[Float64Type])
    seed = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_ELEMENTWISE, OUT0_IN0))
    assembly_format = (
        "$grad `,` $offset `p` `=` $p `seed` `=` $seed attr-dict `:` type($grad) `,` type($offset)"
    )

    def __init__(self, grad: SSAValue, offset: SSAValue, p: float, seed: int):
        super().__init__(
            operands=[grad, offset],
            result_types=[grad.type],
            properties={"p": FloatAttr(p, Float64Type()), "seed": IntegerAttr(seed, i64)},
        )

    def verify_(self) -> None:
        require_float(self.name, "grad", ranked(self.name, "grad", self.grad))
        verify_rng_offset(self.name, self.offset)
        p = self.p.value.data
        if not 0.0 <= p < 1.0:
            raise VerifyException(f"{self.name}: p must be in [0, 1), got {p}")


@irdl_op_definition
class EpilogueGradOp(AicfcOp):
    """The backward of a GEMM epilogue: dZ = dY * act'(saved), dbias = sum over rows of dZ.

    dY, saved and dZ are [..., M, N] (a layer on [B, T, D] keeps its leading dims); dbias
    [N] sums dZ over every leading axis, in dY's dtype, or f32 over a bf16/f16 dY (the
    fp32 sum written unrounded, dialects/wide_results.py).

    `act` is an activation with an epilogue form (dialects/activation_table.py);
    `saved` is what its gradient op reads: the forward output Y for relu
    (relu'(z) = y > 0), the pre-activation Z for gelu. dZ keeps the forward output's
    layout and the bias gradient reduces dZ itself, never a transpose
    (docs/design.md#composite-backward).

    ```mlir
    %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
                 : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
    ```
    """

    name = "autodiff.epilogue_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    grad = operand_def(TensorType)
    saved = operand_def(TensorType)
    grad_pre_act = result_def(TensorType)
    grad_bias = result_def(TensorType)
    act = prop_def(ActivationAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_BACKWARD | F.IS_FUSED | F.IS_ACTIVATION_GRAD | F.IS_REDUCTION, wide_results=(1,)
        ),
    )
    assembly_format = (
        "$grad `,` $saved `act` `=` $act attr-dict `:` functional-type(operands, results)"
    )

    def __init__(self, grad: SSAValue, saved: SSAValue, act: Activation):
        t = ranked(self.name, "grad", grad)
        n = t.get_shape()[-1]
        super().__init__(
            operands=[grad, saved],
            result_types=[t, tensor((n,), t.element_type)],
            properties={"act": ActivationAttr(act)},
        )

    def verify_(self) -> None:
        g = ranked(self.name, "grad", self.grad)
        s = ranked(self.name, "saved", self.saved)
        require_float(self.name, "grad", g)
        if len(g.get_shape()) < 2:
            raise VerifyException(
                f"{self.name}: grad must have rank >= 2 [..., M, N], got {fmt_shape(g.get_shape())}"
            )
        if g != s:
            raise VerifyException(f"{self.name}: grad {g} and saved {s} must have one type")
        if self.act.data.value not in EPILOGUE_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: act must be {one_of(EPILOGUE_ACTIVATIONS)} (for none, dZ = dY: "
                "use graph.reduce_sum)"
            )
        require_result(self.name, self.grad_pre_act.type, g)
        db = result_element(self, 1, g.element_type)
        require_result(self.name, self.grad_bias.type, tensor((g.get_shape()[-1],), db))

    def why_not_differentiable(self) -> str | None:
        # Its VJP is its activation gradient's (passes/vjp_rules.py), so it is
        # differentiable where that op is (relu_grad; not gelu_grad).
        act = self.act.data
        info = op_info(ACTIVATIONS[act].grad) if act in ACTIVATIONS else None
        if info is not None and not info.differentiable:
            return (
                f"with act {act.value}, its second derivative needs {act.value}'' "
                "(no op computes it)"
            )
        return super().why_not_differentiable()


@irdl_op_definition
class EmbeddingGradOp(AicfcOp):
    """dweight[v, :] = sum of dy[n, :] over the positions n with ids[n] = v (zero elsewhere).

    The backward of graph.embedding: a scatter-add of dy [..., D] into a [V, D] table,
    V = `num_embeddings`. Deterministic: each row sums its positions in increasing n
    (np.add.at's order; kernels/embedding.cu keeps it for one chunk of positions and a
    fixed order across chunks), so a step gives the same bits every run.

    ```mlir
    %dw = autodiff.embedding_grad %dy, %ids num_embeddings = 65
        : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<65x16xf32>
    ```
    """

    name = "autodiff.embedding_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    grad = operand_def(TensorType)
    ids = operand_def(TensorType)
    result = result_def(TensorType)
    num_embeddings = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_LINEAR | F.IS_REDUCTION))
    assembly_format = (
        "$grad `,` $ids `num_embeddings` `=` $num_embeddings attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(self, grad: SSAValue, ids: SSAValue, num_embeddings: int):
        t = ranked(self.name, "grad", grad)
        super().__init__(
            operands=[grad, ids],
            result_types=[tensor((num_embeddings, t.get_shape()[-1]), t.element_type)],
            properties={"num_embeddings": IntegerAttr(num_embeddings, i64)},
        )

    def verify_(self) -> None:
        g = ranked(self.name, "grad", self.grad)
        require_float(self.name, "grad", g)
        i = verify_ids(self.name, self.ids)
        if tuple(g.get_shape()[:-1]) != tuple(i.get_shape()) or not g.get_shape():
            raise VerifyException(
                f"{self.name}: grad must be [..., D] with the ids' shape "
                f"{fmt_shape(i.get_shape())} in front, got {fmt_shape(g.get_shape())}"
            )
        v = self.num_embeddings.value.data
        if v <= 0:
            raise VerifyException(f"{self.name}: num_embeddings must be positive, got {v}")
        require_result(self.name, self.result.type, tensor((v, g.get_shape()[-1]), g.element_type))

    def flops(self) -> int:
        return numel(ranked(self.name, "grad", self.grad).get_shape())  # one add per element


@irdl_op_definition
class LayerNormGradOp(AicfcOp):
    """dx, dweight, dbias of y = layer_norm(x) from the saved statistics (torch's backward).

    With xhat = (x - mean) rstd and g = dy * weight (g = dy without a weight):
    dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)), dweight = sum_rows(dy xhat),
    dbias = sum_rows(dy). dy and x [..., D], mean and rstd [...], weight [D] (present iff
    the forward had one); the results dweight and dbias are present iff the forward had
    a weight and a bias (a bias needs a weight).

    ```mlir
    %dx, %dw, %db = autodiff.layer_norm_grad %dy, %x, %mean, %rstd weight %w
        : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>)
        -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
    """

    name = "autodiff.layer_norm_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 10
    grad = operand_def(TensorType)
    input = operand_def(TensorType)
    mean = operand_def(TensorType)
    rstd = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    grad_input = result_def(TensorType)
    grad_weight = opt_result_def(TensorType)
    grad_bias = opt_result_def(TensorType)
    irdl_options = (AttrSizedResultSegments(as_property=True),)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_BACKWARD | F.IS_NORMALIZATION | F.IS_REDUCTION,
            differentiable=False,
            why_not="second-order differentiation of layer norm is not supported",
        ),
    )
    assembly_format = (
        "$grad `,` $input `,` $mean `,` $rstd (`weight` $weight^)? attr-dict `:` "
        "`(` type(operands) `)` `->` `(` type($grad_input) (`,` type($grad_weight)^)? "
        "(`,` type($grad_bias)^)? `)`"
    )

    def __init__(
        self,
        grad: SSAValue,
        x: SSAValue,
        mean: SSAValue,
        rstd: SSAValue,
        weight: SSAValue | None = None,
        with_bias: bool = False,
    ):
        t = ranked(self.name, "grad", grad)
        param = tensor(t.get_shape()[-1:], t.element_type)
        super().__init__(
            operands=[grad, x, mean, rstd, [weight] if weight is not None else []],
            result_types=[
                t,
                [param] if weight is not None else [],
                [param] if with_bias else [],
            ],
        )

    def verify_(self) -> None:
        _verify_layer_norm_grad(self)


def _verify_layer_norm_grad(op: LayerNormGradOp | AddLayerNormGradOp) -> None:
    """The checks layer_norm_grad and add_layer_norm_grad share: grad and input one type
    [..., D], mean and rstd [...], dx that type, dweight and dbias [D] as present."""
    bias = op.grad_bias  # a bias gradient stands for a forward bias
    t, stats = verify_layer_norm(op.name, op.input, op.weight, bias)
    g = ranked(op.name, "grad", op.grad)
    if g != t:
        raise VerifyException(f"{op.name}: grad {g} and input {t} must have one type")
    for what, v in (("mean", op.mean), ("rstd", op.rstd)):
        if ranked(op.name, what, v) != stats:
            raise VerifyException(
                f"{op.name}: {what} must be {stats} (the leading dims of input {t}), got {v.type}"
            )
    require_result(op.name, op.grad_input.type, t)
    param = tensor(t.get_shape()[-1:], t.element_type)
    if (op.grad_weight is not None) != (op.weight is not None):
        raise VerifyException(
            f"{op.name}: the grad_weight result is present exactly when the weight operand is"
        )
    for r in (op.grad_weight, op.grad_bias):
        if r is not None:
            require_result(op.name, r.type, param)


@irdl_op_definition
class AddLayerNormGradOp(AicfcOp):
    """layer_norm_grad with the residual stream's gradient added to dx, in one op.

    dx = residual_grad + dx of autodiff.layer_norm_grad(dy, x, mean, rstd, weight)
    (one float add of the two values, rounded once: bit for bit the unfused add);
    dweight and dbias as layer_norm_grad's. In a residual network the gradient that
    reaches a layer norm's input is the sum of the skip path's and the norm's
    (add_layer_norm's VJP: ds + layer_norm_grad's dx); aicfc-fuse forms this op from
    that graph.add and the layer_norm_grad whose dx it alone reads
    (passes/fusion/patterns.py), so dx is stored once, not stored, read and added.
    residual_grad is [..., D] like dy. Made after differentiation, so it has no VJP.

    ```mlir
    %dx, %dw, %db = autodiff.add_layer_norm_grad %dy, %dr, %x, %mean, %rstd weight %w
        : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>,
           tensor<8xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
    """

    name = "autodiff.add_layer_norm_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 11
    grad = operand_def(TensorType)
    residual_grad = operand_def(TensorType)
    input = operand_def(TensorType)
    mean = operand_def(TensorType)
    rstd = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    grad_input = result_def(TensorType)
    grad_weight = opt_result_def(TensorType)
    grad_bias = opt_result_def(TensorType)
    irdl_options = (AttrSizedResultSegments(as_property=True),)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_BACKWARD | F.IS_FUSED | F.IS_NORMALIZATION | F.IS_REDUCTION,
            differentiable=False,
            why_not="it is made after differentiation (from layer_norm_grad and an add)",
        ),
    )
    assembly_format = (
        "$grad `,` $residual_grad `,` $input `,` $mean `,` $rstd (`weight` $weight^)? "
        "attr-dict `:` `(` type(operands) `)` `->` `(` type($grad_input) "
        "(`,` type($grad_weight)^)? (`,` type($grad_bias)^)? `)`"
    )

    def __init__(
        self,
        grad: SSAValue,
        residual_grad: SSAValue,
        x: SSAValue,
        mean: SSAValue,
        rstd: SSAValue,
        weight: SSAValue | None = None,
        with_bias: bool = False,
    ):
        t = ranked(self.name, "grad", grad)
        param = tensor(t.get_shape()[-1:], t.element_type)
        super().__init__(
            operands=[grad, residual_grad, x, mean, rstd, [weight] if weight is not None else []],
            result_types=[
                t,
                [param] if weight is not None else [],
                [param] if with_bias else [],
            ],
        )

    def verify_(self) -> None:
        _verify_layer_norm_grad(self)
        r, g = ranked(self.name, "residual_grad", self.residual_grad), self.grad.type
        if r != g:
            raise VerifyException(f"{self.name}: residual_grad {r} and grad {g} must have one type")


@irdl_op_definition
class GemmEpilogueGradOp(AicfcOp):
    """A product whose epilogue is epilogue_grad: dY = op(A) @ op(B), then
    dZ = dY * act'(saved) and dbias = sum over rows of dZ (cuBLASLt's DRELU_BGRAD and
    DGELU_BGRAD epilogues).

    The dX product of the next layer and the backward epilogue of this one, as
    aicfc-fuse forms it from a matmul whose only user is an epilogue_grad
    (passes/fusion/patterns.py): dY is never stored. op(A) is [M, K], op(B)
    [K, N]; `saved` [M, N] is what the activation's gradient reads (Y for relu, Z
    for gelu); dZ is [M, N] and dbias [N] (f32 over bf16/f16 operands where it is
    wide: dialects/wide_results.py). Made after differentiation, so it has no
    VJP of its own.

    ```mlir
    %dz, %db = autodiff.gemm_epilogue_grad %dy2, %w2, %y act = relu
                 : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<8x16xf32>)
                   -> (tensor<8x16xf32>, tensor<16xf32>)
    ```
    """

    name = "autodiff.gemm_epilogue_grad"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    saved = operand_def(TensorType)
    grad_pre_act = result_def(TensorType)
    grad_bias = result_def(TensorType)
    act = prop_def(ActivationAttr)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_BACKWARD | F.IS_FUSED | F.IS_ACTIVATION_GRAD | F.IS_REDUCTION | F.HAS_PARAM,
            differentiable=False,
            why_not="it is made after differentiation (from a product and an epilogue_grad)",
            wide_results=(1,),
        ),
    )
    assembly_format = (
        "$lhs `,` $rhs `,` $saved `act` `=` $act (`transpose_a` $transpose_a^)? "
        "(`transpose_b` $transpose_b^)? attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        saved: SSAValue,
        act: Activation,
        transpose_a: bool = False,
        transpose_b: bool = False,
    ):
        a = ranked(self.name, "lhs", lhs)
        m, n, _ = matmul_shape(
            self.name, a, ranked(self.name, "rhs", rhs), transpose_a, transpose_b
        )
        super().__init__(
            operands=[lhs, rhs, saved],
            result_types=[tensor((m, n), a.element_type), tensor((n,), a.element_type)],
            properties={
                "act": ActivationAttr(act),
                "transpose_a": unit_flag(transpose_a),
                "transpose_b": unit_flag(transpose_b),
            },
        )

    def mnk(self) -> tuple[int, int, int]:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        return matmul_shape(self.name, a, b, bool(self.transpose_a), bool(self.transpose_b))

    def verify_(self) -> None:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        s = ranked(self.name, "saved", self.saved)
        require_float(self.name, "lhs", a)
        require_same_dtype(self.name, [("lhs", a), ("rhs", b), ("saved", s)])
        m, n, _ = self.mnk()
        if tuple(s.get_shape()) != (m, n):
            raise VerifyException(
                f"{self.name}: saved must have the product's shape [{m}, {n}], got "
                f"{fmt_shape(s.get_shape())}"
            )
        if self.act.data.value not in EPILOGUE_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: act must be {one_of(EPILOGUE_ACTIVATIONS)} (for none, the "
                "product is dZ: use graph.matmul and graph.reduce_sum)"
            )
        require_result(self.name, self.grad_pre_act.type, tensor((m, n), a.element_type))
        db = result_element(self, 1, a.element_type)
        require_result(self.name, self.grad_bias.type, tensor((n,), db))

    def flops(self) -> int:
        m, n, k = self.mnk()
        return 2 * m * n * k + EpilogueGradOp.FLOPS_PER_ELEMENT * m * n
