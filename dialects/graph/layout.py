"""Layout ops: graph.reshape, graph.transpose, graph.broadcast_to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

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


class TargetShapeOp(GraphOp):
    """Base of the layout ops whose target shape is the result type (reshape, broadcast_to).

    `%y = graph.<op> %x : tensor<A> -> tensor<B>`: one element type; the kernel
    gets B as its `shape` parameter; each op's `verify_` checks A against B.
    """

    input = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        t = ranked(self.name, "input", input)
        super().__init__(operands=[input], result_types=[tensor(shape, t.element_type)])

    def kernel_params(self) -> dict[str, ParamValue]:
        return {"shape": tuple(ranked(self.name, "result", self.result).get_shape())}

    def is_identity(self) -> bool:
        return self.input.type == self.result.type

    def verified_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(A, B) after checking both are static and share a float or i32/i64 element type."""
        x = ranked(self.name, "input", self.input)
        y = ranked(self.name, "result", self.result)
        require_number(self.name, "input", x)
        require_same_dtype(self.name, [("input", x), ("result", y)])
        return tuple(x.get_shape()), tuple(y.get_shape())


@irdl_op_definition
class ReshapeOp(TargetShapeOp):
    """Row-major reshape to the result type's shape (same element count).

    ```mlir
    %y = graph.reshape %x : tensor<8x16xf32> -> tensor<128xf32>
    ```
    """

    name = "graph.reshape"
    DISPLAY_NAME: ClassVar[str] = "Reshape"
    traits = traits_def(
        Pure(), OpInfo(F.IS_LAYOUT | F.IS_SHAPE_ONLY | F.IS_LINEAR | F.IS_INVERTIBLE)
    )

    def verify_(self) -> None:
        src, dst = self.verified_shapes()
        if numel(src) != numel(dst):
            raise VerifyException(
                f"{self.name}: cannot reshape {fmt_shape(src)} ({numel(src)} elements) "
                f"to {fmt_shape(dst)} ({numel(dst)} elements)"
            )


@irdl_op_definition
class TransposeOp(GraphOp):
    """Permute dimensions: result dim i is input dim perm[i] (numpy.transpose).

    ```mlir
    %y = graph.transpose %x perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
    ```
    """

    name = "graph.transpose"
    DISPLAY_NAME: ClassVar[str] = "Transpose"
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

    def is_identity(self) -> bool:
        return self.permutation == tuple(range(len(self.permutation)))

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
class BroadcastToOp(TargetShapeOp):
    """Broadcast to the result shape by NumPy rules (right-aligned; dims equal or 1).

    ```mlir
    %y = graph.broadcast_to %b : tensor<16xf32> -> tensor<8x16xf32>
    ```
    """

    name = "graph.broadcast_to"
    DISPLAY_NAME: ClassVar[str] = "BroadcastTo"
    traits = traits_def(Pure(), OpInfo(F.IS_LAYOUT | F.IS_LINEAR | F.IS_BROADCAST))

    def verify_(self) -> None:
        broadcast_shape(self.name, *self.verified_shapes())
