"""Layout ops: graph.reshape, graph.transpose, graph.broadcast_to."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp
from aicfc.dialects.params import ParamValue
from aicfc.dialects.tensors import (
    broadcast_shape,
    fmt_shape,
    numel,
    ranked,
    require_number,
    require_result,
    require_same_dtype,
    tensor,
)

F = OpFlag


@irdl_op_definition
class ReshapeOp(GraphOp):
    """Row-major reshape to the result type's shape (same element count).

    ```mlir
    %y = graph.reshape %x : tensor<8x16xf32> -> tensor<128xf32>
    ```
    """

    name = "graph.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(
        Pure(), OpInfo(F.IS_LAYOUT | F.IS_SHAPE_ONLY | F.IS_LINEAR | F.IS_INVERTIBLE)
    )
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        t = ranked(self.name, "input", input)
        super().__init__(operands=[input], result_types=[tensor(shape, t.element_type)])

    def kernel_params(self) -> dict[str, ParamValue]:
        return {"shape": tuple(ranked(self.name, "result", self.result).get_shape())}

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        y = ranked(self.name, "result", self.result)
        require_number(self.name, "input", x)
        require_same_dtype(self.name, [("input", x), ("result", y)])
        if numel(x.get_shape()) != numel(y.get_shape()):
            raise VerifyException(
                f"{self.name}: cannot reshape {fmt_shape(x.get_shape())} "
                f"({numel(x.get_shape())} elements) to {fmt_shape(y.get_shape())} "
                f"({numel(y.get_shape())} elements)"
            )


@irdl_op_definition
class TransposeOp(GraphOp):
    """Permute dimensions: result dim i is input dim perm[i] (numpy.transpose).

    ```mlir
    %y = graph.transpose %x perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
    ```
    """

    name = "graph.transpose"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), OpInfo(F.IS_LAYOUT | F.IS_LINEAR | F.IS_INVERTIBLE))
    assembly_format = "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, perm: Sequence[int]):
        t = ranked(self.name, "input", input)
        s = t.get_shape()
        shape = [s[p] for p in perm] if sorted(perm) == list(range(len(s))) else list(s)
        super().__init__(
            operands=[input],
            result_types=[tensor(shape, t.element_type)],
            properties={"perm": DenseArrayBase.from_list(i64, list(perm))},
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return tuple(self.perm.get_values())

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_number(self.name, "input", x)
        s = x.get_shape()
        perm = self.permutation
        if sorted(perm) != list(range(len(s))):
            raise VerifyException(
                f"{self.name}: perm {list(perm)} is not a permutation of the {len(s)} dims "
                f"of {fmt_shape(s)}"
            )
        require_result(self.name, self.result.type, tensor([s[p] for p in perm], x.element_type))


@irdl_op_definition
class BroadcastToOp(GraphOp):
    """Broadcast to the result shape by NumPy rules (right-aligned; dims equal or 1).

    ```mlir
    %y = graph.broadcast_to %b : tensor<16xf32> -> tensor<8x16xf32>
    ```
    """

    name = "graph.broadcast_to"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_LAYOUT | F.IS_LINEAR | F.IS_BROADCAST))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        t = ranked(self.name, "input", input)
        super().__init__(operands=[input], result_types=[tensor(shape, t.element_type)])

    def kernel_params(self) -> dict[str, ParamValue]:
        return {"shape": tuple(ranked(self.name, "result", self.result).get_shape())}

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        y = ranked(self.name, "result", self.result)
        require_number(self.name, "input", x)
        require_same_dtype(self.name, [("input", x), ("result", y)])
        broadcast_shape(self.name, x.get_shape(), y.get_shape())
