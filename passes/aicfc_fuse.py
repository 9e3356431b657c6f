"""aicfc-fuse: op-flag fusion of GEMM epilogues and their backward (docs/design.md#fusion-patterns).

Per block of each func.func the pass builds the CSR data-flow graph
(passes/dataflow.py) and walks the ops in block order, trying each pattern
of passes/fusion_patterns.py at each op. A pattern is a chain of flag masks
along data-flow edges; a match is replaced by one fused op, built by the
pattern's builder below, and the matched ops are erased:

    act(bias_add(matmul(A, B), b))          -> gemm_epilogue(A, B, b, act)   [-> (Y, Z) for gelu]
    reduce_sum(act_grad(dY, s), axes=[0])    -> epilogue_grad(dY, s, act)    [-> (dZ, db)]
    cross_entropy(x, y), cross_entropy_grad(x, y, d) [, reduce_sum(.., axes=[0])]
                                             -> cross_entropy_with_grad(x, y, d) [-> (l, dx, db)]

An intermediate value with other users is allowed only where the fused op
re-exports it (gemm_epilogue's `pre_act` Z, epilogue_grad's dZ); those users
then read the fused op's result. The fused op takes the source location of
the first matched op, and is placed before the first op that reads any value
it replaces, so every use stays dominated. Rounds repeat until nothing fuses.

Option `patterns`: "all" (default), "forward" or "backward".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from aicfc.dialects.autodiff import CrossEntropyWithGradOp, EpilogueGradOp
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.flags import OpFlag
from aicfc.dialects.graph import Activation, GemmEpilogueOp, MatrixProductOp
from aicfc.passes.dataflow import DataFlowGraph
from aicfc.passes.fusion_patterns import EPILOGUE_ACTIVATIONS, PATTERN_GROUPS, FusionPattern, Step

DTYPE_BITS = OpFlag.DTYPE_F32 | OpFlag.DTYPE_F16 | OpFlag.DTYPE_BF16 | OpFlag.DTYPE_F64

# ----------------------------------------------------------------------------
# Matching: a chain of steps along CSR edges
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """A pattern matched at a chain of ops (in chain order, each consuming the previous).

    roles[i] is the step role of ops[i]; exports maps an export name
    (Step.exports_input) to the intermediate value the fused op must re-export.
    """

    pattern: FusionPattern
    ops: tuple[Operation, ...]
    roles: tuple[str, ...]
    exports: dict[str, SSAValue]

    def get(self, role: str) -> Operation | None:
        """The op that filled step `role`, or None if that optional step is absent."""
        return self.ops[self.roles.index(role)] if role in self.roles else None

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
    chain, roles = [start], [pattern.steps[0].role]
    exports: dict[str, SSAValue] = {}
    for step in pattern.steps[1:]:
        cur = chain[-1]
        single_use = bool(graph.flags(cur) & OpFlag.SINGLE_USE)
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
            roles.append(step.role)
            if step.exports_input is not None:
                exports[step.exports_input] = graph.ops[cur].results[0]
        elif not step.optional:
            return None
    if len(chain) < pattern.min_ops:
        return None
    return Match(pattern, tuple(graph.ops[i] for i in chain), tuple(roles), exports)


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


# ----------------------------------------------------------------------------
# Builders: one per fused-op kind
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    """A fused op, the value replacing the last matched op's result, and its
    re-exported results by export name."""

    op: Operation
    result: SSAValue
    exports: dict[str, SSAValue]


def build_gemm_epilogue(m: Match) -> Built:
    """gemm_epilogue(A, B, bias, act) with the gemm's transpose flags.

    The gemm step is a plain product (EmptyEpilogue), so the bias is the
    bias_add's (along N of the [M, N] product), or none without a bias step.
    pre_act (Z) is emitted for gelu (the backward needs gelu'(Z)) and whenever
    Z has users outside the match.
    """
    gemm, bias_op, act_op = m.get("gemm"), m.get("bias"), m.get("act")
    assert isinstance(gemm, MatrixProductOp)
    bias = bias_op.operands[1] if bias_op is not None else None
    act = EPILOGUE_ACTIVATIONS[type(act_op)] if act_op is not None else Activation.NONE
    z = m.exports.get("pre_act")
    with_pre_act = act == Activation.GELU or (z is not None and m.has_outside_uses(z))
    op = GemmEpilogueOp(
        gemm.operands[0],
        gemm.operands[1],
        bias,
        act,
        transpose_a=bool(gemm.transpose_a),
        transpose_b=bool(gemm.transpose_b),
        with_pre_act=with_pre_act and act != Activation.NONE,
    )
    exports: dict[str, SSAValue] = {"pre_act": op.pre_act} if op.pre_act is not None else {}
    return Built(op, op.result, exports)


def build_epilogue_grad(m: Match) -> Built:
    """epilogue_grad(dY, saved, act) -> (dZ, db): the act-grad's operands, the
    reduce's result is db, and dZ is re-exported for the dW and dX products."""
    act_grad = m.get("act_grad")
    assert act_grad is not None
    dy, saved = act_grad.operands
    op = EpilogueGradOp(dy, saved, EPILOGUE_ACTIVATIONS[type(act_grad)])
    return Built(op, op.grad_bias, {"grad_pre_act": op.grad_pre_act})


def build_loss_with_grad(m: Match) -> Built:
    """cross_entropy_with_grad(x, y, d) from the gradient op's operands: the loss is
    re-exported; with the bias-grad step its result is db and dx is re-exported."""
    grad_op = m.get("loss_grad")
    assert grad_op is not None
    logits, labels, dloss = grad_op.operands
    with_bias = m.get("bias_grad") is not None
    op = CrossEntropyWithGradOp(logits, labels, dloss, with_grad_bias=with_bias)
    exports: dict[str, SSAValue] = {"loss": op.loss}
    if op.grad_bias is None:
        return Built(op, op.grad_logits, exports)
    exports["grad_logits"] = op.grad_logits
    return Built(op, op.grad_bias, exports)


BUILDERS: dict[str, Callable[[Match], Built]] = {
    "gemm_epilogue": build_gemm_epilogue,
    "epilogue_grad": build_epilogue_grad,
    "loss_with_grad": build_loss_with_grad,
}
"""FusionPattern.builder -> the function that builds the fused op of a match."""

# ----------------------------------------------------------------------------
# Rewriting
# ----------------------------------------------------------------------------


def _insertion_anchor(m: Match, built: Built) -> Operation | None:
    """The op to insert the fused op before, or None if no place keeps SSA dominance.

    The anchor is the first op (in block order, from the match's first op) that
    reads a replaced value; every operand of the fused op must be defined before it.
    """
    block = m.ops[0].parent_block()
    assert block is not None
    readers = {m.ops[-1]}
    for value in m.exports.values():
        readers.update(
            r for u in value.uses if (r := block.find_ancestor_op_in_block(u.operation)) is not None
        )
    readers.difference_update(m.ops[:-1])
    op: Operation | None = m.ops[0]
    while op is not None and op not in readers:
        op = op.next_op
    anchor = op
    after_anchor: set[Operation] = set()
    while op is not None and op is not m.ops[-1]:
        after_anchor.add(op)
        op = op.next_op
    for v in built.op.operands:
        owner = v.owner
        if isinstance(owner, Operation) and (owner in m.ops or owner in after_anchor):
            return None
    return anchor


def apply_match(m: Match, rewriter: PatternRewriter) -> bool:
    """Replace the matched ops by the pattern's fused op.

    Returns False (and leaves the IR as it was) when the fused op cannot be
    placed, or when a matched value read outside the match has no replacement
    (a table entry exporting a value its builder does not provide).
    """
    built = BUILDERS[m.pattern.builder](m)
    replaced: dict[SSAValue, SSAValue] = {m.ops[-1].results[0]: built.result}
    replaced.update((m.exports[n], new) for n, new in built.exports.items() if n in m.exports)
    orphaned = any(r not in replaced and m.has_outside_uses(r) for op in m.ops for r in op.results)
    anchor = None if orphaned else _insertion_anchor(m, built)
    if anchor is None:
        built.op.erase()
        return False
    copy_location(m.ops[0], built.op)
    rewriter.insert(built.op, InsertPoint.before(anchor))
    for old, new in replaced.items():
        new.name_hint = old.name_hint
        rewriter.replace_all_uses_with(old, new)
    for op in reversed(m.ops):
        rewriter.erase(op)
    return True


@dataclass
class FuseFunction(RewritePattern):
    """Fuse every match of `patterns` in each block of a func.func, to a fixed point."""

    patterns: tuple[FusionPattern, ...]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter) -> None:
        for block in op.body.blocks:
            progress = True
            while progress:  # each fusion removes >= 1 op, so this ends
                matches = find_matches(DataFlowGraph.of_block(block), self.patterns)
                progress = any([apply_match(m, rewriter) for m in matches])


@dataclass(frozen=True)
class AicfcFusePass(ModulePass):
    """Op-flag fusion (see the module docstring).

    patterns: "all", "forward" (gemm -> bias_add -> act) or "backward"
              (act_grad -> reduce_sum); anything else raises ValueError.
    """

    name = "aicfc-fuse"

    patterns: str = "all"

    def __post_init__(self) -> None:
        if self.patterns not in PATTERN_GROUPS:
            raise ValueError(
                f"aicfc-fuse: unknown value '{self.patterns}' for option 'patterns'; "
                f"expected one of: {', '.join(PATTERN_GROUPS)}"
            )

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        walker = PatternRewriteWalker(
            FuseFunction(PATTERN_GROUPS[self.patterns]), apply_recursively=False
        )
        walker.rewrite_module(op)
