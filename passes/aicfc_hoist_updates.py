"""aicfc-hoist-updates: each optimizer update right after the last op it must follow.

The builder emits the optimizer updates after the whole backward, so in program
order every update waits for the last gradient, and the multi-tensor grouping of
the CUDA backend (runtime/cuda/launch.py `group_steps`) makes all of them one
launch that depends on every gradient: the update of the output layer's weights
sits on the critical path behind the first layer's dW product. Dependencies of
a captured graph follow the buffers (runtime/schedule.py), but the order still
decides what is grouped and where a launch may start.

This pass moves each op flagged IS_OPTIMIZER (adam_step, sgd_step) up to just
after the last op, in its block, that defines one of its operands or reads one
of them before it (its parameter's other readers: the forward product and the
next layer's dX product; another update that only reads a shared operand, such as
a hyperparameter, does not count: two updates never write one value; a constant
operand does not count either: it moves up with the update), and never later than
where it was. Updates that land
at the same place keep their order. Then a layer's update is issued as soon as
its gradients exist and its weights are read for the last time, off the path of
the layers below; the values computed are unchanged (the update reads the same
values; every reader of the old parameter still comes before it, so
aicfc-fold-inplace can still update it in place).

Runs on graph-level IR, after aicfc-expand-backward; ops other than the updates
keep their order. Option `max_runs` (default 4): where hoisting would leave more runs
of consecutive updates than this in a block, the block is left as it was. The CUDA
backend updates each run of equal updates with one multi-tensor launch; a few runs
(the small MLP's 4: one per layer, off the path of the layers below) buy overlap, but a
deep model's dozens would replace its one or two launches by dozens of small ones (a
GPT's AdamW groups by weight decay: 2 launches, 23 runs hoisted).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.roles import functions


def is_update(op: Operation) -> bool:
    return bool(static_flags(op) & OpFlag.IS_OPTIMIZER)


def is_constant(op: Operation) -> bool:
    """A constant without operands (a hyperparameter literal): it moves with the update."""
    return bool(static_flags(op) & OpFlag.IS_CONSTANT) and not op.operands


def _anchor(op: Operation, block: Block, position: dict[int, int]) -> Operation | None:
    """The op that `op` goes right after (None: the start of the block); `position`: the
    block's ops by id."""
    anchor: Operation | None = None
    here = position[id(op)]

    def later(candidate: Operation | None) -> None:
        nonlocal anchor
        if candidate is None or candidate is op or id(candidate) not in position:
            return
        if is_update(candidate) and not any(r in op.operands for r in candidate.results):
            return  # another update reading a shared operand (a hyperparameter): no order
        if position[id(candidate)] >= here:
            return
        if anchor is None or position[id(candidate)] > position[id(anchor)]:
            anchor = candidate

    for value in op.operands:
        owner = value.owner
        if isinstance(owner, Operation) and not is_constant(owner):
            later(block.find_ancestor_op_in_block(owner))
        for use in value.uses:
            later(block.find_ancestor_op_in_block(use.operation))
    return anchor


def runs_of_updates(block: Block) -> int:
    """How many maximal runs of consecutive updates `block` holds."""
    runs, inside = 0, False
    for op in block.ops:
        update = is_update(op)
        runs += update and not inside
        inside = update
    return runs


def hoist_block(block: Block, max_runs: int | None = None) -> int:
    """Hoist the updates of `block` (module doc); returns how many moved (0 where the
    result would hold more than `max_runs` runs of updates: the block is restored)."""
    original = list(block.ops)
    moved = 0
    updates = [op for op in block.ops if is_update(op)]
    hoisted: set[int] = set()
    for op in updates:
        position = {id(o): k for k, o in enumerate(block.ops)}
        anchor = _anchor(op, block, position)
        target = anchor.next_op if anchor is not None else block.first_op
        # Updates already placed after the same anchor stay first (program order).
        while target is not None and id(target) in hoisted:
            target = target.next_op
        hoisted.add(id(op))
        if target is op or target is None:
            continue
        block.detach_op(op)
        block.insert_op_before(op, target)
        moved += 1
        # its constants come before it (they read nothing); moving one before it keeps
        # the others that follow it after it, so one numbering serves them all
        order = {id(o): k for k, o in enumerate(block.ops)}
        for value in op.operands:
            owner = value.owner
            if (
                isinstance(owner, Operation)
                and is_constant(owner)
                and order.get(id(owner), -1) > order[id(op)]
            ):
                block.detach_op(owner)
                block.insert_op_before(owner, op)
    if moved and max_runs is not None and runs_of_updates(block) > max_runs:
        for op in original:  # back to the order it had
            block.detach_op(op)
            block.add_op(op)
        return 0
    return moved


@dataclass(frozen=True)
class AicfcHoistUpdatesPass(ModulePass):
    """Move each optimizer update up to right after the last op it must follow, unless
    that leaves more than `max_runs` runs of updates in a block (module doc)."""

    name = "aicfc-hoist-updates"

    max_runs: int = 4

    def __post_init__(self) -> None:
        if self.max_runs < 1:
            raise ValueError(
                f"aicfc-hoist-updates: max_runs must be at least 1, got {self.max_runs}"
            )

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in functions(op):
            for block in fn.body.blocks:
                hoist_block(block, self.max_runs)
