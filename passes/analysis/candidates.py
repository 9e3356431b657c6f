"""Optimization candidates of a function's nodes, each from the rule that would act on it.

Two kinds. The *information* candidates come from the report's own facts
(expansions, collapse points) and say where to measure. The *rewrite*
candidates ask the matchers of the passes that would do the rewrite, so the
report proposes exactly what those passes do and never re-derives their
conditions:

    fold linear∘linear   passes/linear_layers.py `match_pair`, `Pair.folded_is_smaller`
                         (aicfc-fold-linear's matcher and its size rule)
    fuse                 passes/fusion/ `find_matches` over FUSION_PATTERNS (aicfc-fuse's
                         matcher); matches whose ops are all network nodes (no gradient
                         node, no autodiff op)
    remove / merge       the canonicalization patterns of the op's class
                         (dialects/canonicalization/graph.py `patterns_for`, `match`);
                         REWRITE_CANDIDATES words the patterns the report lists
    precompute           aicfc-fold-constants' `constant_operands` (whether it then folds
                         depends on the values: IR growth, dtypes)

Gradient nodes are left out of the information, fold and fuse candidates.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import func

from aicfc.dialects.canonicalization.graph import (
    GraphRewrite,
    RemoveIdentity,
    ReshapeOfReshape,
    TransposeOfTranspose,
    patterns_for,
)
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.passes.aicfc_fold_constants import constant_operands
from aicfc.passes.analysis.nodes import NodeGraph
from aicfc.passes.analysis.report import Candidate, Collapse, Node
from aicfc.passes.dataflow import DataFlowGraph
from aicfc.passes.fusion.matcher import find_matches
from aicfc.passes.fusion.patterns import FUSION_PATTERNS
from aicfc.passes.linear_layers import match_pair

# ----------------------------------------------------------------------------
# Information: where to measure
# ----------------------------------------------------------------------------


def _pointwise_collapse_after(g: NodeGraph, node: Node) -> Node | None:
    """The collapse-producing activation reading `node`'s output (itself, if fused)."""
    if node.kind == "Linear" and "collapse-producing" in node.properties:
        return node
    user = g.sole_user(node)
    if (
        user is not None
        and "collapse-producing" in user.properties
        and static_flags(user.ops[0]) & OpFlag.IS_ACTIVATION
    ):
        return user
    return None


def information_candidates(g: NodeGraph, collapses: list[Collapse]) -> list[Candidate]:
    """Where the measured report should look: expanding layers, collapsing activations,
    and an expansion followed by a collapse."""
    out: list[Candidate] = []
    collapse_nodes = {c.node for c in collapses}
    for n in g.linears():
        assert n.in_features is not None and n.out_features is not None
        if n.out_features > n.in_features:
            out.append(
                Candidate(
                    f"inspect effective rank of {n.label}",
                    f"it expands {n.in_features} -> {n.out_features}, so its outputs span at most "
                    f"{n.in_features} of {n.out_features} dimensions",
                    (n.index,),
                )
            )
    for c in collapses:
        node = g.nodes[c.node]
        if static_flags(node.ops[-1]) & OpFlag.IS_ACTIVATION:
            name = node.activation or node.kind
            out.append(
                Candidate(
                    f"measure {name} activation ratio at Node {node.index}",
                    f"{c.reason}; units that are never active on real inputs are dead "
                    "(aicfc.analysis.measure or Program.report(x))",
                    (node.index,),
                )
            )
    for n in g.linears():
        assert n.in_features is not None and n.out_features is not None
        act = _pointwise_collapse_after(g, n)
        if n.out_features > n.in_features and act is not None and act.index in collapse_nodes:
            collapser = f"its {n.activation}" if act is n else act.label
            out.append(
                Candidate(
                    "consider hidden dimension reduction",
                    f"{n.label} expands {n.in_features} -> {n.out_features} and {collapser} "
                    "then collapses part of it (expansion followed by collapse); the measured "
                    f"dead units say by how much {n.out_features} can shrink",
                    (n.index, act.index),
                )
            )
    return out


# ----------------------------------------------------------------------------
# Rewrites: what the passes' matchers say they would do
# ----------------------------------------------------------------------------


