"""aicfc-fold-linear: fold two linear layers with nothing nonlinear between (inference only).

Exact (docs/design.md#value-preserving-rewrites). With PyTorch's weight layout W [out, in]:

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
fold there. Option `function` applies the pass to one function only, so a
module holding both `@train_step` and `@predict` (what examples/train_digits.py
--emit-mlir writes) folds with `aicfc-fold-linear{function=predict}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.ir import Operation, SSAValue
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
from aicfc.dialects.roles import arg_name, arg_role, functions, result_names
from aicfc.passes.linear_layers import Pair, match_pair
from aicfc.passes.options import PassOptionError

F = OpFlag

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
                "only: aicfc-fold-linear{function=predict}",
            )


@dataclass(frozen=True)
class AicfcFoldLinearPass(ModulePass):
    """Fold linear∘linear in inference functions; error in a training function."""

    name = "aicfc-fold-linear"

    force: bool = False
    """Fold even when the folded weight has more parameters than the two layers."""

    function: str = ""
    """Fold only in this function (its name without @); empty: every function."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        fns = functions(op)
        if self.function:
            names = ", ".join(f"@{f.sym_name.data}" for f in fns) or "none"
            fns = [f for f in fns if f.sym_name.data == self.function]
            if not fns:
                raise PassOptionError(
                    f"aicfc-fold-linear: no function @{self.function} in the module "
                    f"(functions: {names})"
                )
        for fn in fns:
            reason = training_reason(fn)
            if reason is not None:
                _refuse_in_training(fn, reason, self.force)
                continue
            PatternRewriteWalker(
                GreedyRewritePatternApplier([FoldLinearPair(self.force)]),
                apply_recursively=True,
            ).rewrite_region(fn.body)
