"""Element-type conversion: graph.cast (mixed precision's visible casts)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp
from aicfc.dialects.params import ParamValue
from aicfc.dialects.tensors import fmt_shape, ranked, require_float, tensor

F = OpFlag


@irdl_op_definition
class CastOp(GraphOp):
    """y = x converted to the result's float element type, elementwise (torch's
    `Tensor.to(dtype)`, MLIR's arith.truncf/extf).

    A narrowing cast (f32 -> bf16, f32 -> f16) rounds to nearest, ties to even, as the
    GPU's cvt.rn and ml_dtypes do; f16 overflows to inf past 65504. A widening cast is
    exact. Shapes are equal; only the element type changes. `aicfc-autocast` inserts
    these; fusion folds them into the kernels that read or write their values.

    ```mlir
    %y = graph.cast %x : tensor<8x16xf32> to tensor<8x16xbf16>
    ```
    """

    name = "graph.cast"
    DISPLAY_NAME: ClassVar[str] = "Cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_CAST))
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue, element_type: Attribute):
        t = ranked(self.name, "input", input)
        super().__init__(operands=[input], result_types=[tensor(t.get_shape(), element_type)])

    def kernel_params(self) -> dict[str, ParamValue]:
        return {"dtype": str(ranked(self.name, "result", self.result).element_type)}

    def is_identity(self) -> bool:
        return self.input.type == self.result.type

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        y = ranked(self.name, "result", self.result)
        require_float(self.name, "input", x)
        require_float(self.name, "result", y)
        if tuple(x.get_shape()) != tuple(y.get_shape()):
            raise VerifyException(
                f"{self.name}: result shape {fmt_shape(y.get_shape())} differs from the input "
                f"shape {fmt_shape(x.get_shape())}; a cast changes only the element type"
            )


__all__ = ["CastOp"]
