"""The graph dialect: forward tensor ops with value semantics.

Every op carries an `OpInfo` trait with its static 64-bit flag mask (seed 001
§3.1) and the analysis methods of `AicfcOp` (seed 002 §2). Elementwise binary
ops take operands of one type; broadcasting is explicit (`graph.broadcast_to`,
`graph.bias_add`), as in StableHLO. Matrix ops are rank 2.

```mlir
%h = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
       : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<64x128xf32>
%l = graph.cross_entropy %logits, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Dialect, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.canonicalization import GraphCanonicalization
from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo
from aicfc.dialects.params import ParamValue
from aicfc.dialects.tensors import (
    axis_in_range,
    broadcast_shape,
    fmt_shape,
    is_float,
    is_int,
    matmul_shape,
    numel,
    ranked,
    reduce_shape,
    require_float,
    require_nonempty,
    require_number,
    require_result,
    require_same_dtype,
    tensor,
    verify_rng_offset,
)

F = OpFlag

# ----------------------------------------------------------------------------
# Attributes
# ----------------------------------------------------------------------------


class Activation(StrEnum):
    """Pointwise activation of a GEMM epilogue (cuBLASLt: RELU, GELU)."""

    NONE = "none"
    RELU = "relu"
    GELU = "gelu"


@irdl_attr_definition
class ActivationAttr(EnumAttribute[Activation], SpacedOpaqueSyntaxAttribute):
    """`#graph<activation relu>`; printed bare (`act = relu`) inside op formats."""

    name = "graph.activation"


def _unit(flag: bool) -> UnitAttr | None:
    return UnitAttr() if flag else None


# ----------------------------------------------------------------------------
# Abstract bases
# ----------------------------------------------------------------------------


class GraphOp(AicfcOp):
    """Base of graph ops: pure, value semantics; canonicalization patterns attached lazily."""

    traits = traits_def(GraphCanonicalization())


class UnaryElementwiseOp(GraphOp):
    """`%y = graph.<op> %x : tensor<...xf32>`: y[i] = f(x[i])."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue):
        super().__init__(operands=[input], result_types=[input.type])

    def verify_(self) -> None:
        require_float(self.name, "operand", ranked(self.name, "operand", self.input))


class BinaryElementwiseOp(GraphOp):
    """`%z = graph.<op> %a, %b : tensor<...>`: z[i] = a[i] (op) b[i], equal types."""

    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        t = ranked(self.name, "lhs", self.lhs)
        if not (is_int(t.element_type) or is_float(t.element_type)):
            raise VerifyException(
                f"{self.name}: operands must be float or i32/i64 tensors, got {t.element_type}"
            )


# ----------------------------------------------------------------------------
# Constants and matrix products
# ----------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(GraphOp):
    """A compile-time tensor.

    ```mlir
    %c = graph.constant dense<1> : tensor<i64>
    ```
    """

    name = "graph.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(
        Pure(),
        ConstantLike(),
        OpInfo(F.IS_CONSTANT, differentiable=False, why_not="a constant has no inputs"),
    )

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    def verify_(self) -> None:
        require_result(self.name, self.result.type, self.value.type)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(f"graph.constant: expected a dense elements attribute, got {value}")
        op = cls(value)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)


@irdl_op_definition
class MatmulOp(GraphOp):
    """Matrix product C = op(A) @ op(B), op = transpose where the flag is set.

    ```mlir
    %c = graph.matmul %a, %b transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    ```
    """

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    traits = traits_def(Pure(), OpInfo(F.IS_GEMM_LIKE | F.IS_LINEAR | F.HAS_PARAM))
    assembly_format = (
        "$lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? "
        "attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, transpose_a: bool = False, transpose_b: bool = False
    ):
        a = ranked(self.name, "lhs", lhs)
        b = ranked(self.name, "rhs", rhs)
        m, n, _ = matmul_shape(self.name, a, b, transpose_a, transpose_b)
        super().__init__(
            operands=[lhs, rhs],
            result_types=[tensor((m, n), a.element_type)],
            properties={"transpose_a": _unit(transpose_a), "transpose_b": _unit(transpose_b)},
        )

    def mnk(self) -> tuple[int, int, int]:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        return matmul_shape(self.name, a, b, bool(self.transpose_a), bool(self.transpose_b))

    def verify_(self) -> None:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        require_float(self.name, "lhs", a)
        require_same_dtype(self.name, [("lhs", a), ("rhs", b)])
        m, n, _ = self.mnk()
        require_result(self.name, self.result.type, tensor((m, n), a.element_type))

    def flops(self) -> int:
        m, n, k = self.mnk()
        return 2 * m * n * k


