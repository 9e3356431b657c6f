"""aicfc-fold-linear: fold two linear layers with nothing nonlinear between (inference only).

Seed 002 §4 ("연속된 Linear 연산 결합"). With PyTorch's weight layout W [out, in]:

    y = (x W1^T + b1) W2^T + b2 = x (W2 W1)^T + (W2 b1 + b2)

A *linear layer* here is `graph.matmul` (optionally followed by the
`graph.bias_add` that is its only user) or `graph.gemm_epilogue` without an
activation; the second layer's lhs must be the first layer's output, used by
nothing else, and not transposed. Any weight layout folds: with A_i = op(W_i)
the [in, out] matrices, the folded weight is (A1 A2)^T, one
`graph.matmul %W2, %W1` with the transpose flags that undo op(); the folded
bias is reshape(reshape(b1, [1, h]) @ A2, [out]) + b2. No layout ops are
looked through between the layers (a reshape or transpose there stops the
match).

The weights are runtime params (function arguments), so the folded weight
and bias are computed in the graph from them: they depend on params only, so
a runtime may compute them once per weight update. Weights and biases must be
input-independent (params, constants, or ops of those, e.g. an earlier fold),
so a product of activations is never reassociated.

Folding pays only when the folded weight is not larger: out*in <= h*in +
out*h (h the hidden width); otherwise the two layers are a low-rank
factorisation worth keeping, and the pass folds only with `force=true`.

Inference only: in a training function (one with autodiff ops, `state`
arguments or param next-value results) folding would change what the
optimizer updates, so the pass stops with an error at the first pair it would
fold there.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from aicfc.dialects.diagnostics import OpError, copy_location
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import Activation, AddOp, BiasAddOp, GemmEpilogueOp, MatmulOp, ReshapeOp
from aicfc.dialects.roles import arg_name, arg_role, result_names

F = OpFlag

# ----------------------------------------------------------------------------
# Matching a pair of linear layers
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Linear:
    """One linear layer: y = op(x) @ op(W) (+ bias), as `head` (+ a separate `bias_op`)."""

    head: Operation
    bias_op: Operation | None
    bias: SSAValue | None

    @property
    def input(self) -> SSAValue:
        return self.head.operands[0]

    @property
    def weight(self) -> SSAValue:
        return self.head.operands[1]

    @property
    def output(self) -> SSAValue:
        return (self.bias_op or self.head).results[0]

    @property
    def transpose_x(self) -> bool:
        return self.head.properties.get("transpose_a") is not None

    @property
    def transpose_w(self) -> bool:
        return self.head.properties.get("transpose_b") is not None

    def ops(self) -> list[Operation]:
        return [self.head] + ([self.bias_op] if self.bias_op is not None else [])


def _single_use(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _linear_head(op: Operation | None) -> bool:
    """A GEMM-like op without activation and without a second result, on rank-2 tensors."""
    if op is None or not static_flags(op) & F.IS_GEMM_LIKE:
        return False
    if op.properties.get("act") is not None or len(op.results) != 1:
        return False
    return all(
        isinstance(v.type, TensorType) and len(v.type.get_shape()) == 2 for v in op.operands[:2]
    )


def _separate_bias_add(op: Operation | None, x: SSAValue) -> bool:
    f = static_flags(op) if op is not None else F.NONE
    return (
        op is not None
        and bool(f & F.IS_BIAS_ADD and f & F.IS_ELEMENTWISE)
        and not f & F.IS_FUSED
        and op.operands[0] is x
    )


def layer_starting_at(op: Operation) -> Linear | None:
    """The layer whose GEMM is `op` (with the bias_add that is its only user, if any)."""
    if not _linear_head(op):
        return None
    if len(op.operands) > 2:
        return Linear(op, None, op.operands[2])
    user = _single_use(op.results[0])
    if _separate_bias_add(user, op.results[0]):
        assert user is not None
        return Linear(op, user, user.operands[1])
    return Linear(op, None, None)


def layer_ending_at(v: SSAValue) -> Linear | None:
    """The layer whose output is `v`."""
    owner = v.owner
    if not isinstance(owner, Operation):
        return None
    head = owner.operands[0].owner if owner.operands else None
    if isinstance(head, Operation) and _separate_bias_add(owner, owner.operands[0]):
        if not _linear_head(head):
            return None
        if len(head.operands) == 2 and _single_use(head.results[0]) is owner:
            return Linear(head, owner, owner.operands[1])
        return None
    if _linear_head(owner):
        return Linear(owner, None, owner.operands[2] if len(owner.operands) > 2 else None)
    return None


def input_independent(v: SSAValue | None, memo: dict[SSAValue, bool] | None = None) -> bool:
    """True for params, constants and deterministic graph ops of those (None counts as True)."""
    if v is None:
        return True
    memo = {} if memo is None else memo
    if v in memo:
        return memo[v]
    if isinstance(v, BlockArgument):
        ok = arg_role(v) == "param"
    else:
        op = v.owner
        assert isinstance(op, Operation)
        f = static_flags(op)
        ok = bool(f & F.IS_CONSTANT) or (
            f != F.NONE
            and not f & F.IS_STOCHASTIC
            and all(input_independent(o, memo) for o in op.operands)
        )
    memo[v] = ok
    return ok


def _dims(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


@dataclass(frozen=True)
class Pair:
    """Two foldable layers: first (in -> hidden) then second (hidden -> out)."""

    first: Linear
    second: Linear

    def sizes(self) -> tuple[int, int, int]:
        """(in, hidden, out) features."""
        h = _dims(self.first.output)[1]
        out = _dims(self.second.output)[1]
        w1 = _dims(self.first.weight)
        in_ = w1[1] if self.first.transpose_w else w1[0]
        return in_, h, out

    def folded_is_smaller(self) -> bool:
        """out*in <= h*in + out*h: the folded weight has no more parameters than the two."""
        i, h, o = self.sizes()
        return o * i <= h * i + o * h


def match_pair(op: Operation) -> Pair | None:
    """The pair whose second layer's GEMM is `op`, or None."""
    second = layer_starting_at(op)
    if second is None or second.transpose_x:
        return None
    first = layer_ending_at(second.input)
    if first is None or _single_use(first.output) is not second.head:
        return None
    memo: dict[SSAValue, bool] = {}
    if not all(
        input_independent(v, memo) for v in (first.weight, first.bias, second.weight, second.bias)
    ):
        return None
    return Pair(first, second)


