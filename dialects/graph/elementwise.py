"""Elementwise ops: bias_add, add, sub, mul, scale, dropout (the activations: activations.py)."""

from __future__ import annotations

import math
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

from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo
from aicfc.dialects.graph.base import BinaryElementwiseOp, GraphOp
from aicfc.dialects.tensors import (
    fmt_shape,
    ranked,
    require_float,
    require_result,
    require_same_dtype,
    verify_rng_offset,
)

F = OpFlag


@irdl_op_definition
class BiasAddOp(GraphOp):
    """y = x + b with b of shape [C] added along the last dimension of x [..., C].

    ```mlir
    %y = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
    """

    name = "graph.bias_add"
    DISPLAY_NAME: ClassVar[str] = "BiasAdd"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    input = operand_def(TensorType)
    bias = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_ELEMENTWISE | F.IS_BIAS_ADD | F.HAS_PARAM | F.IS_INVERTIBLE | F.IS_AFFINE, OUT0_IN0
        ),
    )
    assembly_format = (
        "$input `,` $bias attr-dict `:` `(` type($input) `,` type($bias) `)` `->` type($result)"
    )

    def __init__(self, input: SSAValue, bias: SSAValue):
        super().__init__(operands=[input, bias], result_types=[input.type])

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        b = ranked(self.name, "bias", self.bias)
        require_float(self.name, "input", x)
        require_same_dtype(self.name, [("input", x), ("bias", b)])
        xs, bs = x.get_shape(), b.get_shape()
        if len(xs) < 1 or len(bs) != 1 or bs[0] != xs[-1]:
            raise VerifyException(
                f"{self.name}: bias must have shape [{xs[-1] if xs else '?'}] (the last dim of "
                f"input {fmt_shape(xs)}), got {fmt_shape(bs)}"
            )
        require_result(self.name, self.result.type, x)


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    """z = a + b (equal types; float or i32/i64).

    ```mlir
    %z = graph.add %a, %b : tensor<8x16xf32>
    ```
    """

    name = "graph.add"
    DISPLAY_NAME: ClassVar[str] = "Add"
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_LINEAR, OUT0_IN0))


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    """z = a - b (equal types).

    ```mlir
    %z = graph.sub %a, %b : tensor<8x16xf32>
    ```
    """

    name = "graph.sub"
    DISPLAY_NAME: ClassVar[str] = "Sub"
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_LINEAR, OUT0_IN0))


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    """z = a * b, elementwise (equal types).

    ```mlir
    %z = graph.mul %a, %b : tensor<8x16xf32>
    ```
    """

    name = "graph.mul"
    DISPLAY_NAME: ClassVar[str] = "Mul"
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE, OUT0_IN0))


@irdl_op_definition
class ScaleOp(GraphOp):
    """y = factor * x, elementwise, with a compile-time factor (attention's 1/sqrt(d)).

    Invertible when factor != 0. Canonicalization turns graph.mul by a splat constant
    into it.

    ```mlir
    %y = graph.scale %x factor = 1.250000e-01 : tensor<2x4x8x8xf32>
    ```
    """

    name = "graph.scale"
    DISPLAY_NAME: ClassVar[str] = "Scale"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    factor = prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_LINEAR | F.IS_INVERTIBLE, OUT0_IN0))
    assembly_format = "$input `factor` `=` $factor attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, factor: float):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"factor": FloatAttr(factor, Float64Type())},
        )

    @property
    def factor_value(self) -> float:
        return float(self.factor.value.data)

    def semantic_flags(self) -> OpFlag:
        f = super().semantic_flags()
        return f & ~F.IS_INVERTIBLE if self.factor_value == 0.0 else f

    def is_identity(self) -> bool:
        return self.factor_value == 1.0

    def verify_(self) -> None:
        require_float(self.name, "input", ranked(self.name, "input", self.input))
        if not math.isfinite(self.factor_value):
            raise VerifyException(f"{self.name}: factor must be finite, got {self.factor_value}")


@irdl_op_definition
class DropoutOp(GraphOp):
    """Inverted dropout: y = x * mask / (1 - p), mask[i] = (u[i] >= p).

    u[i] is uniform in [0, 1) from Philox4x32-10 (Salmon et al. 2011) keyed by
    `seed`, with counter (`offset`, i): the offset operand is a scalar i64 state
    advanced once per step, so every step (and every CUDA graph replay) draws
    a new mask while `autodiff.dropout_grad` can recompute the same one.

    ```mlir
    %y = graph.dropout %x, %offset p = 0.1 seed = 7 : tensor<8x16xf32>, tensor<i64>
    ```
    """

    name = "graph.dropout"
    DISPLAY_NAME: ClassVar[str] = "Dropout"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    offset = operand_def(TensorType)
    result = result_def(T)
    p = prop_def(FloatAttr[Float64Type])
    seed = prop_def(IntegerAttr[I64])
    traits = traits_def(
        Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_STOCHASTIC | F.COLLAPSES_INFO, OUT0_IN0)
    )
    assembly_format = (
        "$input `,` $offset `p` `=` $p `seed` `=` $seed attr-dict `:` type($input) `,` "
        "type($offset)"
    )

    def __init__(self, input: SSAValue, offset: SSAValue, p: float, seed: int):
        super().__init__(
            operands=[input, offset],
            result_types=[input.type],
            properties={"p": FloatAttr(p, Float64Type()), "seed": IntegerAttr(seed, i64)},
        )

    def verify_(self) -> None:
        require_float(self.name, "input", ranked(self.name, "input", self.input))
        verify_rng_offset(self.name, self.offset)
        p = self.p.value.data
        if not 0.0 <= p < 1.0:
            raise VerifyException(f"{self.name}: p must be in [0, 1), got {p}")
