"""Backward primitives of graph ops that are neither activations nor losses.

softmax_grad, dropout_grad, epilogue_grad (the backward of a GEMM epilogue) and
gemm_epilogue_grad (a product with that backward as its epilogue); the
activations' gradient ops live with their forward ops (dialects/graph/activations.py)
and the losses' in loss_grads.py.
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
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS, one_of
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo, op_info
from aicfc.dialects.graph import ActivationAttr
from aicfc.dialects.graph.activations import ACTIVATIONS, Activation
from aicfc.dialects.graph.base import unit_flag
from aicfc.dialects.tensors import (
    axis_in_range,
    fmt_shape,
    matmul_shape,
    ranked,
    require_float,
    require_result,
    require_same_dtype,
    tensor,
    verify_rng_offset,
)

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
        Pure(), OpInfo(F.IS_BACKWARD | F.IS_FUSED | F.IS_ACTIVATION_GRAD | F.IS_REDUCTION)
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
        if len(g.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: grad must be rank 2 [M, N], got {fmt_shape(g.get_shape())}"
            )
        if g != s:
            raise VerifyException(f"{self.name}: grad {g} and saved {s} must have one type")
        if self.act.data.value not in EPILOGUE_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: act must be {one_of(EPILOGUE_ACTIVATIONS)} (for none, dZ = dY: "
                "use graph.reduce_sum)"
            )
        require_result(self.name, self.grad_pre_act.type, g)
        require_result(self.name, self.grad_bias.type, tensor((g.get_shape()[1],), g.element_type))

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
class GemmEpilogueGradOp(AicfcOp):
    """A product whose epilogue is epilogue_grad: dY = op(A) @ op(B), then
    dZ = dY * act'(saved) and dbias = sum over rows of dZ (cuBLASLt's DRELU_BGRAD and
    DGELU_BGRAD epilogues).

    The dX product of the next layer and the backward epilogue of this one, as
    aicfc-fuse forms it from a matmul whose only user is an epilogue_grad
    (passes/fusion/patterns.py): dY is never stored. op(A) is [M, K], op(B)
    [K, N]; `saved` [M, N] is what the activation's gradient reads (Y for relu, Z
    for gelu); dZ is [M, N] and dbias [N]. Made after differentiation, so it has no
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
        require_result(self.name, self.grad_bias.type, tensor((n,), a.element_type))

    def flops(self) -> int:
        m, n, k = self.mnk()
        return 2 * m * n * k + EpilogueGradOp.FLOPS_PER_ELEMENT * m * n