# ----------------------------------------------------------------------------
# The rewrite
# ----------------------------------------------------------------------------


def fold_ops(p: Pair) -> tuple[list[Operation], SSAValue]:
    """The ops computing y = op(x) (A1 A2) + (b1 A2 + b2) and the value y."""
    a, b = p.first, p.second
    _, h, out = p.sizes()
    # (A1 A2)^T = op'(W2) op'(W1), op' the opposite transposition: [out, in].
    w = MatmulOp(b.weight, a.weight, transpose_a=not b.transpose_w, transpose_b=not a.transpose_w)
    ops: list[Operation] = [w]
    bias = b.bias
    if a.bias is not None:
        row = ReshapeOp(a.bias, [1, h])
        prod = MatmulOp(row.result, b.weight, transpose_b=b.transpose_w)
        bias_op: Operation = ReshapeOp(prod.result, [out])
        ops += [row, prod, bias_op]
        if b.bias is not None:
            bias_op = AddOp(bias_op.results[0], b.bias)
            ops.append(bias_op)
        bias = bias_op.results[0]
    if static_flags(b.head) & F.IS_FUSED:
        y: Operation = GemmEpilogueOp(
            a.input, w.result, bias, Activation.NONE, transpose_a=a.transpose_x, transpose_b=True
        )
        ops.append(y)
    else:
        y = MatmulOp(a.input, w.result, transpose_a=a.transpose_x, transpose_b=True)
        ops.append(y)
        if bias is not None:
            y = BiasAddOp(y.results[0], bias)
            ops.append(y)
    return ops, y.results[0]


class FoldLinearPair(RewritePattern):
    """second(first(x)) -> one linear layer (see the module docstring)."""

    def __init__(self, force: bool):
        self.force = force

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        pair = match_pair(op)
        if pair is None or not (self.force or pair.folded_is_smaller()):
            return
        ops, y = fold_ops(pair)
        last = pair.second.ops()[-1]
        copy_location(pair.second.head, *ops)
        rewriter.replace(last, ops, [y])
        for dead in reversed(pair.first.ops() + pair.second.ops()[:-1]):
            rewriter.erase(dead)


# ----------------------------------------------------------------------------
# Training functions
# ----------------------------------------------------------------------------


def training_reason(fn: func.FuncOp) -> str | None:
    """Why `fn` is a training function (autodiff ops, state args, param updates), or None."""
    for op in fn.walk():
        if static_flags(op) & (F.IS_BACKWARD | F.IS_OPTIMIZER):
            return f"it contains {op.name}"
    params = set()
    for a in fn.args:
        if arg_role(a) == "state":
            return f"argument '{arg_name(a)}' is optimizer state"
        if arg_role(a) == "param":
            params.add(arg_name(a))
    for name in result_names(fn):
        if name is not None and name in params:
            return f"it returns the next value of param '{name}'"
    return None


def _refuse_in_training(fn: func.FuncOp, reason: str, force: bool) -> None:
    for op in fn.walk():
        pair = match_pair(op)
        if pair is not None and (force or pair.folded_is_smaller()):
            w1 = arg_name(pair.first.weight) or "W1"
            w2 = arg_name(pair.second.weight) or "W2"
            raise OpError(
                op,
                f"aicfc-fold-linear: cannot fold linear layers in the training function "
                f"@{fn.sym_name.data} ({reason}): folding replaces '{w1}' and '{w2}', which "
                "the optimizer updates, by their product; run it on the inference function "
                "(@predict) instead",
            )


@dataclass(frozen=True)
class AicfcFoldLinearPass(ModulePass):
    """Fold linear∘linear in inference functions; error in a training function."""

    name = "aicfc-fold-linear"

    force: bool = False
    """Fold even when the folded weight has more parameters than the two layers."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in [f for f in op.walk() if isinstance(f, func.FuncOp) and f.body.blocks]:
            reason = training_reason(fn)
            if reason is not None:
                _refuse_in_training(fn, reason, self.force)
                continue
            PatternRewriteWalker(
                GreedyRewritePatternApplier([FoldLinearPair(self.force)]),
                apply_recursively=True,
            ).rewrite_region(fn.body)
