"""Facts and totals of a function's nodes: collapse points, dimension changes, training ops.

Counting conventions are `AicfcOp`'s (dialects/base.py). Total parameters are
the elements of the function's distinct `param` arguments; training ops (the
autodiff ops) are counted apart from the nodes' totals.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Operation

from aicfc.dialects.autodiff import BackwardOp
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.graph import (
    CrossEntropyOp,
    DropoutOp,
    MseLossOp,
    ReduceSumOp,
    ReluOp,
    SoftmaxOp,
)
from aicfc.dialects.roles import arg_role
from aicfc.dialects.tensors import fmt_shape, numel
from aicfc.passes.analysis.nodes import shape
from aicfc.passes.analysis.report import Change, Collapse, Node, TrainingOps

COLLAPSE_REASONS: dict[type[Operation], str] = {
    ReluOp: "every negative input becomes 0",
    DropoutOp: "a random fraction p = {p} of its inputs becomes 0, in training only",
    SoftmaxOp: "adding a constant along axis {axis} does not change the output",
    ReduceSumOp: "sums {input} to {output}",
    CrossEntropyOp: "reduces logits {input} to a scalar loss",
    MseLossOp: "reduces {input} to a scalar loss",
}
"""Why a collapse-producing op loses information (formatted with shapes and kernel params)."""


def collapse_point(node: Node) -> Collapse | None:
    """The collapse point `node` is (a collapse-producing node that is no gradient), or None."""
    if node.gradient or "collapse-producing" not in node.properties:
        return None
    op = node.ops[-1]
    cls = node.activation_op or type(op)
    reason = COLLAPSE_REASONS.get(cls, "maps many inputs to one output")
    fields: dict[str, object] = dict(op.kernel_params()) if isinstance(op, AicfcOp) else {}
    fields["input"] = fmt_shape(node.input_shapes[0]) if node.input_shapes else "[]"
    fields["output"] = fmt_shape(node.output_shapes[0]) if node.output_shapes else "[]"
    return Collapse(node.index, node.label, reason.format(**fields))


def dimension_changes(linears: list[Node]) -> tuple[list[Change], list[Change]]:
    """(expansions, contractions): the Linear nodes with out > in, and with out < in."""
    changes = [Change(n.index, n.label, n.in_features or 0, n.out_features or 0) for n in linears]
    return (
        [c for c in changes if c.out_features > c.in_features],
        [c for c in changes if c.out_features < c.in_features],
    )


def total_params(fn: func.FuncOp) -> int:
    """Elements of the function's `param` arguments."""
    return sum(numel(shape(a)) for a in fn.args if arg_role(a) == "param")


def training_ops(ops: list[AicfcOp]) -> TrainingOps | None:
    """The autodiff ops counted by class (in first-seen order), with their FLOPs and bytes."""
    if not ops:
        return None
    counts: dict[type[AicfcOp], int] = {}
    for op in ops:
        counts[type(op)] = counts.get(type(op), 0) + 1
    return TrainingOps(
        tuple((cls.name, c) for cls, c in counts.items()),
        sum(op.flops() for op in ops),
        sum(op.bytes_moved() for op in ops),
        sum(isinstance(op, BackwardOp) for op in ops),
    )