def fold_candidates(g: NodeGraph) -> list[Candidate]:
    """Pairs of Linear nodes that aicfc-fold-linear matches, by the first layer's node:
    "fold" where the folded weight is not larger, "keep apart" (a low-rank factorisation)
    where it is."""
    pairs: list[tuple[Node, Node, tuple[int, int, int], bool]] = []
    for second in g.linears():
        pair = match_pair(second.ops[0])
        if pair is None or tuple(pair.second.ops()) != second.ops:
            continue
        first = g.node_of.get(pair.first.head)
        if first is None or first.kind != "Linear" or tuple(pair.first.ops()) != first.ops:
            continue
        pairs.append((first, second, pair.sizes(), pair.folded_is_smaller()))
    out: list[Candidate] = []
    for first, second, (a, h, b), smaller in sorted(pairs, key=lambda p: p[0].index):
        before = h * a + b * h
        after = b * a
        span = f"{first.label} and {second.label}"
        if smaller:
            out.append(
                Candidate(
                    f"fold {span} into one Linear({a} -> {b})",
                    f"nothing nonlinear between them; the weight needs {after} instead of {before} "
                    "parameters (aicfc-fold-linear, inference only)",
                    (first.index, second.index),
                )
            )
        else:
            out.append(
                Candidate(
                    f"keep {span} apart",
                    f"nothing nonlinear between them, but one Linear({a} -> {b}) needs {after} "
                    f"weight parameters instead of {before} (a factorised low-rank layer; "
                    "aicfc-fold-linear{force=true} folds it anyway)",
                    (first.index, second.index),
                )
            )
    return out


def _and(labels: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def fuse_candidates(fn: func.FuncOp, g: NodeGraph) -> list[Candidate]:
    """What aicfc-fuse would fuse in `fn`'s blocks, where every matched op is a network node."""
    out: list[Candidate] = []
    for block in fn.body.blocks:
        for m in find_matches(DataFlowGraph.of_block(block), FUSION_PATTERNS):
            nodes: list[Node] = []
            for op in m.ops:
                n = g.node_of.get(op)
                if n is None or n.gradient:
                    break
                if n not in nodes:
                    nodes.append(n)
            else:
                parts = " + ".join(op.name for op in m.ops)
                out.append(
                    Candidate(
                        f"fuse {_and([n.label for n in nodes])} into one {m.pattern.fused_op.name}",
                        f"{parts} run as separate kernels; one epilogue saves writing and "
                        "re-reading the intermediate (aicfc-fuse)",
                        tuple(n.index for n in nodes),
                    )
                )
    return out


def _remove(nodes: list[Node]) -> Candidate:
    (n,) = nodes
    return Candidate(
        f"remove {n.label}", "it returns its input unchanged (canonicalize)", (n.index,)
    )


def _merge(nodes: list[Node]) -> Candidate:
    src, n = nodes
    kind = n.kind.lower()
    return Candidate(
        f"merge {src.label} and {n.label}",
        f"a {kind} of a {kind} is one {kind} or none (canonicalize)",
        (src.index, n.index),
    )


REWRITE_CANDIDATES: dict[type[GraphRewrite], Callable[[list[Node]], Candidate]] = {
    RemoveIdentity: _remove,
    TransposeOfTranspose: _merge,
    ReshapeOfReshape: _merge,
}
"""Canonicalization patterns the report lists, in order of precedence (one candidate per
node), and how each words the nodes of its match; patterns not here are not listed."""


def rewrite_candidates(g: NodeGraph) -> list[Candidate]:
    """Per single-op node: the first canonicalization pattern of REWRITE_CANDIDATES that
    matches it, else "precompute" when aicfc-fold-constants may fold it."""
    out: list[Candidate] = []
    for n in g.nodes:
        if len(n.ops) != 1:
            continue
        op = n.ops[0]
        matched = {type(p): p.match(op) for p in patterns_for(type(op))}
        for cls, word in REWRITE_CANDIDATES.items():
            ops = matched.get(cls)
            nodes = [g.node_of.get(o) for o in ops] if ops is not None else []
            if ops is not None and all(m is not None for m in nodes):
                out.append(word([m for m in nodes if m is not None]))
                break
        else:
            if constant_operands(op) is not None:
                out.append(
                    Candidate(
                        f"precompute {n.label}",
                        "all its operands are constants (aicfc-fold-constants)",
                        (n.index,),
                    )
                )
    return out


def candidates(fn: func.FuncOp, g: NodeGraph, collapses: list[Collapse]) -> list[Candidate]:
    """Every candidate of `fn`, in the report's order."""
    return (
        information_candidates(g, collapses)
        + fold_candidates(g)
        + fuse_candidates(fn, g)
        + rewrite_candidates(g)
    )