@irdl_op_definition
class GemmEpilogueOp(GraphOp):
    """Fused Y = act(op(A) @ op(B) + bias) (cuBLASLt epilogues BIAS, RELU_BIAS, GELU_BIAS).

    The bias has length N and is added to every row. The optional second
    result `pre_act` is Z = op(A) @ op(B) + bias before the activation
    (cuBLASLt's GELU_AUX), kept for the backward of GELU; it is allowed only
    when act is not none.

    ```mlir
    %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
           : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
    """

    name = "graph.gemm_epilogue"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    pre_act = opt_result_def(TensorType)
    act = opt_prop_def(ActivationAttr)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(), OpInfo(F.IS_GEMM_LIKE | F.IS_FUSED | F.HAS_PARAM | F.IS_BIAS_ADD | F.IS_ACTIVATION)
    )
    assembly_format = (
        "$lhs `,` $rhs (`bias` $bias^)? (`act` `=` $act^)? (`transpose_a` $transpose_a^)? "
        "(`transpose_b` $transpose_b^)? attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        bias: SSAValue | None = None,
        act: Activation = Activation.NONE,
        transpose_a: bool = False,
        transpose_b: bool = False,
        with_pre_act: bool = False,
    ):
        a = ranked(self.name, "lhs", lhs)
        b = ranked(self.name, "rhs", rhs)
        m, n, _ = matmul_shape(self.name, a, b, transpose_a, transpose_b)
        out = tensor((m, n), a.element_type)
        super().__init__(
            operands=[lhs, rhs, [bias] if bias is not None else []],
            result_types=[out, [out] if with_pre_act else []],
            properties={
                "act": ActivationAttr(act) if act != Activation.NONE else None,
                "transpose_a": _unit(transpose_a),
                "transpose_b": _unit(transpose_b),
            },
        )

    @property
    def activation(self) -> Activation:
        return self.act.data if self.act is not None else Activation.NONE

    def semantic_flags(self) -> OpFlag:
        f = super().semantic_flags() & ~(F.IS_ACTIVATION | F.IS_BIAS_ADD)
        if self.bias is not None:
            f |= F.IS_BIAS_ADD
        if self.activation == Activation.NONE:
            return f | (F.IS_AFFINE if self.bias is not None else F.IS_LINEAR)
        return f | F.IS_ACTIVATION | (F.COLLAPSES_INFO if self.activation == Activation.RELU else 0)

    def mnk(self) -> tuple[int, int, int]:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        return matmul_shape(self.name, a, b, bool(self.transpose_a), bool(self.transpose_b))

    def verify_(self) -> None:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        require_float(self.name, "lhs", a)
        require_same_dtype(self.name, [("lhs", a), ("rhs", b)])
        m, n, _ = self.mnk()
        out = tensor((m, n), a.element_type)
        require_result(self.name, self.result.type, out)
        if self.bias is not None:
            bt = ranked(self.name, "bias", self.bias)
            require_same_dtype(self.name, [("lhs", a), ("bias", bt)])
            if tuple(bt.get_shape()) != (n,):
                raise VerifyException(
                    f"{self.name}: bias must have shape [{n}] (N of the [{m}, {n}] result), "
                    f"got {fmt_shape(bt.get_shape())}"
                )
        if self.pre_act is not None:
            if self.activation == Activation.NONE:
                raise VerifyException(
                    f"{self.name}: the pre_act result needs an activation (act relu or gelu)"
                )
            require_result(self.name, self.pre_act.type, out)

    def flops(self) -> int:
        m, n, k = self.mnk()
        epilogue = (1 if self.bias is not None else 0) + (
            0 if self.activation == Activation.NONE else 1
        )
        return 2 * m * n * k + epilogue * m * n


# ----------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------


