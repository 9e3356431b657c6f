"""The node table of a function: one Linear node per layer, one node per other graph op.

A *Linear* node is `graph.matmul` (optionally followed by the `graph.bias_add`
that is its only user, as passes/linear_layers.py matches a layer) or
`graph.gemm_epilogue`, whose weight (rhs) and bias are function arguments with
`aicfc.role = "param"` and whose lhs is not transposed: one layer
y = x W^T + b, reported as one node. A graph op that reads a value computed
from an autodiff op is a *gradient node*. Autodiff ops are not nodes: they are
returned apart (the report lists them as training ops).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import ACTIVATIONS, Activation, GraphOp, MatrixProductOp
from aicfc.dialects.roles import arg_name, arg_role
from aicfc.dialects.tensors import numel
from aicfc.passes.analysis.report import Node, Param, Shape
from aicfc.passes.linear_layers import layer_starting_at


def shape(v: SSAValue) -> Shape:
    """The static shape of a tensor value; () for anything else."""
    t = v.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def dtype(v: SSAValue) -> str:
    t = v.type
    return str(t.element_type) if isinstance(t, TensorType) else str(t)


def _is_param(v: SSAValue | None) -> bool:
    return v is not None and arg_role(v) == "param"


def _param(v: SSAValue) -> Param:
    name = arg_name(v) or f"arg{getattr(v, 'index', '?')}"
    return Param(name, shape(v))


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
        # the op the fused activation stands for: its class gives the display name and
        # the collapse reason
        act_cls = ACTIVATIONS[activation].forward
        act_name = act_cls.display_name()
        title += f" + {act_name} (fused)"
        props = tuple(head.semantic_properties())  # trainable, nonlinear, ... of the epilogue
    else:
        props = ("linear", "trainable")
    return Node(
        index=index,
        kind="Linear",
        title=title,
        op_names=tuple(op.name for op in ops),
        input_shapes=(shape(head.operands[0]),),
        output_shapes=(shape(ops[-1].results[0]),),
        dtype=dtype(head.results[0]),
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
    kind = op.display_name()
    return Node(
        index=index,
        kind=kind,
        title=f"{kind} (gradient)" if gradient else kind,
        op_names=(op.name,),
        input_shapes=tuple(shape(v) for v in op.operands if not _is_param(v)),
        output_shapes=tuple(shape(r) for r in op.results),
        dtype=dtype(op.results[0]) if op.results else "",
        params=params,
        param_count=op.param_count(),
        flops=op.flops(),
        bytes_moved=op.bytes_moved(),
        properties=tuple(op.semantic_properties()),
        ops=(op,),
        gradient=gradient,
    )


def nodes_of(fn: func.FuncOp) -> tuple[list[Node], list[AicfcOp]]:
    """The nodes of `fn` in walk order, and its autodiff ops (the training ops)."""
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


class NodeGraph:
    """Producer/consumer relations between the nodes of one function."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.node_of: dict[Operation, Node] = {op: n for n in nodes for op in n.ops}

    def users(self, node: Node) -> list[Node]:
        """The nodes reading `node`'s output (each once, in use order)."""
        out: list[Node] = []
        for use in node.output.uses:
            n = self.node_of.get(use.operation)
            if n is not None and n is not node and n not in out:
                out.append(n)
        return out

    def linears(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "Linear"]

    def sole_user(self, node: Node) -> Node | None:
        """The node reading `node`'s output, when that output has exactly one use."""
        users = self.users(node)
        return users[0] if len(users) == 1 and node.output.has_one_use() else None
