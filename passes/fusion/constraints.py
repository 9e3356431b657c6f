"""What an op class means inside a fused op, and the step constraints that ask it.

The op tables say which classes have a fused form (an activation with an
epilogue, a loss with a fused gradient, a plain-sum reduction); the
constraints are small predicates on one op, held as data in a pattern's steps
(passes/fusion/patterns.py) and evaluated by the matcher.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from aicfc.dialects.autodiff import CrossEntropyGradOp
from aicfc.dialects.graph import (
    ACTIVATIONS,
    Activation,
    ActivationOps,
    CrossEntropyOp,
    MatrixProductOp,
    ReduceSumOp,
)

# ----------------------------------------------------------------------------
# Op tables
# ----------------------------------------------------------------------------


EPILOGUE_FORMS: tuple[ActivationOps, ...] = tuple(
    row for row in ACTIVATIONS.values() if row.facts.epilogue
)
"""The activations a gemm epilogue can apply, with their forward and gradient ops: the
rows of the activation table (dialects/graph/activations.py) whose facts say `epilogue`.

graph.tanh has none (cuBLASLt has no TANH epilogue): it is absent, so it never fuses.
"""

EPILOGUE_ACTIVATION_OF: dict[type[Operation], Activation] = {
    cls: row.act for row in EPILOGUE_FORMS for cls in (row.forward, row.grad)
}
"""Op class (an activation or its gradient) -> the `Activation` of its epilogue form."""

LOSS_GRADS: dict[type[Operation], type[Operation]] = {CrossEntropyOp: CrossEntropyGradOp}
"""Losses with a fused (loss, gradient) form, and the class of their gradient op
(graph.mse_loss has none: its gradient is one elementwise pass, nothing to share)."""

SUM_REDUCTIONS: frozenset[type[Operation]] = frozenset({ReduceSumOp})
"""Reductions whose value is a plain sum (a bias gradient is a column sum of dZ)."""

# ----------------------------------------------------------------------------
# Constraints
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HasEpilogueForm:
    """The op's class has an `Activation` in EPILOGUE_ACTIVATION_OF."""

    def holds(self, op: Operation) -> bool:
        return type(op) in EPILOGUE_ACTIVATION_OF


@dataclass(frozen=True)
class ResultRank:
    """The op's first result is a tensor of this rank."""

    rank: int

    def holds(self, op: Operation) -> bool:
        t = op.results[0].type if op.results else None
        return isinstance(t, TensorType) and len(t.get_shape()) == self.rank


@dataclass(frozen=True)
class SumsAxes:
    """A plain sum (SUM_REDUCTIONS) of a rank-`rank` input over exactly `axes`
    (negative axes normalised), without keepdims: for axes (0,) and rank 2 the
    column sum [M, N] -> [N], i.e. a bias gradient."""

    axes: tuple[int, ...]
    rank: int

    def holds(self, op: Operation) -> bool:
        if type(op) not in SUM_REDUCTIONS or not op.operands:
            return False
        t = op.operands[0].type
        if not isinstance(t, TensorType) or len(t.get_shape()) != self.rank:
            return False
        params = op.kernel_params()  # type: ignore[attr-defined]
        axes = params.get("axes", ())
        assert isinstance(axes, tuple)
        return not params.get("keepdims", False) and sorted(a % self.rank for a in axes) == sorted(
            self.axes
        )


@dataclass(frozen=True)
class EmptyEpilogue:
    """A gemm-like op that is a plain product: no bias operand, act none, one result.

    True for graph.matmul and for a graph.gemm_epilogue without bias and
    activation, which may therefore be extended by a bias and/or activation.
    """

    def holds(self, op: Operation) -> bool:
        return (
            isinstance(op, MatrixProductOp)
            and len(op.operands) == 2
            and op.activation == Activation.NONE
            and len(op.results) == 1
        )


@dataclass(frozen=True)
class HasFusedGradForm:
    """The op's class is a loss of LOSS_GRADS (it has a fused loss-and-gradient op)."""

    def holds(self, op: Operation) -> bool:
        return type(op) in LOSS_GRADS


@dataclass(frozen=True)
class IsLossGrad:
    """The op's class is the gradient op of a loss of LOSS_GRADS."""

    def holds(self, op: Operation) -> bool:
        return type(op) in LOSS_GRADS.values()
