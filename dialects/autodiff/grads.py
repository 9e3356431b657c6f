"""Backward primitives of graph ops that are neither activations nor losses.

softmax_grad, dropout_grad and epilogue_grad, the backward of a GEMM epilogue; the
activations' gradient ops live with their forward ops (dialects/graph/activations.py)
and the losses' in loss_grads.py.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I64, Float64Type, FloatAttr, IntegerAttr, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
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
from aicfc.dialects.tensors import (
    axis_in_range,
    fmt_shape,
    ranked,
    require_float,
    require_result,
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
