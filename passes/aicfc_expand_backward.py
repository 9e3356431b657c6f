"""aicfc-expand-backward: replace `autodiff.backward` by gradient ops (reverse-mode AD).

    %g:2 = autodiff.backward %loss wrt %w, %b [seed %s]
      ->  graph / autodiff ops computing dloss/dw and dloss/db, inserted after it

For each `autodiff.backward`, in program order (so that a later one may
differentiate the gradients of an earlier one):

1. The path: the ops the loss depends on that also depend on a wrt value.
   Ops off the path get no gradient ops at all.
2. The path is visited in reverse topological order. Each op's VJP rule
   (passes/vjp_rules.py, keyed by op class) maps the gradients of *all* its
   results (not just the first: docs/design.md#gradient-accumulation) to the gradients of its
   operands. A value with several uses gets the sum of its partial gradients
   (graph.add), never the last one written (the overwrite bug that section names).
3. The seed (default: graph.constant dense<1.0> of the loss type) is the
   loss's gradient; a wrt value that is the loss itself gets the seed, a wrt
   value the loss does not depend on gets graph.constant zeros, or, with
   `allow_unused=false` (PyTorch's `torch.autograd.grad(allow_unused=False)`),
   is an error naming it, since a zero gradient usually means a typo in the
   wrt list or in the forward.
4. The backward op's results are replaced by the gradients and it is erased.

An op on the path that cannot be differentiated (no rule, or OpInfo says
`differentiable=False`) raises OpError naming it and the reason, before any IR
is changed. New ops carry the location of the forward op they differentiate;
gradient values get the forward value's name with a `d` prefix. Redundant ops
(a recomputed product, a constant emitted twice) are left to xDSL's cse and
canonicalize, which run later in the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from aicfc.dialects.autodiff import BackwardOp
from aicfc.dialects.diagnostics import OpError, location_of
from aicfc.dialects.graph import AddOp
from aicfc.dialects.roles import arg_name
from aicfc.dialects.tensors import is_float
from aicfc.passes.vjp_rules import VJP_RULES, VjpContext, splat, why_not_differentiable


def loss_slice(loss: SSAValue) -> list[Operation]:
    """Every op `loss` depends on (its own included), in topological order.

    Iterative post-order DFS over operand definitions, so deep networks do not
    hit Python's recursion limit.
    """
    if not isinstance(loss, OpResult):
        return []
    order: list[Operation] = []
    done: set[Operation] = set()
    entered: set[Operation] = set()
    stack = [loss.op]
    while stack:
        op = stack[-1]
        if op in done:
            stack.pop()
        elif op in entered:
            stack.pop()
            done.add(op)
            order.append(op)
        else:
            entered.add(op)
            stack.extend(
                v.op for v in reversed(op.operands) if isinstance(v, OpResult) and v.op not in done
            )
    return order


def differentiation_path(
    loss: SSAValue, wrt: tuple[SSAValue, ...]
) -> tuple[list[Operation], set[SSAValue]]:
    """(ops between wrt and loss in topological order, values that depend on wrt)."""
    active: set[SSAValue] = set(wrt)
    path: list[Operation] = []
    for op in loss_slice(loss):
        if any(v in active for v in op.operands):
            path.append(op)
            active.update(op.results)
    return path, active


def unused_wrt(backward: BackwardOp) -> list[SSAValue]:
    """The wrt values of `backward` that its loss does not depend on (zero gradient)."""
    path, _ = differentiation_path(backward.loss, tuple(backward.wrt))
    used = {v for op in path for v in op.operands} | {backward.loss}
    return [v for v in backward.wrt if v not in used]


def _describe(v: SSAValue, index: int) -> str:
    """`%w (aicfc.name "0.weight")`, or `wrt #1 (0-based)` for an unnamed value."""
    what = f"%{v.name_hint}" if v.name_hint else f"wrt #{index} (0-based)"
    name = arg_name(v)
    return f'{what} (aicfc.name "{name}")' if name else what


def _check_used(backward: BackwardOp) -> None:
    unused = unused_wrt(backward)
    if unused:
        wrt = list(backward.wrt)
        names = ", ".join(_describe(v, wrt.index(v)) for v in unused)
        raise OpError(
            backward,
            f"the loss does not depend on wrt value {names}, so its gradient is always zero "
            "(fix the wrt list or the forward, or run aicfc-expand-backward{allow_unused=true})",
        )


def _is_float_tensor(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and is_float(v.type.element_type)


@dataclass
class _Expansion:
    """The state of expanding one autodiff.backward: where to build, what it built, the grads."""

    builder: Builder
    created: set[Operation]
    grads: dict[SSAValue, SSAValue]

    def new(self, op: Operation, like: Operation) -> SSAValue:
        """Insert a pass-made op (seed, zeros, accumulation) located at `like`."""
        return VjpContext(self.builder, like, (), self.created).value(op)

    def accumulate(self, value: SSAValue, grad: SSAValue, at: Operation) -> None:
        """grads[value] += grad (the first partial gradient is taken as is)."""
        old = self.grads.get(value)
        self.grads[value] = grad if old is None else self.new(AddOp(old, grad), at)

    def name(self, value: SSAValue) -> None:
        """Call the gradient of `%x` `%dx`, if this expansion made it and it has no name."""
        grad = self.grads.get(value)
        if (
            grad is not None
            and value.name_hint
            and grad.name_hint is None
            and isinstance(grad, OpResult)
            and grad.op in self.created
        ):
            grad.name_hint = "d" + value.name_hint


def _check_differentiable(backward: BackwardOp, path: list[Operation]) -> None:
    for op in path:
        why = why_not_differentiable(op)
        if why is not None:
            where = location_of(backward)
            raise OpError(
                op,
                f"is not differentiable: {why} (it lies between a wrt value and the loss of "
                f"the autodiff.backward{' at ' + where if where else ''})",
            )


def expand_backward(backward: BackwardOp, allow_unused: bool = True) -> None:
    """Replace one autodiff.backward by its gradient ops (see the module docstring).

    Raises OpError for an op on the path without a VJP or, unless `allow_unused`,
    for a wrt value the loss does not depend on (both before changing any IR),
    and for a rule that returns a gradient of the wrong type (a compiler bug).
    """
    if not allow_unused:
        _check_used(backward)
    loss, wrt = backward.loss, tuple(backward.wrt)
    path, active = differentiation_path(loss, wrt)
    _check_differentiable(backward, path)

    anchor = backward.next_op
    assert anchor is not None  # a verified block ends in a terminator
    ex = _Expansion(Builder(InsertPoint.before(anchor)), set(), {})
    if loss in active:
        seed = backward.seed
        if seed is None:
            seed = ex.new(splat(loss.type, 1.0), backward)
        ex.grads[loss] = seed

    for op in reversed(path):
        out_grads = [ex.grads.get(r) for r in op.results]
        for r in op.results:
            ex.name(r)
        if all(gr is None for gr in out_grads):
            continue  # every use of its results had a zero gradient (e.g. relu_grad's y)
        wanted = tuple(v in active and _is_float_tensor(v) for v in op.operands)
        ctx = VjpContext(ex.builder, op, wanted, ex.created)
        in_grads = VJP_RULES[type(op)](ctx, op, out_grads)
        if len(in_grads) != len(op.operands):
            raise OpError(
                op, f"VJP rule returned {len(in_grads)} gradients for {len(op.operands)} operands"
            )
        for i, (v, gr, want) in enumerate(zip(op.operands, in_grads, wanted, strict=True)):
            if gr is None or not want:
                continue
            if gr.type != v.type:
                raise OpError(
                    op, f"VJP rule returned {gr.type} for operand #{i}, expected {v.type}"
                )
            ex.accumulate(v, gr, op)

    results: list[SSAValue] = []
    for v in wrt:
        if v not in ex.grads:  # the loss does not depend on v
            ex.grads[v] = ex.new(splat(v.type, 0.0), backward)
        ex.name(v)
        results.append(ex.grads[v])
    Rewriter.replace_op(backward, [], results)


@dataclass(frozen=True)
class AicfcExpandBackwardPass(ModulePass):
    """Replace every autodiff.backward by gradient ops from the VJP rule table."""

    name = "aicfc-expand-backward"

    allow_unused: bool = True
    """false: a wrt value the loss does not depend on is an error naming it;
    true (default): it gets a zero gradient (graph.constant zeros)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for backward in [o for o in op.walk() if isinstance(o, BackwardOp)]:
            expand_backward(backward, self.allow_unused)
