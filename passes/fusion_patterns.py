"""The fusion pattern table of `aicfc-fuse` (docs/design.md#fusion-patterns): patterns are data.

A pattern is a chain of steps along data-flow edges: step k+1's op consumes
step k's result through operand `via_operand`. A step matches an op when the
op's flags (static | derived, dialects/flags.py) contain `required`, share no
bit with `forbidden`, and every constraint holds. Optional steps may be
skipped. Across a match the pass also demands: one DTYPE_* bit for all ops,
and SINGLE_USE for each intermediate result, unless the consuming step
declares `exports_input`, i.e. the fused op re-exports that value as a result
(cuBLASLt's GELU_AUX output `pre_act`, the `grad_pre_act` dZ of
epilogue_grad), so its other users can read it from the fused op.

A `sibling` step does not consume the previous step's result: it reads the
same operands (a loss and its gradient both read logits and labels), and
its `exports_input` re-exports the previous step's result (the loss).

Adding a pattern is adding a `FusionPattern` entry below. A new kind of fused
op also needs its builder once (`BUILDERS` in passes/aicfc_fuse.py); a new
activation with an epilogue form is a new row of `EPILOGUE_ACTIVATIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from aicfc.dialects.autodiff import CrossEntropyGradOp, GeluGradOp, ReluGradOp
from aicfc.dialects.flags import OpFlag
from aicfc.dialects.graph import (
    Activation,
    CrossEntropyOp,
    GeluOp,
    MatrixProductOp,
    ReduceSumOp,
    ReluOp,
)

F = OpFlag

# ----------------------------------------------------------------------------
# Op tables: what an op class means inside an epilogue
# ----------------------------------------------------------------------------

EPILOGUE_ACTIVATIONS: dict[type[Operation], Activation] = {
    ReluOp: Activation.RELU,
    GeluOp: Activation.GELU,
    ReluGradOp: Activation.RELU,
    GeluGradOp: Activation.GELU,
}
"""Activations (and their gradients) that have a cuBLASLt-style epilogue form.

graph.tanh has none (cuBLASLt has no TANH epilogue): it is absent, so it never fuses.
"""

LOSS_GRADS: dict[type[Operation], type[Operation]] = {CrossEntropyOp: CrossEntropyGradOp}
"""Losses with a fused (loss, gradient) form, and the class of their gradient op
(graph.mse_loss has none: its gradient is one elementwise pass, nothing to share)."""

SUM_REDUCTIONS: frozenset[type[Operation]] = frozenset({ReduceSumOp})
"""Reductions whose value is a plain sum (a bias gradient is a column sum of dZ)."""

# ----------------------------------------------------------------------------
# Constraints: small predicates on one op, held as data
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HasEpilogueForm:
    """The op's class has an `Activation` in EPILOGUE_ACTIVATIONS."""

    def holds(self, op: Operation) -> bool:
        return type(op) in EPILOGUE_ACTIVATIONS


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


Constraint = HasEpilogueForm | ResultRank | SumsAxes | EmptyEpilogue | HasFusedGradForm | IsLossGrad

# ----------------------------------------------------------------------------
# Steps and patterns
# ----------------------------------------------------------------------------

FUSIBLE = F.SAFE_NODE | F.LAYOUT_CONTIG
"""Bits every matched op needs: no side effect or randomness, dense row-major results."""


@dataclass(frozen=True)
class Step:
    """One op of a pattern.

    role:          the name the builder uses to find this step's op.
    required:      OpFlag bits the op must have (FUSIBLE is always added).
    forbidden:     OpFlag bits the op must not have.
    optional:      the step may be absent from a match.
    via_operand:   the operand that consumes the previous step's result (0 for step 0).
    exports_input: if set, the fused op re-exports the consumed value under this
                   result name, so that value may have other uses.
    sibling:       the op reads the previous step's operands (all of them, as its
                   first operands) instead of its result; exports_input then names
                   the previous step's result.
    constraints:   further predicates on the op.
    """

    role: str
    required: OpFlag
    forbidden: OpFlag = F.NONE
    optional: bool = False
    via_operand: int = 0
    exports_input: str | None = None
    sibling: bool = False
    constraints: tuple[Constraint, ...] = ()

    def matches(self, op: Operation, flags: OpFlag) -> bool:
        """True when `op` (with static | derived `flags`) may fill this step."""
        need = self.required | FUSIBLE
        return (
            flags & need == need
            and not flags & self.forbidden
            and all(c.holds(op) for c in self.constraints)
        )


