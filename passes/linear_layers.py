"""Linear layers in graph IR: y = op(x) @ op(W) (+ bias), as one GEMM (+ its bias_add).

The matchers of aicfc-fold-linear: one layer (`layer_starting_at`,
`layer_ending_at`) and a foldable pair of them (`match_pair`). The operator
report asks the same matchers: it groups its "Linear" nodes with
`layer_starting_at` (it also takes fused activations and asks for param
weights) and lists `match_pair`'s pairs as fold candidates. A layer's GEMM is a
`graph.matmul` or a `graph.gemm_epilogue` without activation (matched by
OpFlag.IS_GEMM_LIKE and the absence of an `act` property) of a matrix weight, with a
fused bias operand or followed by the `graph.bias_add` that is its only user; its
input may have leading dims ([B, T, D], a layer on every position).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue

from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.roles import arg_role
from aicfc.dialects.tensors import shape_of

F = OpFlag


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


def _linear_head(op: Operation | None) -> bool:
    """A GEMM-like op without activation and without a second result, whose weight is a
    matrix and whose input a matrix or an untransposed [..., M, K] (a layer applied to
    every position of [B, T, D]: the leading dims fold into M)."""
    if op is None or not static_flags(op) & F.IS_GEMM_LIKE:
        return False
    if op.properties.get("act") is not None or len(op.results) != 1 or len(op.operands) < 2:
        return False
    x, w = op.operands[0].type, op.operands[1].type
    if not isinstance(x, TensorType) or not isinstance(w, TensorType):
        return False
    rank = len(x.get_shape())
    untransposed = op.properties.get("transpose_a") is None
    return len(w.get_shape()) == 2 and (rank == 2 or (rank > 2 and untransposed))


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
    user = op.results[0].get_user_of_unique_use()
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
        if len(head.operands) == 2 and head.results[0].get_user_of_unique_use() is owner:
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


@dataclass(frozen=True)
class Pair:
    """Two foldable layers: first (in -> hidden) then second (hidden -> out)."""

    first: Linear
    second: Linear

    def sizes(self) -> tuple[int, int, int]:
        """(in, hidden, out) features."""
        h = shape_of(self.first.output.type)[-1]
        out = shape_of(self.second.output.type)[-1]
        w1 = shape_of(self.first.weight.type)
        in_ = w1[1] if self.first.transpose_w else w1[0]
        return in_, h, out

    def folded_is_smaller(self) -> bool:
        """out*in <= h*in + out*h: the folded weight has no more parameters than the two."""
        i, h, o = self.sizes()
        return o * i <= h * i + o * h


def match_pair(op: Operation) -> Pair | None:
    """The pair whose second layer's GEMM is `op`, or None: nothing between the layers,
    the first layer's output read only by the second's untransposed lhs, and every
    weight and bias input-independent (so no product of activations is reassociated)."""
    second = layer_starting_at(op)
    if second is None or second.transpose_x:
        return None
    first = layer_ending_at(second.input)
    if first is None or first.output.get_user_of_unique_use() is not second.head:
        return None
    memo: dict[SSAValue, bool] = {}
    if not all(
        input_independent(v, memo) for v in (first.weight, first.bias, second.weight, second.bias)
    ):
        return None
    return Pair(first, second)
