"""Abstract bases of the graph dialect's ops: `GraphOp` and the unary/binary elementwise forms."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType, UnitAttr
from xdsl.ir import SSAValue
from xdsl.irdl import VarConstraint, base, operand_def, result_def, traits_def
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.canonicalization import GraphCanonicalization
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.tensors import is_float, is_int, ranked, require_float


def unit_flag(flag: bool) -> UnitAttr | None:
    """A unit property that is present exactly when `flag` is true."""
    return UnitAttr() if flag else None


def statistics_used(stats: tuple[SSAValue, ...]) -> bool:
    """True when a statistics result a forward saves for its backward (layer_norm's mean
    and rstd, attention's lse) is read by an op that is not a backward primitive."""
    for v in stats:
        for use in v.uses:
            if not static_flags(use.operation) & OpFlag.IS_BACKWARD:
                return True
    return False


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
