"""Reductions and losses: graph.softmax, graph.reduce_sum, graph.cross_entropy, graph.mse_loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType, UnitAttr, i64
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

from aicfc.dialects.checks import verify_class_logits
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp, unit_flag
from aicfc.dialects.tensors import (
    axis_in_range,
    numel,
    ranked,
    reduce_shape,
    require_float,
    require_nonempty,
    require_number,
    require_result,
    tensor,
)
from aicfc.dialects.wide_results import result_element

F = OpFlag


# ----------------------------------------------------------------------------
# Reductions and normalisation
# ----------------------------------------------------------------------------


@irdl_op_definition
class SoftmaxOp(GraphOp):
    """y = exp(x - max) / sum(exp(x - max)) along `axis`.

    ```mlir
    %y = graph.softmax %x axis = 1 : tensor<8x10xf32>
    ```
    """

    name = "graph.softmax"
    DISPLAY_NAME: ClassVar[str] = "Softmax"
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_REDUCTION | F.COLLAPSES_INFO))
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, axis: int = -1):
        super().__init__(
            operands=[input], result_types=[input.type], properties={"axis": IntegerAttr(axis, i64)}
        )

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_float(self.name, "input", x)
        axis_in_range(self.name, self.axis.value.data, len(x.get_shape()))


@irdl_op_definition
class ReduceSumOp(GraphOp):
    """Sum over `axes` (numpy.sum with keepdims), in the input's dtype, or f32 over a
    bf16/f16 input: the fp32 accumulation written unrounded (dialects/wide_results.py).

    ```mlir
    %s = graph.reduce_sum %x axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
    ```
    """

    name = "graph.reduce_sum"
    DISPLAY_NAME: ClassVar[str] = "ReduceSum"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdims = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(), OpInfo(F.IS_REDUCTION | F.IS_LINEAR | F.COLLAPSES_INFO, wide_results=(0,))
    )
    assembly_format = (
        "$input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` type($input) "
        "`->` type($result)"
    )

    def __init__(self, input: SSAValue, axes: Sequence[int], keepdims: bool = False):
        t = ranked(self.name, "input", input)
        shape = reduce_shape(self.name, t.get_shape(), axes, keepdims)
        super().__init__(
            operands=[input],
            result_types=[tensor(shape, t.element_type)],
            properties={
                "axes": DenseArrayBase.from_list(i64, list(axes)),
                "keepdims": unit_flag(keepdims),
            },
        )

    @property
    def axes_list(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_number(self.name, "input", x)
        shape = reduce_shape(self.name, x.get_shape(), self.axes_list, bool(self.keepdims))
        out = result_element(self, 0, x.element_type)
        require_result(self.name, self.result.type, tensor(shape, out))

    def flops(self) -> int:
        return numel(ranked(self.name, "input", self.input).get_shape())


# ----------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------


@irdl_op_definition
class CrossEntropyOp(GraphOp):
    """Mean softmax cross-entropy of logits [..., C] against integer labels [...].

    loss = mean over every row n of (logsumexp(x_n) - x_n[y_n]), computed with the max
    subtracted (torch.nn.functional.cross_entropy, reduction="mean"; for a language
    model's [B, T, V] logits and [B, T] targets, the mean over B*T positions).

    ```mlir
    %l = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    ```
    """

    name = "graph.cross_entropy"
    DISPLAY_NAME: ClassVar[str] = "CrossEntropy"
    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(
        Pure(), OpInfo(F.IS_LOSS | F.IS_REDUCTION | F.COLLAPSES_INFO | F.TAKES_CLASS_LABELS)
    )
    assembly_format = (
        "$logits `,` $labels attr-dict `:` `(` type($logits) `,` type($labels) `)` "
        "`->` type($result)"
    )

    def __init__(self, logits: SSAValue, labels: SSAValue):
        t = ranked(self.name, "logits", logits)
        super().__init__(operands=[logits, labels], result_types=[tensor((), t.element_type)])

    def verify_(self) -> None:
        x, _ = verify_class_logits(self.name, self.logits, self.labels)
        require_result(self.name, self.result.type, tensor((), x.element_type))

    def flops(self) -> int:
        return 5 * numel(ranked(self.name, "logits", self.logits).get_shape())


@irdl_op_definition
class MseLossOp(GraphOp):
    """Mean squared error: mean((pred - target)^2) (torch.nn.functional.mse_loss).

    ```mlir
    %l = graph.mse_loss %p, %t : tensor<8x4xf32> -> tensor<f32>
    ```
    """

    name = "graph.mse_loss"
    DISPLAY_NAME: ClassVar[str] = "MSELoss"
    T: ClassVar = VarConstraint("T", base(TensorType))
    pred = operand_def(T)
    target = operand_def(T)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_LOSS | F.IS_REDUCTION | F.COLLAPSES_INFO))
    assembly_format = "$pred `,` $target attr-dict `:` type($pred) `->` type($result)"

    def __init__(self, pred: SSAValue, target: SSAValue):
        t = ranked(self.name, "pred", pred)
        super().__init__(operands=[pred, target], result_types=[tensor((), t.element_type)])

    def verify_(self) -> None:
        x = ranked(self.name, "pred", self.pred)
        require_float(self.name, "pred", x)
        require_nonempty(self.name, "pred", x)
        require_result(self.name, self.result.type, tensor((), x.element_type))

    def flops(self) -> int:
        return 3 * numel(ranked(self.name, "pred", self.pred).get_shape())
