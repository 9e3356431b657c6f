"""What a VJP rule builds with: the context it emits through and the shared building blocks.

`VjpContext.emit` is the only way a rule inserts an op (after the `autodiff.backward`
being expanded, with the forward op's location). The helpers build the recurring
pieces: splat constants, sums over axes, reshapes and broadcasts, the sum of a
broadcast gradient back to its operand's shape, and the two products of a matmul's
VJP with transpose flags only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xdsl.builder import Builder
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from aicfc.dialects import graph as g
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.tensors import numel, shape_of

Grad = SSAValue | None
OpT = TypeVar("OpT", bound=Operation)


@dataclass
class VjpContext:
    """Where a rule builds: the insertion point, the forward op and the wanted operands.

    builder: inserts after the `autodiff.backward` being expanded.
    op:      the forward op whose VJP is being built (its location is copied).
    wanted:  per operand, whether the pass needs its gradient.
    created: every op emitted so far in this expansion (shared across rules).
    """

    builder: Builder
    op: Operation
    wanted: tuple[bool, ...]
    created: set[Operation] = field(default_factory=set)

    def emit(self, new: OpT) -> OpT:
        """Insert `new` at the builder's point with the forward op's location."""
        self.builder.insert(new)
        copy_location(self.op, new)
        self.created.add(new)
        return new

    def value(self, new: Operation) -> SSAValue:
        """Insert a one-result op and return its result."""
        return self.emit(new).results[0]


VjpRule = Callable[[VjpContext, Any, Sequence[Grad]], Sequence[Grad]]
"""rule(ctx, forward op, result grads) -> operand grads (see the module docstring)."""


def splat(t: Attribute, v: float) -> g.ConstantOp:
    """A graph.constant of float tensor type `t` with every element `v` (not inserted)."""
    assert isinstance(t, TensorType)
    return g.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [v]))


def constant(ctx: VjpContext, t: Attribute, v: float) -> SSAValue:
    """A splat graph.constant of tensor type `t` filled with `v`."""
    return ctx.value(splat(t, v))


def scale(ctx: VjpContext, x: SSAValue, v: float) -> SSAValue:
    """x * v (graph.mul with a splat constant)."""
    return ctx.value(g.MulOp(x, constant(ctx, x.type, v)))


def add(ctx: VjpContext, a: Grad, b: Grad) -> Grad:
    """a + b where either may be absent (None means zero)."""
    if a is None or b is None:
        return a if b is None else b
    return ctx.value(g.AddOp(a, b))


def reduce(ctx: VjpContext, x: SSAValue, axes: Sequence[int], keepdims: bool = False) -> SSAValue:
    """graph.reduce_sum over `axes` (x itself when there is nothing to reduce)."""
    if not axes:
        return x
    return ctx.value(g.ReduceSumOp(x, list(axes), keepdims))


def reshape(ctx: VjpContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if shape_of(x.type) == tuple(shape) else ctx.value(g.ReshapeOp(x, shape))


def broadcast(ctx: VjpContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if shape_of(x.type) == tuple(shape) else ctx.value(g.BroadcastToOp(x, shape))


def sum_all(ctx: VjpContext, x: SSAValue) -> SSAValue:
    """Sum of every element, as a rank-0 tensor."""
    return reduce(ctx, x, range(len(shape_of(x.type))))


def matmul_grads(
    ctx: VjpContext,
    dc: SSAValue,
    a: SSAValue,
    b: SSAValue,
    ta: bool,
    tb: bool,
    want_a: bool,
    want_b: bool,
) -> tuple[Grad, Grad]:
    """dA, dB of C = op(A) op(B) with transpose flags only (no graph.transpose).

    d op(A) = dC op(B)^T and d op(B) = op(A)^T dC. A transposed operand gets the
    transpose of that, which swaps the product's operands:
    dA = op(B) dC^T if transpose_a else dC op(B)^T,
    dB = dC^T op(A) if transpose_b else op(A)^T dC.
    With batch dims the products are batched and each gradient is summed back over the
    batch dims its operand was broadcast along (sum_to). A matrix B under a batched,
    untransposed A (a Linear layer on [B, T, D]) gets its dB from one product of the
    folded rows, [B T, M]^T [B T, N], instead of a batch of products summed afterwards.
    """
    da = db = None
    if want_a:
        da = ctx.value(g.MatmulOp(b, dc, tb, True) if ta else g.MatmulOp(dc, b, False, not tb))
        da = sum_to(ctx, da, shape_of(a.type))
    if want_b:
        if len(shape_of(b.type)) == 2 and len(shape_of(a.type)) > 2 and not ta:
            a, dc = fold_rows(ctx, a), fold_rows(ctx, dc)
        db = ctx.value(g.MatmulOp(dc, a, True, ta) if tb else g.MatmulOp(a, dc, not ta, False))
        db = sum_to(ctx, db, shape_of(b.type))
    return da, db


def sum_to(ctx: VjpContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    """x summed back to `shape`, the shape it was broadcast from (NumPy rules): over the
    leading axes it lacks and its size-1 axes that were stretched, then reshaped."""
    src, dst = shape_of(x.type), tuple(shape)
    if src == dst:
        return x
    lead = len(src) - len(dst)
    axes = list(range(lead)) + [
        lead + i for i, d in enumerate(dst) if d == 1 and src[lead + i] != 1
    ]
    return reshape(ctx, reduce(ctx, x, axes), dst)


def fold_rows(ctx: VjpContext, x: SSAValue) -> SSAValue:
    """[..., M, C] as the matrix [prod(...) M, C] (a free reshape of a dense tensor)."""
    s = shape_of(x.type)
    return reshape(ctx, x, (numel(s[:-1]), s[-1]))
