"""Layout ops: graph.reshape, graph.transpose, graph.broadcast_to, graph.split, graph.concat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.flags import VIEW, OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp
from aicfc.dialects.params import ParamValue
from aicfc.dialects.tensors import (
    axis_in_range,
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
        Pure(), OpInfo(F.IS_LAYOUT | F.IS_SHAPE_ONLY | F.IS_LINEAR | F.IS_INVERTIBLE, VIEW)
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


@irdl_op_definition
class SplitOp(GraphOp):
    """Split x along `axis` into consecutive pieces of `sizes` (torch.split(x, sizes, dim)).

    The sizes add up to the axis's length; one result per size. A fused qkv projection's
    [B, T, 3D] output splits into q, k, v [B, T, D].

    ```mlir
    %q, %k, %v = graph.split %qkv axis = 2 sizes = [16, 16, 16]
        : tensor<2x8x48xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
    ```
    """

    name = "graph.split"
    DISPLAY_NAME: ClassVar[str] = "Split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sizes = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), OpInfo(F.IS_LAYOUT | F.IS_LINEAR | F.IS_INVERTIBLE))
    assembly_format = (
        "$input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input) `->` "
        "`(` type($outputs) `)`"
    )

    def __init__(self, input: SSAValue, axis: int, sizes: Sequence[int]):
        t = ranked(self.name, "input", input)
        shape = list(t.get_shape())
        a = axis % len(shape) if shape else 0
        types = [tensor([*shape[:a], n, *shape[a + 1 :]], t.element_type) for n in sizes]
        super().__init__(
            operands=[input],
            result_types=[types],
            properties={
                "axis": IntegerAttr(axis, i64),
                "sizes": DenseArrayBase.from_list(i64, list(sizes)),
            },
        )

    @property
    def axis_value(self) -> int:
        return int(self.axis.value.data)

    @property
    def size_list(self) -> tuple[int, ...]:
        return tuple(self.sizes.get_values())

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_number(self.name, "input", x)
        shape = x.get_shape()
        a = axis_in_range(self.name, self.axis_value, len(shape))
        sizes = self.size_list
        if any(n < 0 for n in sizes) or sum(sizes) != shape[a]:
            raise VerifyException(
                f"{self.name}: sizes {list(sizes)} must be non-negative and add up to "
                f"{shape[a]} (dim {a} of {fmt_shape(shape)})"
            )
        if len(self.outputs) != len(sizes):
            raise VerifyException(
                f"{self.name}: {len(sizes)} sizes but {len(self.outputs)} results"
            )
        for r, n in zip(self.outputs, sizes, strict=True):
            want = tensor([*shape[:a], n, *shape[a + 1 :]], x.element_type)
            require_result(self.name, r.type, want)


@irdl_op_definition
class ConcatOp(GraphOp):
    """Concatenate the inputs along `axis` (torch.cat(inputs, dim)); every other dim and
    the element type agree.

    ```mlir
    %y = graph.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
    """

    name = "graph.concat"
    DISPLAY_NAME: ClassVar[str] = "Concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_LAYOUT | F.IS_LINEAR | F.IS_INVERTIBLE))
    assembly_format = (
        "$inputs `axis` `=` $axis attr-dict `:` `(` type($inputs) `)` `->` type($result)"
    )

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        first = ranked(self.name, "input #0", inputs[0])
        shape = list(first.get_shape())
        a = axis % len(shape) if shape else 0
        if shape:
            shape[a] = sum(ranked(self.name, "input", v).get_shape()[a] for v in inputs)
        super().__init__(
            operands=[list(inputs)],
            result_types=[tensor(shape, first.element_type)],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    @property
    def axis_value(self) -> int:
        return int(self.axis.value.data)

    def sizes(self) -> tuple[int, ...]:
        """The length of each input along the axis (the split of the VJP)."""
        a = self.axis_value % len(ranked(self.name, "result", self.result).get_shape())
        return tuple(ranked(self.name, "input", v).get_shape()[a] for v in self.inputs)

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException(f"{self.name}: needs at least one input")
        types = [ranked(self.name, f"input #{i}", v) for i, v in enumerate(self.inputs)]
        require_number(self.name, "input #0", types[0])
        require_same_dtype(self.name, [(f"input #{i}", t) for i, t in enumerate(types)])
        shape = list(types[0].get_shape())
        a = axis_in_range(self.name, self.axis_value, len(shape))
        for i, t in enumerate(types[1:], start=1):
            s = t.get_shape()
            if len(s) != len(shape) or any(
                x != y for j, (x, y) in enumerate(zip(s, shape, strict=False)) if j != a
            ):
                raise VerifyException(
                    f"{self.name}: input #{i} {fmt_shape(s)} must match input #0 "
                    f"{fmt_shape(shape)} in every dim but {a}"
                )
        shape[a] = sum(t.get_shape()[a] for t in types)
        require_result(self.name, self.result.type, tensor(shape, types[0].element_type))
