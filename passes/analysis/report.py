"""The operator report's data and its text: nodes, facts, candidates, totals.

`str()` of a `Report` (or a `FunctionReport`, or a `Node`) is the text that
`aicfc-opt -p aicfc-analyze` prints; the builders of these records are the
other modules of this package.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from aicfc.dialects.tensors import fmt_shape

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Param:
    """One parameter a node reads: its `aicfc.name` and shape."""

    name: str
    shape: Shape

    def __str__(self) -> str:
        return f"{self.name} {fmt_shape(self.shape)}"


@dataclass(frozen=True)
class Node:
    """One reported node: a Linear layer (1-2 ops) or a single graph op.

    kind: "Linear" or the op's display name; title: the heading, e.g.
    "Linear(in_features=10, out_features=20, bias=True)". in_features and
    out_features are set for Linear nodes; activation / activation_op name
    a fused epilogue activation ("ReLU", ReluOp). `ops` are the IR ops.
    """

    index: int
    kind: str
    title: str
    op_names: tuple[str, ...]
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    dtype: str
    params: tuple[Param, ...]
    param_count: int
    flops: int
    bytes_moved: int
    properties: tuple[str, ...]
    in_features: int | None = None
    out_features: int | None = None
    activation: str | None = None
    ops: tuple[Operation, ...] = field(default=(), compare=False, repr=False)
    activation_op: type[Operation] | None = field(default=None, compare=False, repr=False)
    gradient: bool = False

    @property
    def label(self) -> str:
        """`Node 0 Linear(10 -> 20)` / `Node 1 ReLU` (how summaries refer to a node)."""
        if self.kind == "Linear":
            act = f" + {self.activation}" if self.activation else ""
            return f"Node {self.index} Linear({self.in_features} -> {self.out_features}){act}"
        return f"Node {self.index} {self.kind}"

    @property
    def output(self) -> SSAValue:
        """The value this node hands on (the last op's first result)."""
        return self.ops[-1].results[0]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        ins = ", ".join(fmt_shape(s) for s in self.input_shapes) or "none"
        outs = ", ".join(fmt_shape(s) for s in self.output_shapes)
        plural_in = "s" if len(self.input_shapes) > 1 else ""
        plural_out = "s" if len(self.output_shapes) > 1 else ""
        params = f"{self.param_count}"
        if self.params:
            params += " (" + ", ".join(str(p) for p in self.params) + ")"
        return [
            f"Node {self.index}: {self.title}",
            f"  Ops: {', '.join(self.op_names)}",
            f"  Input shape{plural_in}: {ins}",
            f"  Output shape{plural_out}: {outs}",
            f"  Dtype: {self.dtype}",
            f"  Parameters: {params}",
            f"  FLOPs: {self.flops}",
            f"  Bytes moved: {self.bytes_moved}",
            f"  Properties: {', '.join(self.properties) or 'none'}",
        ]


@dataclass(frozen=True)
class Collapse:
    """A potential collapse point: a node that maps many inputs to one output."""

    node: int
    label: str
    reason: str


@dataclass(frozen=True)
class Change:
    """A Linear node's dimension change in -> out (expansion if out > in)."""

    node: int
    label: str
    in_features: int
    out_features: int


@dataclass(frozen=True)
class Candidate:
    """An optimization candidate: a short action, the facts behind it, the nodes involved."""

    action: str
    because: str
    nodes: tuple[int, ...] = ()

    def __str__(self) -> str:
        return f"- {self.action}: {self.because}"


@dataclass(frozen=True)
class TrainingOps:
    """The autodiff ops of a function, counted by name (not analysed as nodes).

    unexpanded: how many `autodiff.backward` ops are still there; their
    gradient ops do not exist yet, so their FLOPs and bytes are not counted
    anywhere (the report says so) until aicfc-expand-backward has run.
    """

    counts: tuple[tuple[str, int], ...]
    flops: int
    bytes_moved: int
    unexpanded: int = 0


@dataclass
class FunctionReport:
    """The static report of one function."""

    name: str
    nodes: list[Node]
    total_params: int
    training: TrainingOps | None
    collapse_points: list[Collapse]
    expansions: list[Change]
    contractions: list[Change]
    candidates: list[Candidate]

    @property
    def total_flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def total_bytes(self) -> int:
        return sum(n.bytes_moved for n in self.nodes)

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved over the graph ops (0 when nothing moves)."""
        return self.total_flops / self.total_bytes if self.total_bytes else 0.0

    def node(self, index: int) -> Node:
        return self.nodes[index]

    def linears(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "Linear"]

    def __str__(self) -> str:
        return "\n".join(self.lines()) + "\n"

    def lines(self) -> list[str]:
        out = [f"Operator report of @{self.name}", ""]
        for n in self.nodes:
            out += [*n.lines(), ""]
        grads = [n for n in self.nodes if n.gradient]
        if grads:
            out += [
                f"Gradient nodes: {len(grads)} (graph ops computing gradients; in the totals, "
                "not in the facts and candidates below)",
                "",
            ]
        t = self.training
        if t is not None:
            ops = ", ".join(f"{name} x{c}" for name, c in t.counts)
            out += [
                f"Training ops (autodiff, not in the totals): {ops}",
                f"  FLOPs: {t.flops}, bytes moved: {t.bytes_moved}",
            ]
            if t.unexpanded:
                out.append(
                    "  autodiff.backward not expanded: backward FLOPs not counted "
                    "(run aicfc-expand-backward first to count its gradient ops)"
                )
            else:
                out.append(
                    f"  Whole function (totals + training ops): FLOPs "
                    f"{self.total_flops + t.flops}, bytes moved {self.total_bytes + t.bytes_moved}"
                )
            out.append("")
        scope = ""
        if grads:
            plural = "s" if len(grads) > 1 else ""
            scope = f" (graph ops, including {len(grads)} gradient node{plural})"
        elif t is not None and t.unexpanded:
            scope = " (graph ops: the forward pass only)"
        out += [
            f"Total parameters: {self.total_params}",
            f"Total FLOPs: {self.total_flops}{scope}",
            f"Total bytes moved: {self.total_bytes}",
            f"Arithmetic intensity: {self.arithmetic_intensity:.3f} FLOP/byte",
        ]
        out += [f"Potential collapse point: {c.label} ({c.reason})" for c in self.collapse_points]
        if not self.collapse_points:
            out.append("Potential collapse points: none")
        for title, changes in (("expansion", self.expansions), ("contraction", self.contractions)):
            out += [
                f"Linear {title}: {c.in_features} -> {c.out_features} (Node {c.node})"
                for c in changes
            ]
        out.append("Optimization candidates:" + ("" if self.candidates else " none"))
        out += [str(c) for c in self.candidates]
        return out


@dataclass
class Report:
    """The analysis of a module: one FunctionReport per function, and measurements if taken.

    str(report) is the text `aicfc-analyze` prints.
    """

    functions: list[FunctionReport]
    measurements: list[object] = field(default_factory=list)
    """Measured sections appended by aicfc.analysis.measure (printed with str())."""

    def function(self, name: str) -> FunctionReport:
        """The report of `@name`; KeyError naming the functions there are."""
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(
            f"no function @{name}; the report has "
            + ", ".join("@" + f.name for f in self.functions)
        )

    def __str__(self) -> str:
        if not self.functions:
            return "Operator report: no func.func in the module (exec IR is not analysed)\n"
        blocks = ["\n".join(f.lines()) for f in self.functions]
        blocks += [str(m) for m in self.measurements]
        return "\n\n".join(blocks) + "\n"