@dataclass(frozen=True)
class FusionPattern:
    """A named chain of steps and the builder of its fused op.

    group:    "forward" or "backward" (selected by the pass option `patterns`).
    builder:  key of passes/aicfc_fuse.py BUILDERS.
    min_ops:  the fewest matched ops worth fusing.
    """

    name: str
    group: str
    steps: tuple[Step, ...]
    builder: str
    min_ops: int = 2


# act(bias_add(matmul(A, B), b)) -> gemm_epilogue(A, B, b, act); bias and act each optional.
GEMM_BIAS_ACT = FusionPattern(
    name="gemm_bias_act",
    group="forward",
    steps=(
        Step("gemm", F.IS_GEMM_LIKE, constraints=(ResultRank(2), EmptyEpilogue())),
        Step("bias", F.IS_BIAS_ADD | F.IS_ELEMENTWISE, forbidden=F.IS_FUSED, optional=True),
        Step(
            "act",
            F.IS_ACTIVATION | F.IS_ELEMENTWISE,
            forbidden=F.IS_FUSED,
            optional=True,
            exports_input="pre_act",
            constraints=(HasEpilogueForm(),),
        ),
    ),
    builder="gemm_epilogue",
)

# (act_grad(dY, saved), reduce_sum(act_grad(dY, saved), axes=[0])) -> epilogue_grad(dY, saved, act)
ACT_GRAD_BIAS_GRAD = FusionPattern(
    name="act_grad_bias_grad",
    group="backward",
    steps=(
        Step(
            "act_grad",
            F.IS_ACTIVATION_GRAD | F.IS_ELEMENTWISE,
            forbidden=F.IS_FUSED,
            constraints=(ResultRank(2), HasEpilogueForm()),
        ),
        Step(
            "bias_grad",
            F.IS_REDUCTION | F.IS_LINEAR,
            forbidden=F.IS_FUSED | F.IS_LOSS,
            exports_input="grad_pre_act",
            constraints=(SumsAxes(axes=(0,), rank=2),),
        ),
    ),
    builder="epilogue_grad",
)

# (loss(x, y), loss_grad(x, y, d), reduce_sum(loss_grad, axes=[0]))
#   -> cross_entropy_with_grad(x, y, d) -> (loss, dx, db); the bias-grad step is optional.
LOSS_WITH_GRAD = FusionPattern(
    name="loss_with_grad",
    group="backward",
    steps=(
        Step(
            "loss",
            F.IS_LOSS | F.IS_REDUCTION,
            forbidden=F.IS_FUSED,
            constraints=(HasFusedGradForm(),),
        ),
        Step(
            "loss_grad",
            F.IS_BACKWARD,
            forbidden=F.IS_FUSED,
            sibling=True,
            exports_input="loss",
            constraints=(ResultRank(2), IsLossGrad()),
        ),
        Step(
            "bias_grad",
            F.IS_REDUCTION | F.IS_LINEAR,
            forbidden=F.IS_FUSED | F.IS_LOSS,
            optional=True,
            exports_input="grad_logits",
            constraints=(SumsAxes(axes=(0,), rank=2),),
        ),
    ),
    builder="loss_with_grad",
)

FUSION_PATTERNS: tuple[FusionPattern, ...] = (GEMM_BIAS_ACT, ACT_GRAD_BIAS_GRAD, LOSS_WITH_GRAD)
"""Every pattern, tried in this order at each op (block order)."""

PATTERN_GROUPS: dict[str, tuple[FusionPattern, ...]] = {
    "all": FUSION_PATTERNS,
    "forward": tuple(p for p in FUSION_PATTERNS if p.group == "forward"),
    "backward": tuple(p for p in FUSION_PATTERNS if p.group == "backward"),
}
"""Values of the pass option `patterns`."""
