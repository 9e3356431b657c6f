"""What a fusion pattern is, and how it matches: steps of flag masks along CSR edges.

A pattern is a chain of steps along data-flow edges: step k+1's op consumes
step k's result through operand `via_operand`. A step matches an op when the
op's flags (static | derived, dialects/flags.py) contain `required`, share no
bit with `forbidden`, and every constraint holds. Optional steps may be
skipped. Across a match the matcher also demands: one DTYPE_* bit for all
ops, and SINGLE_USE for each intermediate result (or, for an op with several results,
one use of result 0 and none of the others), unless the consuming step
declares `exports_input`, i.e. the fused op re-exports that value as a result
(cuBLASLt's GELU_AUX output `pre_act`, the `grad_pre_act` dZ of
epilogue_grad), so its other users can read it from the fused op, or declares
`replaces_rest` (the fused op provides the further results of the op it consumes).

A `sibling` step does not consume the previous step's result: it reads the
same operands (a loss and its gradient both read logits and labels), and
its `exports_input` re-exports the previous step's result (the loss).

A `stochastic` step may match an op that draws random numbers (graph.dropout): its
counter-based mask depends only on (seed, offset, element index), so a fused op that
draws the same mask (scaled_dot_product_attention with dropout) computes the same
values. A pattern's `condition`, if any, decides on the whole match (operands of
different steps that must agree); the last matched op's further results (layer_norm's
mean and rstd) are replaced by the fused op's `rest`.

This module knows no op: the patterns (passes/fusion/patterns.py) name the
flags, constraints and builders. The matcher is the one answer to "what does
aicfc-fuse fuse": the pass applies its matches, and the operator report
(passes/analysis/) lists them as candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free

from aicfc.dialects.flags import OpFlag
from aicfc.passes.dataflow import DataFlowGraph

F = OpFlag

FUSIBLE = F.SAFE_NODE | F.LAYOUT_CONTIG
"""Bits every matched op needs: no side effect or randomness, dense row-major results."""

DTYPE_BITS = F.DTYPE_F32 | F.DTYPE_F16 | F.DTYPE_BF16 | F.DTYPE_F64


class Constraint(Protocol):
    """A further predicate on one op of a step (passes/fusion/constraints.py)."""

    def holds(self, op: Operation) -> bool: ...


@dataclass(frozen=True)
class Step:
    """One op of a pattern.

    required:      OpFlag bits the op must have (FUSIBLE is always added).
    forbidden:     OpFlag bits the op must not have.
    optional:      the step may be absent from a match.
    via_operand:   the operand that consumes the previous step's result (0 for step 0).
    exports_input: if set, the fused op re-exports the consumed value under this
                   result name, so that value may have other uses.
    sibling:       the op reads the previous step's operands (all of them, as its
                   first operands) instead of its result; exports_input then names
                   the previous step's result.
    replaces_rest: the fused op also stands for the previous step's further results
                   (layer_norm_grad's dweight and dbias: Built.replaced), so they may
                   have other users; its result 0 must still have this op as its only one.
    stochastic:    the op may draw random numbers (SAFE_NODE is not required; it must
                   still be free of side effects).
    constraints:   further predicates on the op.
    """

    required: OpFlag
    forbidden: OpFlag = F.NONE
    optional: bool = False
    via_operand: int = 0
    exports_input: str | None = None
    sibling: bool = False
    replaces_rest: bool = False
    stochastic: bool = False
    constraints: tuple[Constraint, ...] = ()

    def matches(self, op: Operation, flags: OpFlag) -> bool:
        """True when `op` (with static | derived `flags`) may fill this step."""
        need = self.required | (FUSIBLE & ~F.SAFE_NODE if self.stochastic else FUSIBLE)
        return (
            flags & need == need
            and not flags & self.forbidden
            and (not self.stochastic or is_side_effect_free(op))
            and all(c.holds(op) for c in self.constraints)
        )


@dataclass(frozen=True)
class Built:
    """A fused op, the value replacing the last matched op's result, its re-exported
    results by export name (Step.exports_input), the values replacing the last
    matched op's further results, in order (None: that result has no replacement, so
    it must have no users), (old, new) pairs for results of earlier matched ops that the
    fused op provides too (`replaced`: a Step.replaces_rest), and the producers of the
    match's operands that the fused op reads through instead (`absorbed`, producers
    first: the layout ops in front of packed attention), erased with the match once
    nothing else reads them."""

    op: Operation
    result: SSAValue
    exports: dict[str, SSAValue]
    rest: tuple[SSAValue | None, ...] = ()
    replaced: tuple[tuple[SSAValue, SSAValue], ...] = ()
    absorbed: tuple[Operation, ...] = ()


Builder = Callable[..., Built]
"""builder(match, op_of_step_0, op_of_step_1, ...) -> Built: one operand per step, in
step order, None for an absent optional step (so the op of each step is a parameter)."""


@dataclass(frozen=True)
class FusionPattern:
    """A named chain of steps, the builder of its fused op, and that op's class.

    group:    "forward" or "backward" (selected by the pass option `patterns`).
    builder:  called as builder(match, *match.by_step) (see `Builder`).
    fused_op: the class of the op the builder makes (what the report names).
    min_ops:  the fewest matched ops worth fusing.
    condition: a predicate on the whole match (called with its ops by step, None for
              an absent optional step), for what no single step can check.
    """

    name: str
    group: str
    steps: tuple[Step, ...]
    builder: Builder
    fused_op: type[Operation]
    min_ops: int = 2
    condition: Callable[..., bool] | None = None

    def build(self, m: Match) -> Built:
        """The fused op of `m` (a match of this pattern)."""
        built = self.builder(m, *m.by_step)
        assert isinstance(built.op, self.fused_op), (self.name, built.op.name)
        return built


@dataclass(frozen=True)
class Match:
    """A pattern matched at a chain of ops (each consuming the previous, or a sibling).

    ops:     the matched ops in chain order.
    by_step: one entry per pattern step: its op, or None where an optional step is absent.
    exports: export name (Step.exports_input) -> the intermediate value the fused op
             must re-export.
    """

    pattern: FusionPattern
    ops: tuple[Operation, ...]
    by_step: tuple[Operation | None, ...]
    exports: dict[str, SSAValue]

    def has_outside_uses(self, value: SSAValue) -> bool:
        """True when `value` is read by an op outside this match."""
        return any(use.operation not in self.ops for use in value.uses)


def match_at(
    pattern: FusionPattern, start: int, graph: DataFlowGraph, claimed: set[int]
) -> Match | None:
    """The longest match of `pattern` starting at op `start`, or None.

    Step k+1 must be a consumer of step k's result 0 through its `via_operand`
    (or, for a sibling step, read step k's operands), not yet claimed by another
    match, with step k's DTYPE_* bits, and step k's result must have a single use
    unless step k+1 re-exports it.
    """
    flags = graph.flags(start)
    if start in claimed or not pattern.steps[0].matches(graph.ops[start], flags):
        return None
    dtype = flags & DTYPE_BITS
    chain: list[int] = [start]
    by_step: list[Operation | None] = [graph.ops[start]]
    exports: dict[str, SSAValue] = {}
    for step in pattern.steps[1:]:
        cur = chain[-1]
        single_use = (
            bool(graph.flags(cur) & F.SINGLE_USE)
            or _feeds_one_op(graph.ops[cur])
            or (step.replaces_rest and graph.ops[cur].results[0].has_one_use())
        )
        found = None
        if step.sibling:
            found = _sibling(graph, cur, step, claimed, dtype)
        elif single_use or step.exports_input is not None:
            for edge in graph.out_edges(cur):
                j = edge.consumer
                if (
                    edge.result == 0
                    and edge.operand == step.via_operand
                    and j not in claimed
                    and (f := graph.flags(j)) & DTYPE_BITS == dtype
                    and step.matches(graph.ops[j], f)
                ):
                    found = j
                    break
        if found is not None:
            chain.append(found)
            by_step.append(graph.ops[found])
            if step.exports_input is not None:
                exports[step.exports_input] = graph.ops[cur].results[0]
        elif not step.optional:
            return None
        else:
            by_step.append(None)
    if len(chain) < pattern.min_ops:
        return None
    if pattern.condition is not None and not pattern.condition(*by_step):
        return None
    return Match(pattern, tuple(graph.ops[i] for i in chain), tuple(by_step), exports)


def _feeds_one_op(op: Operation) -> bool:
    """Result 0 has one use and the further results none (attention's unread lse): the
    op is as good as single-use for a chain through result 0."""
    return (
        bool(op.results) and op.results[0].has_one_use() and not any(r.uses for r in op.results[1:])
    )


def _sibling(
    graph: DataFlowGraph, cur: int, step: Step, claimed: set[int], dtype: OpFlag
) -> int | None:
    """The first op (in block order) that reads all of op `cur`'s operands as its
    first operands and matches `step`, or None."""
    prev = graph.ops[cur]
    if not prev.operands:
        return None
    n = len(prev.operands)
    users = {u.operation for u in prev.operands[0].uses if graph.contains(u.operation)}
    for j in sorted(graph.index(op) for op in users):
        op = graph.ops[j]
        if (
            j != cur
            and j not in claimed
            and tuple(op.operands[:n]) == tuple(prev.operands)
            and (f := graph.flags(j)) & DTYPE_BITS == dtype
            and step.matches(op, f)
        ):
            return j
    return None


def find_matches(graph: DataFlowGraph, patterns: Sequence[FusionPattern]) -> list[Match]:
    """Disjoint matches, greedily in block order (first pattern first at each op)."""
    claimed: set[int] = set()
    matches: list[Match] = []
    for i in range(graph.num_nodes):
        for pattern in patterns:
            m = match_at(pattern, i, graph, claimed)
            if m is not None:
                claimed.update(graph.index(op) for op in m.ops)
                matches.append(m)
                break
    return matches
