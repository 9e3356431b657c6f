"""The operator analysis report (docs/design.md#operator-analysis): what ops do to information.

`analyze_module(module)` walks every `func.func` and describes each graph op
(its input and output shapes, dtype, parameters, FLOPs, bytes moved and
properties), then totals, collapse points, linear expansions and contractions,
and optimization candidates derived from those facts. `str(report)` is the
text `aicfc-opt -p aicfc-analyze` prints.

The measured report (`aicfc.analysis.measure`, aicfc/measured.py) adds facts
only data can give, by running the inference function on a real batch; it
lives in the API layer because it executes IR. This module only reads IR, so
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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from aicfc.dialects.autodiff import BackwardOp
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import (
    Activation,
    CrossEntropyOp,
    DropoutOp,
    GraphOp,
    MatrixProductOp,
    MseLossOp,
    ReduceSumOp,
    ReluOp,
    ReshapeOp,
    SoftmaxOp,
    TransposeOp,
)
from aicfc.dialects.roles import arg_name, arg_role, functions
from aicfc.dialects.tensors import fmt_shape, numel
from aicfc.passes.fusion_patterns import EPILOGUE_ACTIVATIONS
from aicfc.passes.linear_layers import layer_starting_at

Shape = tuple[int, ...]

DISPLAY_NAMES: dict[str, str] = {
    "graph.constant": "Constant",
    "graph.matmul": "MatMul",
    "graph.gemm_epilogue": "GemmEpilogue",
    "graph.bias_add": "BiasAdd",
    "graph.add": "Add",
    "graph.sub": "Sub",
    "graph.mul": "Mul",
    "graph.relu": "ReLU",
    "graph.gelu": "GELU",
    "graph.tanh": "Tanh",
    "graph.dropout": "Dropout",
    "graph.reshape": "Reshape",
    "graph.transpose": "Transpose",
    "graph.broadcast_to": "BroadcastTo",
    "graph.softmax": "Softmax",
    "graph.reduce_sum": "ReduceSum",
    "graph.cross_entropy": "CrossEntropy",
    "graph.mse_loss": "MSELoss",
}
"""Report names of ops (PyTorch's module names where one exists); others print their op name."""

ACTIVATION_OPS: dict[Activation, type[Operation]] = {
    act: cls
    for cls, act in EPILOGUE_ACTIVATIONS.items()
    if static_flags(cls) & OpFlag.IS_ACTIVATION
}
"""The op a fused epilogue activation stands for (its flags give the node's properties):
the forward half of aicfc-fuse's EPILOGUE_ACTIVATIONS (relu, gelu)."""

COLLAPSE_REASONS: dict[type[Operation], str] = {
    ReluOp: "every negative input becomes 0",
    DropoutOp: "a random fraction p = {p} of its inputs becomes 0, in training only",
    SoftmaxOp: "adding a constant along axis {axis} does not change the output",
    ReduceSumOp: "sums {input} to {output}",
    CrossEntropyOp: "reduces logits {input} to a scalar loss",
    MseLossOp: "reduces {input} to a scalar loss",
}
"""Why a collapse-producing op loses information (formatted with shapes and kernel params)."""


def _shape(v: SSAValue) -> Shape:
    t = v.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def _dtype(v: SSAValue) -> str:
    t = v.type
    return str(t.element_type) if isinstance(t, TensorType) else str(t)


# ----------------------------------------------------------------------------
# Report data
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Building nodes
# ----------------------------------------------------------------------------


def _is_param(v: SSAValue | None) -> bool:
    return v is not None and arg_role(v) == "param"


def _param(v: SSAValue) -> Param:
    name = arg_name(v) or f"arg{getattr(v, 'index', '?')}"
    return Param(name, _shape(v))


def linear_ops(op: Operation) -> tuple[Operation, ...] | None:
    """The ops of the Linear layer starting at `op`, or None (see the module docstring).

    matmul -> (matmul,) or (matmul, bias_add); gemm_epilogue -> (gemm_epilogue,).
    """
    if not isinstance(op, AicfcOp) or not static_flags(op) & OpFlag.IS_GEMM_LIKE:
        return None
    if op.properties.get("transpose_a") is not None or len(op.operands) < 2:
        return None
    lhs, rhs = op.operands[0], op.operands[1]
    if not _is_param(rhs) or _is_param(lhs):
        return None
    extra = op.operands[2:]
    if extra:  # a fused bias
        return (op,) if all(_is_param(b) for b in extra) else None
    if op.properties.get("act") is not None:
        return (op,)
    layer = layer_starting_at(op)  # with the bias_add that is the product's only user
    bias_add = layer.bias_op if layer is not None else None
    if (
        bias_add is not None
        and _is_param(bias_add.operands[1])
        and bias_add.parent_block() is op.parent_block()
    ):
        return (op, bias_add)
    return (op,)


def _params_of(ops: tuple[Operation, ...]) -> tuple[Param, ...]:
    seen: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            if _is_param(v) and all(v is not s for s in seen):
                seen.append(v)
    return tuple(_param(v) for v in seen)


def _linear_node(index: int, ops: tuple[Operation, ...]) -> Node:
    head = ops[0]
    assert isinstance(head, MatrixProductOp)  # linear_ops starts at an IS_GEMM_LIKE op
    _, n, k = head.mnk()
    activation = head.activation
    params = _params_of(ops)
    has_bias = len(params) > 1
    title = f"Linear(in_features={k}, out_features={n}, bias={has_bias})"
    act_name, act_cls = None, None
    if activation != Activation.NONE:
        act_cls = ACTIVATION_OPS[activation]
        act_name = DISPLAY_NAMES.get(act_cls.name, act_cls.name)
        title += f" + {act_name} (fused)"
        props = tuple(head.semantic_properties())  # trainable, nonlinear, ... of the epilogue
    else:
        props = ("linear", "trainable")
    return Node(
        index=index,
        kind="Linear",
        title=title,
        op_names=tuple(op.name for op in ops),
        input_shapes=(_shape(head.operands[0]),),
        output_shapes=(_shape(ops[-1].results[0]),),
        dtype=_dtype(head.results[0]),
        params=params,
        param_count=sum(numel(p.shape) for p in params),
        flops=sum(op.flops() for op in ops),  # type: ignore[attr-defined]
        bytes_moved=sum(op.bytes_moved() for op in ops),  # type: ignore[attr-defined]
        properties=props,
        in_features=k,
        out_features=n,
        activation=act_name,
        ops=ops,
        activation_op=act_cls,
    )


def _op_node(index: int, op: AicfcOp, gradient: bool = False) -> Node:
    params = _params_of((op,))
    kind = DISPLAY_NAMES.get(op.name, op.name)
    return Node(
        index=index,
        kind=kind,
        title=f"{kind} (gradient)" if gradient else kind,
        op_names=(op.name,),
        input_shapes=tuple(_shape(v) for v in op.operands if not _is_param(v)),
        output_shapes=tuple(_shape(r) for r in op.results),
        dtype=_dtype(op.results[0]) if op.results else "",
        params=params,
        param_count=op.param_count(),
        flops=op.flops(),
        bytes_moved=op.bytes_moved(),
        properties=tuple(op.semantic_properties()),
        ops=(op,),
        gradient=gradient,
    )


def _nodes(fn: func.FuncOp) -> tuple[list[Node], list[AicfcOp]]:
    nodes: list[Node] = []
    training: list[AicfcOp] = []
    grouped: set[int] = set()
    gradients: set[SSAValue] = set()  # values computed from an autodiff op
    for op in fn.walk():
        if id(op) in grouped:
            continue
        if isinstance(op, GraphOp) and any(v in gradients for v in op.operands):
            gradients.update(op.results)
            nodes.append(_op_node(len(nodes), op, gradient=True))
        elif isinstance(op, GraphOp):
            ops = linear_ops(op)
            if ops is not None:
                grouped.update(id(o) for o in ops)
                nodes.append(_linear_node(len(nodes), ops))
            else:
                nodes.append(_op_node(len(nodes), op))
        elif isinstance(op, AicfcOp):
            gradients.update(op.results)
            training.append(op)
    return nodes, training


# ----------------------------------------------------------------------------
# Facts and candidates
# ----------------------------------------------------------------------------


class _Graph:
    """Producer/consumer relations between the nodes of one function."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.node_of: dict[Operation, Node] = {op: n for n in nodes for op in n.ops}

    def users(self, node: Node) -> list[Node]:
        out: list[Node] = []
        for use in node.output.uses:
            n = self.node_of.get(use.operation)
            if n is not None and n is not node and n not in out:
                out.append(n)
        return out

    def linears(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "Linear"]

    def sole_user(self, node: Node) -> Node | None:
        users = self.users(node)
        return users[0] if len(users) == 1 and node.output.has_one_use() else None


def _collapse(node: Node) -> Collapse | None:
    if node.gradient or "collapse-producing" not in node.properties:
        return None
    op = node.ops[-1]
    cls = node.activation_op or type(op)
    reason = COLLAPSE_REASONS.get(cls, "maps many inputs to one output")
    fields: dict[str, object] = dict(op.kernel_params()) if isinstance(op, AicfcOp) else {}
    fields["input"] = fmt_shape(node.input_shapes[0]) if node.input_shapes else "[]"
    fields["output"] = fmt_shape(node.output_shapes[0]) if node.output_shapes else "[]"
    return Collapse(node.index, node.label, reason.format(**fields))


def _pointwise_collapse_after(g: _Graph, node: Node) -> Node | None:
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


def _candidates(g: _Graph, collapses: list[Collapse]) -> list[Candidate]:
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
    out += _fold_candidates(g) + _fuse_candidates(g) + _canonical_candidates(g)
    return out


def _fold_candidates(g: _Graph) -> list[Candidate]:
    out: list[Candidate] = []
    for first in g.linears():
        second = g.sole_user(first)
        if second is None or second.kind != "Linear" or first.activation is not None:
            continue
        if second.ops[0].operands[0] is not first.output:
            continue
        a, h, c = first.in_features, first.out_features, second.in_features
        b = second.out_features
        assert a is not None and h is not None and b is not None and c == h
        before = h * a + b * h
        after = b * a
        span = f"{first.label} and {second.label}"
        if after <= before:
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


def _fuse_candidates(g: _Graph) -> list[Candidate]:
    out: list[Candidate] = []
    for n in g.linears():
        if static_flags(n.ops[0]) & OpFlag.IS_FUSED:
            continue
        user = g.sole_user(n)
        act = user if user is not None and type(user.ops[0]) in ACTIVATION_OPS.values() else None
        if len(n.ops) == 1 and act is None:
            continue
        parts = " + ".join([*n.op_names, *(act.op_names if act else ())])
        where = f"{n.label} and {act.label}" if act else n.label
        out.append(
            Candidate(
                f"fuse {where} into one graph.gemm_epilogue",
                f"{parts} run as separate kernels; one epilogue saves writing and re-reading "
                "the intermediate (aicfc-fuse)",
                (n.index, act.index) if act else (n.index,),
            )
        )
    return out


def _is_constant(op: Operation | Block) -> bool:
    return isinstance(op, Operation) and bool(static_flags(op) & OpFlag.IS_CONSTANT)


def _canonical_candidates(g: _Graph) -> list[Candidate]:
    out: list[Candidate] = []
    for n in g.nodes:
        op = n.ops[0]
        if len(n.ops) != 1:
            continue
        if isinstance(op, AicfcOp) and op.is_identity():
            out.append(
                Candidate(
                    f"remove {n.label}",
                    "it returns its input unchanged (canonicalize)",
                    (n.index,),
                )
            )
        elif isinstance(op, (ReshapeOp, TransposeOp)) and isinstance(
            inner := op.operands[0].owner, type(op)
        ):
            src = g.node_of[inner]
            out.append(
                Candidate(
                    f"merge {src.label} and {n.label}",
                    f"a {n.kind.lower()} of a {n.kind.lower()} is one {n.kind.lower()} or none "
                    "(canonicalize)",
                    (src.index, n.index),
                )
            )
        elif (
            op.operands
            and not static_flags(op) & OpFlag.IS_STOCHASTIC
            and all(_is_constant(v.owner) for v in op.operands)
        ):
            out.append(
                Candidate(
                    f"precompute {n.label}",
                    "all its operands are constants (aicfc-fold-constants)",
                    (n.index,),
                )
            )
    return out


def _total_params(fn: func.FuncOp) -> int:
    return sum(numel(_shape(a)) for a in fn.args if arg_role(a) == "param")


def _training(ops: list[AicfcOp]) -> TrainingOps | None:
    if not ops:
        return None
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.name] = counts.get(op.name, 0) + 1
    return TrainingOps(
        tuple(counts.items()),
        sum(op.flops() for op in ops),
        sum(op.bytes_moved() for op in ops),
        sum(isinstance(op, BackwardOp) for op in ops),
    )


def analyze_function(fn: func.FuncOp) -> FunctionReport:
    """The static report of one function (see the module docstring)."""
    nodes, training = _nodes(fn)
    g = _Graph(nodes)
    collapses = [c for n in nodes if (c := _collapse(n)) is not None]
    changes = [
        Change(n.index, n.label, n.in_features or 0, n.out_features or 0) for n in g.linears()
    ]
    return FunctionReport(
        name=fn.sym_name.data,
        nodes=nodes,
        total_params=_total_params(fn),
        training=_training(training),
        collapse_points=collapses,
        expansions=[c for c in changes if c.out_features > c.in_features],
        contractions=[c for c in changes if c.out_features < c.in_features],
        candidates=_candidates(g, collapses),
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
    "analyze_function",
    "analyze_module",
    "functions",
    "linear_ops",
]
