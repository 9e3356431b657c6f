"""Constants and matrix products: graph.constant, graph.matmul, graph.gemm_epilogue."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
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

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS, FACTS, one_of
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.activations import Activation
from aicfc.dialects.graph.attributes import ActivationAttr
from aicfc.dialects.graph.base import GraphOp, unit_flag
from aicfc.dialects.tensors import (
    batch_shape,
    fmt_shape,
    matmul_shape,
    numel,
    ranked,
    require_float,
    require_result,
    require_same_dtype,
    tensor,
)
from aicfc.dialects.wide_results import result_element

F = OpFlag


@irdl_op_definition
class ConstantOp(GraphOp):
    """A compile-time tensor.

    ```mlir
    %c = graph.constant dense<1> : tensor<i64>
    ```
    """

    name = "graph.constant"
    DISPLAY_NAME: ClassVar[str] = "Constant"
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


class MatrixProductOp(GraphOp):
    """Base of the products C = op(A) @ op(B) (matmul, gemm_epilogue): the transpose
    flags, (M, N, K) and the checks of A, B and C that both verifiers share.

    A and B are operands 0 and 1, but each subclass defines them itself: xDSL lists
    a base class's operands after the subclass's own, which would put
    gemm_epilogue's bias before A and B.
    """

    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)

    @classmethod
    def product_type(
        cls, lhs: SSAValue, rhs: SSAValue, transpose_a: bool, transpose_b: bool
    ) -> TensorType[Attribute]:
        """The type of op(A) @ op(B): [..., M, N] in A's element type, the batch dims
        broadcast (VerifyException if K differs or the batch dims do not broadcast)."""
        a, b = ranked(cls.name, "lhs", lhs), ranked(cls.name, "rhs", rhs)
        m, n, _ = matmul_shape(cls.name, a, b, transpose_a, transpose_b)
        batch = batch_shape(cls.name, a.get_shape(), b.get_shape())
        return tensor((*batch, m, n), a.element_type)

    @property
    def activation(self) -> Activation:
        """The epilogue's activation: none for a plain product."""
        return Activation.NONE

    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of one product of the batch (the last two dims of each operand)."""
        a = ranked(self.name, "lhs", self.operands[0])
        b = ranked(self.name, "rhs", self.operands[1])
        return matmul_shape(self.name, a, b, bool(self.transpose_a), bool(self.transpose_b))

    def batch(self) -> tuple[int, ...]:
        """The broadcast batch dims of the product (() for two matrices)."""
        a = ranked(self.name, "lhs", self.operands[0])
        b = ranked(self.name, "rhs", self.operands[1])
        return batch_shape(self.name, a.get_shape(), b.get_shape())

    def verify_product(self) -> TensorType[Attribute]:
        """Check A and B (float, one dtype, K agrees, batch dims broadcast) and result #0
        (A's dtype, or f32 over bf16/f16 operands: a wide result, dialects/wide_results.py);
        returns its type [..., M, N]."""
        a = ranked(self.name, "lhs", self.operands[0])
        b = ranked(self.name, "rhs", self.operands[1])
        require_float(self.name, "lhs", a)
        require_same_dtype(self.name, [("lhs", a), ("rhs", b)])
        m, n, _ = self.mnk()
        out = tensor((*self.batch(), m, n), result_element(self, 0, a.element_type))
        require_result(self.name, self.results[0].type, out)
        return out

    def flops(self) -> int:
        m, n, k = self.mnk()
        return 2 * numel(self.batch()) * m * n * k


@irdl_op_definition
class MatmulOp(MatrixProductOp):
    """Matrix product C = op(A) @ op(B), op = transpose of the last two dims where the flag
    is set.

    A [..., M, K] and B [..., K, N] (before the transposes) have rank >= 2; their batch
    dims broadcast as in torch.matmul (right-aligned, equal or 1), so a rank-2 B with a
    [B, T, D] A is a Linear layer on every position (its leading dims fold into M), and
    [B, H, T, d] x [B, H, S, d] with transpose_b is attention's q k^T. C is
    [broadcast batch..., M, N], in A's dtype, or f32 over bf16/f16 A and B: the fp32
    accumulation written unrounded (dialects/wide_results.py).

    ```mlir
    %c = graph.matmul %a, %b transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %s = graph.matmul %q, %k transpose_b
           : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
    """

    name = "graph.matmul"
    DISPLAY_NAME: ClassVar[str] = "MatMul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(
        Pure(), OpInfo(F.IS_GEMM_LIKE | F.IS_LINEAR | F.HAS_PARAM, wide_results=(0,))
    )
    assembly_format = (
        "$lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? "
        "attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, transpose_a: bool = False, transpose_b: bool = False
    ):
        super().__init__(
            operands=[lhs, rhs],
            result_types=[self.product_type(lhs, rhs, transpose_a, transpose_b)],
            properties={
                "transpose_a": unit_flag(transpose_a),
                "transpose_b": unit_flag(transpose_b),
            },
        )

    def verify_(self) -> None:
        self.verify_product()


@irdl_op_definition
class GemmEpilogueOp(MatrixProductOp):
    """Fused Y = act(op(A) @ op(B) + bias) (cuBLASLt epilogues BIAS, RELU_BIAS, GELU_BIAS).

    A is [..., M, K] (a Linear layer on [B, T, D]: its leading dims fold into M, so
    transpose_a needs a rank-2 A) and B is a matrix [K, N] ([N, K] with transpose_b).
    The bias has length N and is added to every row. `act` is none or an
    activation whose row in dialects/activation_table.py has an epilogue form.
    The optional second result `pre_act` is Z = op(A) @ op(B) + bias before the
    activation (cuBLASLt's GELU_AUX), kept for the backward of an activation
    whose gradient reads its input (gelu); it is allowed only when act is not none.
    Over bf16/f16 A and B, Y (and Z) may be f32: the fp32 accumulation written
    unrounded, with an f32 bias (dialects/wide_results.py).

    ```mlir
    %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
           : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
    """

    name = "graph.gemm_epilogue"
    DISPLAY_NAME: ClassVar[str] = "GemmEpilogue"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    pre_act = opt_result_def(TensorType)
    act = opt_prop_def(ActivationAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_GEMM_LIKE | F.IS_FUSED | F.HAS_PARAM | F.IS_BIAS_ADD | F.IS_ACTIVATION,
            wide_results=(0, 1),
        ),
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
        out = self.product_type(lhs, rhs, transpose_a, transpose_b)
        super().__init__(
            operands=[lhs, rhs, [bias] if bias is not None else []],
            result_types=[out, [out] if with_pre_act else []],
            properties={
                "act": ActivationAttr(act) if act != Activation.NONE else None,
                "transpose_a": unit_flag(transpose_a),
                "transpose_b": unit_flag(transpose_b),
            },
        )

    @property
    def activation(self) -> Activation:
        return self.act.data if self.act is not None else Activation.NONE

    def semantic_flags(self) -> OpFlag:
        f = super().semantic_flags() & ~(F.IS_ACTIVATION | F.IS_BIAS_ADD)
        if self.bias is not None:
            f |= F.IS_BIAS_ADD
        facts = FACTS.get(self.activation.value)
        if facts is None:
            return f | (F.IS_AFFINE if self.bias is not None else F.IS_LINEAR)
        return f | F.IS_ACTIVATION | (F.COLLAPSES_INFO if facts.collapses_info else 0)

    def verify_(self) -> None:
        a = ranked(self.name, "lhs", self.lhs)
        b = ranked(self.name, "rhs", self.rhs)
        if len(b.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: rhs must be a matrix [K, N] or [N, K] (a layer's weight), got "
                f"{fmt_shape(b.get_shape())}"
            )
        if self.transpose_a is not None and len(a.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: transpose_a needs a rank-2 lhs (the leading dims of "
                f"{fmt_shape(a.get_shape())} fold into M only untransposed)"
            )
        out = self.verify_product()
        n = out.get_shape()[-1]
        act = self.activation
        if act != Activation.NONE and act.value not in EPILOGUE_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: act {act.value} has no epilogue form (expected none, "
                f"{one_of(EPILOGUE_ACTIVATIONS)})"
            )
        if self.bias is not None:
            bt = ranked(self.name, "bias", self.bias)
            # a wide result adds a float32 bias (cuBLASLt's bias type is D's)
            wide = out.element_type != a.element_type
            require_same_dtype(self.name, [("result" if wide else "lhs", out), ("bias", bt)])
            if tuple(bt.get_shape()) != (n,):
                raise VerifyException(
                    f"{self.name}: bias must have shape [{n}] (N of the "
                    f"{fmt_shape(out.get_shape())} result), got {fmt_shape(bt.get_shape())}"
                )
        if self.pre_act is not None:
            if self.activation == Activation.NONE:
                raise VerifyException(
                    f"{self.name}: the pre_act result needs an activation "
                    f"(act {one_of(EPILOGUE_ACTIVATIONS)})"
                )
            require_result(self.name, self.pre_act.type, out)

    def flops(self) -> int:
        m, n, _ = self.mnk()
        epilogue = (1 if self.bias is not None else 0) + (
            0 if self.activation == Activation.NONE else 1
        )
        return super().flops() + epilogue * numel(self.batch()) * m * n
