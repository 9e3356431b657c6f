"""The activations: each one's forward op, its gradient op and its row, side by side.

An activation is `graph.<name>` (y = f(x), a `UnaryElementwiseOp`) and
`autodiff.<name>_grad` (dx = dy * f'(.), reading what its row says it saves:
the forward input x or output y). Both classes are defined here, next to each
other and to their row of `ACTIVATIONS`, so that an activation has one home (as
JAX keeps a primitive, its derivative and its lowering side by side); the
autodiff dialect lists the gradient ops in its `Dialect` and re-exports them.
The facts of each row (its kernel code, what it saves, whether it collapses
information, its epilogue forms) are plain data in dialects/activation_table.py,
which the kernel registry reads without loading xDSL.

Every reader asks `ACTIVATIONS` (by `Activation`) or `ACTIVATION_OF` (by op
class): the VJP rules, aicfc-fuse's epilogue forms, the operator report, the
NumPy reference of the fused ops. Adding an activation is a row in
dialects/activation_table.py, its two classes and row here, its NumPy math
(runtime/reference.py), its C math (kernels/common.cuh) and its `aicfc.nn`
module (CONTRIBUTING.md, "Add an activation").

```mlir
%y = graph.gelu %x : tensor<8x16xf32>
%dx = autodiff.gelu_grad %dy, %x : tensor<8x16xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import VarConstraint, base, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.str_enum import StrEnum

from aicfc.dialects.activation_table import ActivationFacts, Saved
from aicfc.dialects.activation_table import facts as facts_of
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OUT0_IN0, OpFlag, OpInfo
from aicfc.dialects.graph.base import UnaryElementwiseOp
from aicfc.dialects.tensors import ranked, require_float

F = OpFlag

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_OF",
    "Activation",
    "ActivationGradOp",
    "ActivationOp",
    "ActivationOps",
    "GeluGradOp",
    "GeluOp",
    "ReluGradOp",
    "ReluOp",
    "SiluGradOp",
    "SiluOp",
    "TanhGradOp",
    "TanhOp",
]


class Activation(StrEnum):
    """A pointwise activation, or none: the `act` of gemm_epilogue and epilogue_grad.

    Each value but none names a row of dialects/activation_table.py and of ACTIVATIONS.
    """

    NONE = "none"
    RELU = "relu"
    GELU = "gelu"
    TANH = "tanh"
    SILU = "silu"


def forward_info(act: Activation, extra: OpFlag = F.NONE) -> OpInfo:
    """The OpInfo of `graph.<act>`: elementwise, an activation, COLLAPSES_INFO from its row."""
    collapses = F.COLLAPSES_INFO if facts_of(act.value).collapses_info else F.NONE
    return OpInfo(F.IS_ELEMENTWISE | F.IS_ACTIVATION | collapses | extra, OUT0_IN0)


def grad_info(act: Activation, why_not: str = "") -> OpInfo:
    """The OpInfo of `autodiff.<act>_grad`: a backward activation gradient (COLLAPSES_INFO
    from its row); differentiable unless `why_not` says why not."""
    collapses = F.COLLAPSES_INFO if facts_of(act.value).collapses_info else F.NONE
    flags = F.IS_BACKWARD | F.IS_ELEMENTWISE | F.IS_ACTIVATION_GRAD | collapses
    return OpInfo(flags, OUT0_IN0, differentiable=not why_not, why_not=why_not)


class ActivationOp(UnaryElementwiseOp):
    """`%y = graph.<act> %x : tensor<...>`: y = act(x), one row of ACTIVATIONS."""


class ActivationGradOp(AicfcOp):
    """`%dx = autodiff.<act>_grad %dy, %saved : tensor<...>`: dx = dy * act'(.)."""

    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    saved = operand_def(T)
    result = result_def(T)
    assembly_format = "$grad `,` $saved attr-dict `:` type($result)"

    def __init__(self, grad: SSAValue, saved: SSAValue):
        super().__init__(operands=[grad, saved], result_types=[grad.type])

    def verify_(self) -> None:
        require_float(self.name, "grad", ranked(self.name, "grad", self.grad))


# ----------------------------------------------------------------------------
# relu
# ----------------------------------------------------------------------------


@irdl_op_definition
class ReluOp(ActivationOp):
    """y = max(x, 0). Collapses the negative half-line to 0 (docs/design.md#operator-analysis).

    ```mlir
    %y = graph.relu %x : tensor<8x16xf32>
    ```
    """

    name = "graph.relu"
    DISPLAY_NAME: ClassVar[str] = "ReLU"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    traits = traits_def(Pure(), forward_info(Activation.RELU))


@irdl_op_definition
class ReluGradOp(ActivationGradOp):
    """dx = dy * (y > 0), with y the relu's output (docs/design.md#composite-backward).

    ```mlir
    %dx = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
    ```
    """

    name = "autodiff.relu_grad"
    traits = traits_def(Pure(), grad_info(Activation.RELU))


# ----------------------------------------------------------------------------
# gelu
# ----------------------------------------------------------------------------


