"""The gradients of the losses: cross_entropy_grad, the fused cross_entropy_with_grad,
mse_loss_grad."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_result_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.checks import verify_class_logits
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.tensors import (
    ranked,
    require_float,
    require_nonempty,
    require_result,
    tensor,
)

F = OpFlag


def _require_scalar_grad(op_name: str, grad: SSAValue, like: TensorType[Attribute]) -> None:
    """The incoming loss gradient: a scalar of the loss's element type."""
    g = ranked(op_name, "grad", grad)
    if g != tensor((), like.element_type):
        raise VerifyException(f"{op_name}: grad must be tensor<{like.element_type}>, got {g}")


def _verify_cross_entropy_operands(
    op_name: str, logits: SSAValue, labels: SSAValue, grad: SSAValue
) -> TensorType[Attribute]:
    """Float logits [..., C] (at least one element), i32/i64 labels [...], scalar grad;
    returns the logits type."""
    x, _ = verify_class_logits(op_name, logits, labels)
    _require_scalar_grad(op_name, grad, x)
    return x


@irdl_op_definition
class CrossEntropyGradOp(AicfcOp):
    """dlogits = (softmax(logits) - onehot(labels)) * dloss / N over logits [..., C]
    (N: the number of rows, the product of the leading dims).

    ```mlir
    %dx = autodiff.cross_entropy_grad %x, %y, %dl
            : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
    ```
    """

    name = "autodiff.cross_entropy_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 5
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.TAKES_CLASS_LABELS))
    assembly_format = (
        "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)"
    )

    def __init__(self, logits: SSAValue, labels: SSAValue, grad: SSAValue):
        super().__init__(operands=[logits, labels, grad], result_types=[logits.type])

    def verify_(self) -> None:
        x = _verify_cross_entropy_operands(self.name, self.logits, self.labels, self.grad)
        require_result(self.name, self.result.type, x)


@irdl_op_definition
class CrossEntropyWithGradOp(AicfcOp):
    """The cross-entropy loss, its gradient and the bias gradient before it, in one op.

    loss = mean_n(logsumexp(x_n) - x_n[y_n]) (graph.cross_entropy);
    grad_logits = (softmax(x) - onehot(y)) * grad / N (autodiff.cross_entropy_grad);
    grad_bias, when present, = sum over every row of grad_logits [..., C] (the bias
    gradient of the layer whose output the logits are: a reduce_sum over the leading
    axes). aicfc-fuse
    builds it from those ops after aicfc-expand-backward, so one kernel reads the
    logits once for all of them (TensorFlow's SparseSoftmaxCrossEntropyWithLogits
    likewise returns the loss with its backprop). It has no VJP: its gradient is
    one of its results.

    ```mlir
    %l, %dx, %db = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>,
                     tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<10xf32>)
    ```
    """

    name = "autodiff.cross_entropy_with_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 10
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    grad = operand_def(TensorType)
    loss = result_def(TensorType)
    grad_logits = result_def(TensorType)
    grad_bias = opt_result_def(TensorType)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_LOSS | F.IS_BACKWARD | F.IS_FUSED | F.IS_REDUCTION | F.TAKES_CLASS_LABELS,
            differentiable=False,
            why_not="it is made after differentiation; its gradient is one of its results",
        ),
    )
    assembly_format = (
        "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self, logits: SSAValue, labels: SSAValue, grad: SSAValue, with_grad_bias: bool = False
    ):
        t = ranked(self.name, "logits", logits)
        c = t.get_shape()[-1]
        super().__init__(
            operands=[logits, labels, grad],
            result_types=[
                tensor((), t.element_type),
                t,
                [tensor((c,), t.element_type)] if with_grad_bias else [],
            ],
        )

    def verify_(self) -> None:
        x = _verify_cross_entropy_operands(self.name, self.logits, self.labels, self.grad)
        require_result(self.name, self.loss.type, tensor((), x.element_type))
        require_result(self.name, self.grad_logits.type, x)
        if self.grad_bias is not None:
            c = x.get_shape()[-1]
            require_result(self.name, self.grad_bias.type, tensor((c,), x.element_type))


@irdl_op_definition
class MseLossGradOp(AicfcOp):
    """dpred = 2 * (pred - target) * dloss / numel(pred).

    ```mlir
    %dp = autodiff.mse_loss_grad %p, %t, %dl : (tensor<8x4xf32>, tensor<8x4xf32>,
            tensor<f32>) -> tensor<8x4xf32>
    ```
    """

    name = "autodiff.mse_loss_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    pred = operand_def(TensorType)
    target = operand_def(TensorType)
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_ELEMENTWISE))
    assembly_format = "$pred `,` $target `,` $grad attr-dict `:` functional-type(operands, results)"

    def __init__(self, pred: SSAValue, target: SSAValue, grad: SSAValue):
        super().__init__(operands=[pred, target, grad], result_types=[pred.type])

    def verify_(self) -> None:
        p = ranked(self.name, "pred", self.pred)
        t = ranked(self.name, "target", self.target)
        require_float(self.name, "pred", p)
        if p != t:
            raise VerifyException(f"{self.name}: pred {p} and target {t} must have one type")
        require_nonempty(self.name, "pred", p)
        _require_scalar_grad(self.name, self.grad, p)
        require_result(self.name, self.result.type, p)