@irdl_op_definition
class BiasAddOp(GraphOp):
    """y = x + b with b of shape [C] added along the last dimension of x [..., C].

    ```mlir
    %y = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
    """

    name = "graph.bias_add"
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
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_LINEAR, OUT0_IN0))


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    """z = a - b (equal types).

    ```mlir
    %z = graph.sub %a, %b : tensor<8x16xf32>
    ```
    """

    name = "graph.sub"
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_LINEAR, OUT0_IN0))


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    """z = a * b, elementwise (equal types).

    ```mlir
    %z = graph.mul %a, %b : tensor<8x16xf32>
    ```
    """

    name = "graph.mul"
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE, OUT0_IN0))


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    """y = max(x, 0). Collapses the negative half-line to 0 (seed 002 §5).

    ```mlir
    %y = graph.relu %x : tensor<8x16xf32>
    ```
    """

    name = "graph.relu"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    traits = traits_def(
        Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_ACTIVATION | F.COLLAPSES_INFO, OUT0_IN0)
    )


@irdl_op_definition
class GeluOp(UnaryElementwiseOp):
    """y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), the exact form (Hendrycks and Gimpel 2016).

    ```mlir
    %y = graph.gelu %x : tensor<8x16xf32>
    ```
    """

    name = "graph.gelu"
    FLOPS_PER_ELEMENT: ClassVar[int] = 5
    traits = traits_def(Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_ACTIVATION, OUT0_IN0))


@irdl_op_definition
class TanhOp(UnaryElementwiseOp):
    """y = tanh(x); a bijection onto (-1, 1).

    ```mlir
    %y = graph.tanh %x : tensor<8x16xf32>
    ```
    """

    name = "graph.tanh"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    traits = traits_def(
        Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_ACTIVATION | F.IS_INVERTIBLE, OUT0_IN0)
    )


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


# ----------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------


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
    """Sum over `axes` (numpy.sum with keepdims).

    ```mlir
    %s = graph.reduce_sum %x axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
    ```
    """

    name = "graph.reduce_sum"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdims = opt_prop_def(UnitAttr)
    traits = traits_def(Pure(), OpInfo(F.IS_REDUCTION | F.IS_LINEAR | F.COLLAPSES_INFO))
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
                "keepdims": _unit(keepdims),
            },
        )

    @property
    def axes_list(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    def verify_(self) -> None:
        x = ranked(self.name, "input", self.input)
        require_number(self.name, "input", x)
        shape = reduce_shape(self.name, x.get_shape(), self.axes_list, bool(self.keepdims))
        require_result(self.name, self.result.type, tensor(shape, x.element_type))

    def flops(self) -> int:
        return numel(ranked(self.name, "input", self.input).get_shape())


# ----------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------


@irdl_op_definition
class CrossEntropyOp(GraphOp):
    """Mean softmax cross-entropy of logits [N, C] against integer labels [N].

    loss = mean_n(logsumexp(x_n) - x_n[y_n]), computed with the max subtracted
    (torch.nn.functional.cross_entropy, reduction="mean").

    ```mlir
    %l = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    ```
    """

    name = "graph.cross_entropy"
    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_LOSS | F.IS_REDUCTION | F.COLLAPSES_INFO))
    assembly_format = (
        "$logits `,` $labels attr-dict `:` `(` type($logits) `,` type($labels) `)` "
        "`->` type($result)"
    )

    def __init__(self, logits: SSAValue, labels: SSAValue):
        t = ranked(self.name, "logits", logits)
        super().__init__(operands=[logits, labels], result_types=[tensor((), t.element_type)])

    def verify_(self) -> None:
        x = ranked(self.name, "logits", self.logits)
        y = ranked(self.name, "labels", self.labels)
        require_float(self.name, "logits", x)
        if len(x.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: logits must be rank 2 [N, C], got {fmt_shape(x.get_shape())}"
            )
        require_nonempty(self.name, "logits", x)
        if not is_int(y.element_type):
            raise VerifyException(f"{self.name}: labels must be i32 or i64, got {y.element_type}")
        if tuple(y.get_shape()) != (x.get_shape()[0],):
            raise VerifyException(
                f"{self.name}: labels must have shape [{x.get_shape()[0]}] (N of logits "
                f"{fmt_shape(x.get_shape())}), got {fmt_shape(y.get_shape())}"
            )
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


Graph = Dialect(
    "graph",
    [
        ConstantOp,
        MatmulOp,
        GemmEpilogueOp,
        BiasAddOp,
        AddOp,
        SubOp,
        MulOp,
        ReluOp,
        GeluOp,
        TanhOp,
        DropoutOp,
        ReshapeOp,
        TransposeOp,
        BroadcastToOp,
        SoftmaxOp,
        ReduceSumOp,
        CrossEntropyOp,
        MseLossOp,
    ],
    [ActivationAttr],
)