@irdl_op_definition
class GeluOp(ActivationOp):
    """y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), the exact form (Hendrycks and Gimpel 2016).

    ```mlir
    %y = graph.gelu %x : tensor<8x16xf32>
    ```
    """

    name = "graph.gelu"
    DISPLAY_NAME: ClassVar[str] = "GELU"
    FLOPS_PER_ELEMENT: ClassVar[int] = 5
    traits = traits_def(Pure(), forward_info(Activation.GELU))


@irdl_op_definition
class GeluGradOp(ActivationGradOp):
    """dx = dy * (Phi(x) + x * phi(x)), with x the gelu's input (exact erf form).

    ```mlir
    %dx = autodiff.gelu_grad %dy, %x : tensor<8x16xf32>
    ```
    """

    name = "autodiff.gelu_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 8
    traits = traits_def(
        Pure(),
        grad_info(
            Activation.GELU,
            why_not="its VJP needs gelu''(x) = phi(x) (2 - x^2), which no op computes",
        ),
    )


# ----------------------------------------------------------------------------
# tanh
# ----------------------------------------------------------------------------


@irdl_op_definition
class TanhOp(ActivationOp):
    """y = tanh(x); a bijection onto (-1, 1).

    ```mlir
    %y = graph.tanh %x : tensor<8x16xf32>
    ```
    """

    name = "graph.tanh"
    DISPLAY_NAME: ClassVar[str] = "Tanh"
    FLOPS_PER_ELEMENT: ClassVar[int] = 1
    traits = traits_def(Pure(), forward_info(Activation.TANH, F.IS_INVERTIBLE))


@irdl_op_definition
class TanhGradOp(ActivationGradOp):
    """dx = dy * (1 - y^2), with y the tanh's output.

    ```mlir
    %dx = autodiff.tanh_grad %dy, %y : tensor<8x16xf32>
    ```
    """

    name = "autodiff.tanh_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    traits = traits_def(Pure(), grad_info(Activation.TANH))


# ----------------------------------------------------------------------------
# silu
# ----------------------------------------------------------------------------


@irdl_op_definition
class SiluOp(ActivationOp):
    """y = x * sigmoid(x), the sigmoid-weighted linear unit (Elfwing et al. 2018;
    torch.nn.SiLU, the activation of LLaMA-style MLPs).

    ```mlir
    %y = graph.silu %x : tensor<8x16xf32>
    ```
    """

    name = "graph.silu"
    DISPLAY_NAME: ClassVar[str] = "SiLU"
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    traits = traits_def(Pure(), forward_info(Activation.SILU))


@irdl_op_definition
class SiluGradOp(ActivationGradOp):
    """dx = dy * s (1 + x (1 - s)), s = sigmoid(x), with x the silu's input.

    ```mlir
    %dx = autodiff.silu_grad %dy, %x : tensor<8x16xf32>
    ```
    """

    name = "autodiff.silu_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 7
    traits = traits_def(
        Pure(),
        grad_info(
            Activation.SILU,
            why_not="its VJP needs silu''(x) = s (1 - s) (2 + x (1 - 2 s)), which no op computes",
        ),
    )


# ----------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ActivationOps:
    """One row of the activation table with its op classes.

    act:     the activation; its facts are the plain-data row (dialects/activation_table.py).
    forward: the class of `graph.<name>`.
    grad:    the class of `autodiff.<name>_grad`; it reads `saved_value(forward op)`.
    """

    act: Activation
    forward: type[ActivationOp]
    grad: type[ActivationGradOp]

    @property
    def facts(self) -> ActivationFacts:
        return facts_of(self.act.value)

    def saved_value(self, op: Operation) -> SSAValue:
        """What the gradient op reads of a forward op `op`: its input or its result."""
        return op.operands[0] if self.facts.saves == Saved.INPUT else op.results[0]


ACTIVATIONS: dict[Activation, ActivationOps] = {
    row.act: row
    for row in (
        ActivationOps(Activation.RELU, ReluOp, ReluGradOp),
        ActivationOps(Activation.GELU, GeluOp, GeluGradOp),
        ActivationOps(Activation.TANH, TanhOp, TanhGradOp),
        ActivationOps(Activation.SILU, SiluOp, SiluGradOp),
    )
}
"""Activation -> its row with the classes of its ops (one per row of the facts, and one per
Activation but none: test_op_completeness.py checks both)."""

ACTIVATION_OF: dict[type[Operation], ActivationOps] = {
    cls: row for row in ACTIVATIONS.values() for cls in (row.forward, row.grad)
}
"""An activation's forward or gradient op class -> its row."""

FORWARD_OPS: tuple[type[ActivationOp], ...] = tuple(r.forward for r in ACTIVATIONS.values())
"""The graph dialect's activation ops (its Dialect lists them)."""

GRAD_OPS: tuple[type[ActivationGradOp], ...] = tuple(r.grad for r in ACTIVATIONS.values())
"""The autodiff dialect's activation gradient ops (its Dialect lists them)."""
