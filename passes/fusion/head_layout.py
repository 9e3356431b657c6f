"""The head layout around attention, and the constraints of the packed-qkv fold.

A transformer's attention reads q, k, v as head views of one packed projection and merges
its output back: qkv [N, T, 3D] split into thirds, each reshaped to [N, T, H, d] and
transposed to [N, H, T, d]; the output transposed back and reshaped to [N, T, D]. The
fusion table's `packed_qkv_attention` pattern (passes/fusion/patterns.py) folds that
layout into graph.packed_qkv_attention. The chain steps match the attention op and the
merge after it; the three branches in front are not a chain, so `packed_heads` checks
them from the attention op's operands (its first step's constraint) and names them for
the builder, which hands them to the pass as absorbed ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from aicfc.dialects.flags import OpFlag, all_flags
from aicfc.dialects.graph import (
    PackedQKVAttentionOp,
    ReshapeOp,
    ScaledDotProductAttentionOp,
    SplitOp,
    TransposeOp,
)
from aicfc.dialects.tensors import shape_of

PACKED_ATTENTION: dict[type[Operation], type[Operation]] = {
    ScaledDotProductAttentionOp: PackedQKVAttentionOp
}
"""Attention ops with a form that reads its heads in place from a packed qkv projection
(the fusion table's `packed_qkv_attention` pattern)."""

HEAD_LAYOUT: dict[str, type[Operation]] = {
    "split": SplitOp,
    "reshape": ReshapeOp,
    "transpose": TransposeOp,
}
"""The layout ops between a packed projection and the heads, by their part: qkv [N, T, 3D]
split into thirds, each reshaped to [N, T, H, d] and transposed to [N, H, T, d] (and the
output back: transpose, then reshape to [N, T, D])."""

HEADS_PERM = (0, 2, 1, 3)
"""[N, T, H, d] <-> [N, H, T, d]: the permutation both ways."""


@dataclass(frozen=True)
class PackedHeads:
    """Where an attention op's q, k, v come from: the head views of one packed qkv [N, T,
    3D] (`heads` of d = D / heads each), through `layout` (the split, the reshapes and the
    transposes, producers first), which the packed op makes dead."""

    qkv: SSAValue
    heads: int
    layout: tuple[Operation, ...]


def _single_use(op: Operation) -> bool:
    return bool(all_flags(op) & OpFlag.SINGLE_USE)


def _is_heads_transpose(op: Operation | None) -> bool:
    return (
        type(op) is HEAD_LAYOUT["transpose"]
        and isinstance(op, TransposeOp)
        and op.permutation == HEADS_PERM
    )


def packed_heads(op: Operation) -> PackedHeads | None:
    """q, k, v of `op` (an attention op of PACKED_ATTENTION) as the head views of one
    packed projection, or None: operand i (q, k, v) is transpose(reshape(piece i of a
    split of x [N, T, 3D] along its last axis into [D, D, D]), [N, T, H, d]), [0, 2, 1, 3])
    with one split for all three and every layout result used once."""
    if type(op) not in PACKED_ATTENTION or len(op.operands) < 3:
        return None
    split: Operation | None = None
    layout: list[Operation] = []
    heads = 0
    for i, value in enumerate(op.operands[:3]):
        tr = value.owner
        rs = tr.operands[0].owner if isinstance(tr, Operation) and tr.operands else None
        sp = rs.operands[0].owner if isinstance(rs, Operation) and rs.operands else None
        if not (
            isinstance(tr, Operation)
            and isinstance(rs, Operation)
            and _is_heads_transpose(tr)
            and type(rs) is HEAD_LAYOUT["reshape"]
            and type(sp) is HEAD_LAYOUT["split"]
            and isinstance(sp, SplitOp)
            and (split is None or sp is split)
            and rs.operands[0] is sp.results[i]
            and _single_use(tr)
            and _single_use(rs)
        ):
            return None
        split = sp
        x, y = shape_of(rs.operands[0].type), shape_of(rs.results[0].type)
        if len(x) != 3 or len(y) != 4 or y[:2] != x[:2]:
            return None
        if y[2] * y[3] != x[2] or (heads and y[2] != heads):
            return None
        heads = y[2]
        layout += [rs, tr]
    assert isinstance(split, SplitOp)
    shape = shape_of(split.operands[0].type)
    if (
        len(shape) != 3
        or split.axis_value % 3 != 2
        or len(set(split.size_list)) != 1
        or len(split.size_list) != 3
        or not _single_use(split)
    ):
        return None
    return PackedHeads(split.operands[0], heads, (split, *layout))


@dataclass(frozen=True)
class ReadsPackedHeads:
    """An attention op of PACKED_ATTENTION whose q, k, v are head views of one packed
    projection (packed_heads)."""

    def holds(self, op: Operation) -> bool:
        return packed_heads(op) is not None


@dataclass(frozen=True)
class SwapsHeadsAndTime:
    """The head layout's transpose: [N, H, T, d] <-> [N, T, H, d] (HEADS_PERM)."""

    def holds(self, op: Operation) -> bool:
        return _is_heads_transpose(op)


@dataclass(frozen=True)
class MergesHeads:
    """The head layout's reshape back: [N, T, H, d] -> [N, T, H d]."""

    def holds(self, op: Operation) -> bool:
        if type(op) is not HEAD_LAYOUT["reshape"] or not op.operands:
            return False
        x, y = shape_of(op.operands[0].type), shape_of(op.results[0].type)
        return len(x) == 4 and y == (x[0], x[1], x[2] * x[3])
