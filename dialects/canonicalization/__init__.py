"""Canonicalization patterns of the graph dialect, attached to the ops lazily.

xDSL's `canonicalize` pass asks each op for its `HasCanonicalizationPatternsTrait`
patterns. `GraphCanonicalization` is that trait for every graph op (it sits on
the `GraphOp` base class); it imports the pattern modules only when the pass
first asks, so `dialects/graph/` stays declarative and never imports
rewriting code, and importing the dialect never imports the runtime.

The patterns (docs/design.md#value-preserving-rewrites), in `graph.py` next to
this file (constant folding needs the NumPy reference, which a dialect may not
import: it is the pass `aicfc-fold-constants`, run after `canonicalize` in the
train pipeline):

    transpose(transpose(x, p), q)        -> x                  if p[q[i]] == i
                                          -> transpose(x, p∘q)  otherwise
    transpose(x, identity)               -> x
    reshape(x) : S -> S                  -> x
    reshape(reshape(x))                  -> reshape(x)
    broadcast_to(x) : S -> S             -> x
    add(a, broadcast_to(b : [C] -> [..., C]))  -> bias_add(a, b)   (either order)
    mul(x, splat c)                      -> scale(x, c)        (either order)
    scale(x, 1)                          -> x
    gemm_epilogue(...) with unused pre_act     -> gemm_epilogue(...) without it
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait


@dataclass(frozen=True)
class GraphCanonicalization(HasCanonicalizationPatternsTrait):
    """The canonicalization patterns of one graph op class, looked up lazily by class."""

    def verify(self, op: Operation) -> None:
        return None

    def get_patterns(self, op: type[Operation]) -> tuple[RewritePattern, ...]:
        from aicfc.dialects.canonicalization.graph import patterns_for

        return patterns_for(op)

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return ()
