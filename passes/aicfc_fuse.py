"""aicfc-fuse: op-flag fusion of GEMM epilogues and their backward (docs/design.md#fusion-patterns).

Per block of each func.func the pass builds the CSR data-flow graph
(passes/dataflow.py), asks the matcher for the disjoint matches of the
pattern table (passes/fusion/: patterns.py is the table, matcher.py the
matcher), and replaces each match by the fused op its pattern's builder makes;
the matched ops are erased:

    act(bias_add(matmul(A, B), b))          -> gemm_epilogue(A, B, b, act)   [-> (Y, Z) for gelu]
    reduce_sum(act_grad(dY, s), axes=[0])    -> epilogue_grad(dY, s, act)    [-> (dZ, db)]
    epilogue_grad(matmul(A, B), s)           -> gemm_epilogue_grad(A, B, s, act) [-> (dZ, db)]
    cross_entropy(x, y), cross_entropy_grad(x, y, d) [, reduce_sum(.., axes=[0])]
                                             -> cross_entropy_with_grad(x, y, d) [-> (l, dx, db)]
    merge(scaled_dot_product_attention(heads(split(qkv))))
                                             -> packed_qkv_attention(qkv)   [-> (o, lse)]
    add(dr, layer_norm_grad(dy, x, ...)#dx)   -> add_layer_norm_grad(dy, dr, x, ...)
                                                                           [-> (dx, dw, db)]

An intermediate value with other users is allowed only where the fused op
re-exports it (gemm_epilogue's `pre_act` Z, epilogue_grad's dZ); those users
then read the fused op's result. The fused op takes the source location of
the first matched op, and is placed before the first op that reads any value
it replaces, so every use stays dominated. Rounds repeat until nothing fuses.

Option `patterns`: "all" (default), "forward" or "backward"; option `exclude`: the name
of one pattern of the table to leave out (e.g. "gemm_epilogue_grad", to compare a step
with and without it), "" for none.
"""

from __future__ import annotations

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

from aicfc.dialects.diagnostics import copy_location
from aicfc.passes.dataflow import DataFlowGraph
from aicfc.passes.fusion.matcher import Built, FusionPattern, Match, find_matches
from aicfc.passes.fusion.patterns import FUSION_PATTERNS, PATTERN_GROUPS

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
    for value in (*m.exports.values(), *(old for old, _ in built.replaced)):
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
    built = m.pattern.build(m)
    replaced: dict[SSAValue, SSAValue] = {m.ops[-1].results[0]: built.result}
    replaced.update(
        (old, new)
        for old, new in zip(m.ops[-1].results[1:], built.rest, strict=False)
        if new is not None
    )
    replaced.update((m.exports[n], new) for n, new in built.exports.items() if n in m.exports)
    replaced.update(built.replaced)
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
    for op in reversed(built.absorbed):
        if not any(r.uses for r in op.results):
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
              (act_grad -> reduce_sum, ...); anything else raises ValueError.
    exclude:  a pattern name to leave out, or "" (an unknown name raises ValueError).
    """

    name = "aicfc-fuse"

    patterns: str = "all"
    exclude: str = ""

    def __post_init__(self) -> None:
        if self.patterns not in PATTERN_GROUPS:
            raise ValueError(
                f"aicfc-fuse: unknown value '{self.patterns}' for option 'patterns'; "
                f"expected one of: {', '.join(PATTERN_GROUPS)}"
            )
        names = [p.name for p in FUSION_PATTERNS]
        if self.exclude and self.exclude not in names:
            raise ValueError(
                f"aicfc-fuse: unknown pattern '{self.exclude}' for option 'exclude'; "
                f"expected one of: {', '.join(names)}"
            )

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        chosen = tuple(p for p in PATTERN_GROUPS[self.patterns] if p.name != self.exclude)
        walker = PatternRewriteWalker(FuseFunction(chosen), apply_recursively=False)
        walker.rewrite_module(op)
