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

from aicfc.dialects.autodiff import CrossEntropyGradOp, LayerNormGradOp
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.graph import (
    ACTIVATIONS,
    Activation,
    ActivationOps,
    AddOp,
    CausalMaskOp,
    CrossEntropyOp,
    DropoutOp,
    LayerNormOp,
    MatmulOp,
    MatrixProductOp,
    ReduceSumOp,
    ScaleOp,
    SoftmaxOp,
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

ATTENTION_PARTS: dict[str, type[Operation]] = {
    "scale": ScaleOp,
    "mask": CausalMaskOp,
    "softmax": SoftmaxOp,
    "dropout": DropoutOp,
}
"""The ops of the unfused attention chain between its two products, by their part in it
(graph.scaled_dot_product_attention stands for the chain)."""

RESIDUAL_NORMS: dict[type[Operation], type[Operation]] = {LayerNormOp: AddOp}
"""Normalisations with a fused form that takes the residual add in front of them, and
the class of that add (graph.add_layer_norm)."""

RESIDUAL_NORM_GRADS: dict[type[Operation], type[Operation]] = {LayerNormGradOp: AddOp}
"""Normalisation gradients with a fused form that adds the residual stream's gradient to
their dx (autodiff.add_layer_norm_grad), and the class of that add."""

# ----------------------------------------------------------------------------
# Constraints
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HasEpilogueForm:
    """The op's class has an `Activation` in EPILOGUE_ACTIVATION_OF."""

    def holds(self, op: Operation) -> bool:
        return type(op) in EPILOGUE_ACTIVATION_OF


def _shape(v: object) -> tuple[int, ...] | None:
    t = getattr(v, "type", None)
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None


@dataclass(frozen=True)
class IsPart:
    """The op is the attention chain's part `part` (ATTENTION_PARTS)."""

    part: str

    def holds(self, op: Operation) -> bool:
        return type(op) is ATTENTION_PARTS[self.part]


@dataclass(frozen=True)
class MasksWithMinusInfinity:
    """A causal mask that fills with -inf (the forward's; fill 0 is a gradient's)."""

    def holds(self, op: Operation) -> bool:
        return isinstance(op, CausalMaskOp) and op.fill_value == float("-inf")


@dataclass(frozen=True)
class OverLastAxis:
    """The op's `axis` is its operand's last."""

    def holds(self, op: Operation) -> bool:
        if not isinstance(op, AicfcOp) or not op.operands:
            return False
        shape = _shape(op.operands[0])
        axis = op.kernel_params().get("axis")
        return shape is not None and isinstance(axis, int) and axis % len(shape) == len(shape) - 1


@dataclass(frozen=True)
class HeadProduct:
    """A plain graph.matmul of two rank-4 operands [B, H, *, *] with equal batch dims and
    the given transpose flags: attention's q k^T (transpose_b) or P v (none)."""

    transpose_b: bool

    def holds(self, op: Operation) -> bool:
        if not isinstance(op, MatmulOp) or op.transpose_a is not None:
            return False
        a, b = _shape(op.lhs), _shape(op.rhs)
        return (
            (op.transpose_b is not None) == self.transpose_b
            and a is not None
            and b is not None
            and len(a) == len(b) == 4
            and a[:2] == b[:2]
        )


@dataclass(frozen=True)
class LayerProduct:
    """A product that a gemm_epilogue can take: a matrix rhs (a layer's weight) and an
    lhs that is a matrix or an untransposed [..., M, K] (a Linear on [B, T, D])."""

    def holds(self, op: Operation) -> bool:
        if not isinstance(op, MatrixProductOp):
            return False
        a, b = _shape(op.operands[0]), _shape(op.operands[1])
        return (
            a is not None
            and b is not None
            and len(b) == 2
            and (len(a) == 2 or op.transpose_a is None)
        )


@dataclass(frozen=True)
class IsResidualAdd:
    """The op is the add class of a RESIDUAL_NORMS entry."""

    def holds(self, op: Operation) -> bool:
        return type(op) in RESIDUAL_NORMS.values()


@dataclass(frozen=True)
class HasResidualForm:
    """The op's class is a normalisation of RESIDUAL_NORMS."""

    def holds(self, op: Operation) -> bool:
        return type(op) in RESIDUAL_NORMS


@dataclass(frozen=True)
class HasResidualGradForm:
    """The op's class is a normalisation gradient of RESIDUAL_NORM_GRADS."""

    def holds(self, op: Operation) -> bool:
        return type(op) in RESIDUAL_NORM_GRADS


@dataclass(frozen=True)
class IsResidualGradAdd:
    """The op is the add class of a RESIDUAL_NORM_GRADS entry, of two like operands (no
    broadcast: both are the gradient of one [..., D] value)."""

    def holds(self, op: Operation) -> bool:
        return (
            type(op) in RESIDUAL_NORM_GRADS.values()
            and len(op.operands) == 2
            and op.operands[0].type == op.operands[1].type == op.results[0].type
        )


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
class SumsLeadingAxes:
    """A plain sum (SUM_REDUCTIONS) of a rank >= 2 input over every axis but the last,
    without keepdims: [..., N] -> [N], the bias gradient of a layer on any leading dims."""

    def holds(self, op: Operation) -> bool:
        if type(op) not in SUM_REDUCTIONS or not op.operands:
            return False
        shape = _shape(op.operands[0])
        if shape is None or len(shape) < 2:
            return False
        rank = len(shape)
        return SumsAxes(tuple(range(rank - 1)), rank).holds(op)


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
