"""The operator analysis report (docs/design.md#operator-analysis): what ops do to information.

`analyze_module(module)` walks every `func.func` and describes each graph op
(its input and output shapes, dtype, parameters, FLOPs, bytes moved and
properties), then totals, collapse points, linear expansions and contractions,
and optimization candidates derived from those facts. `str(report)` is the
text `aicfc-opt -p aicfc-analyze` prints.

The measured report (`aicfc.analysis.measure`, aicfc/measured.py) adds facts
only data can give, by running the inference function on a real batch; it
lives in the API layer because it executes IR. This package only reads IR, so
the pass `aicfc-analyze` can use it without depending on the API.

Nodes. A *Linear* node is `graph.matmul` (optionally followed by the
`graph.bias_add` that is its only user) or `graph.gemm_epilogue`, whose weight
(rhs) and bias are function arguments with `aicfc.role = "param"` and whose
lhs is not transposed: one layer y = x W^T + b, reported as one node. Every
other graph op is its own node. Ops of other dialects are not nodes: autodiff
ops (`autodiff.backward`, backward primitives, optimizer steps) are listed
separately under "Training ops" with their FLOPs and bytes, and left out of
the totals, collapse points and candidates, which describe the network, not
its training. After aicfc-expand-backward a train step also computes
gradients with graph ops (dX = dZ W is a graph.matmul): a graph op that reads
a value computed from an autodiff op is a *gradient node*, marked so, counted
in the totals (it runs) and left out of the facts and candidates.

Counting conventions are `AicfcOp`'s (dialects/base.py): a multiply-add is 2
FLOPs; bytes moved are each operand read once plus each result written once.
A Linear node's FLOPs and bytes are the sums of its ops as they run (unfused
matmul + bias_add write and re-read the intermediate). Total parameters are
the elements of the function's distinct `param` arguments.

The package, by job:

    report.py      the report's records (Node, Candidate, FunctionReport, Report, ...)
                   and their text
    nodes.py       the node table of a function (Linear nodes, gradient nodes) and the
                   producer/consumer relations between nodes
    facts.py       collapse points, expansions and contractions, training ops, totals
    candidates.py  optimization candidates; the rewrite candidates ask the passes'
                   own matchers (fusion table, canonicalization patterns, linear_layers)
"""

from __future__ import annotations

from xdsl.dialects import builtin, func

from aicfc.dialects.roles import functions
from aicfc.passes.analysis.candidates import candidates
from aicfc.passes.analysis.facts import (
    collapse_point,
    dimension_changes,
    total_params,
    training_ops,
)
from aicfc.passes.analysis.nodes import NodeGraph, linear_ops, nodes_of
from aicfc.passes.analysis.report import (
    Candidate,
    Change,
    Collapse,
    FunctionReport,
    Node,
    Param,
    Report,
    TrainingOps,
)


def analyze_function(fn: func.FuncOp) -> FunctionReport:
    """The static report of one function (see the module docstring)."""
    nodes, training = nodes_of(fn)
    g = NodeGraph(nodes)
    collapses = [c for n in nodes if (c := collapse_point(n)) is not None]
    expansions, contractions = dimension_changes(g.linears())
    return FunctionReport(
        name=fn.sym_name.data,
        nodes=nodes,
        total_params=total_params(fn),
        training=training_ops(training),
        collapse_points=collapses,
        expansions=expansions,
        contractions=contractions,
        candidates=candidates(fn, g, collapses),
    )


def analyze_module(module: builtin.ModuleOp, function: str | None = None) -> Report:
    """The static report of every function of `module` (or only `@function`).

    Raises KeyError when `function` names no function of the module.
    """
    fns = [f for f in functions(module) if function is None or f.sym_name.data == function]
    if function is not None and not fns:
        names = ", ".join("@" + f.sym_name.data for f in functions(module)) or "none"
        raise KeyError(f"no function @{function} in the module (functions: {names})")
    return Report([analyze_function(f) for f in fns])


__all__ = [
    "Candidate",
    "Change",
    "Collapse",
    "FunctionReport",
    "Node",
    "Param",
    "Report",
    "TrainingOps",
    "analyze_function",
    "analyze_module",
    "functions",
    "linear_ops",
]
