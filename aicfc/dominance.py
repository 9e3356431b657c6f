"""SSA dominance: every use of a value comes after its definition (MLIR's verifier rule).

xDSL's verifier does not check it: `%1 = graph.relu %0` above `%0 = graph.tanh %x`
parsed, went through aicfc-fuse, canonicalize and cse, and aicfc-lower-exec then
failed with an internal KeyError. `check_dominance` walks the module once; a use is
fine when its definition properly dominates it (MLIR's rule for SSACFG regions):

- an op result defined in block B: the use is nested in an op of B that comes after
  the definition, or sits in a block of B's region that B strictly dominates (xDSL's
  DominanceInfo, for the rare multi-block region);
- a block argument of B: the use is nested in B, or in a block B dominates.

Regions of builtin.module hold symbols, not SSA uses, and are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.irdl.dominance import DominanceInfo

from aicfc.dialects.diagnostics import format_diagnostic, location_of


def describe(value: SSAValue, names: Mapping[SSAValue, str] | None = None) -> str:
    """`%name` as written in the source (`names`, from the parser), else the name hint,
    else what the value is (`result #0 of 'graph.tanh'`)."""
    if names and value in names:
        return names[value]
    if value.name_hint:
        return f"%{value.name_hint}"
    if isinstance(value, OpResult):
        return f"result #{value.index} of '{value.op.name}'"
    assert isinstance(value, BlockArgument)
    return f"argument #{value.index} of a block"


class _Order:
    """Positions of ops in their blocks and dominance of blocks, computed on demand."""

    def __init__(self) -> None:
        self._index: dict[Block, dict[Operation, int]] = {}
        self._dominance: dict[Region, DominanceInfo] = {}

    def index(self, op: Operation) -> int:
        block = op.parent_block()
        assert block is not None
        if block not in self._index:
            self._index[block] = {o: i for i, o in enumerate(block.ops)}
        return self._index[block][op]

    def dominates(self, a: Block, b: Block) -> bool:
        region = a.parent
        assert region is not None
        if region not in self._dominance:
            self._dominance[region] = DominanceInfo(region)
        return self._dominance[region].dominates(a, b)


def _ancestor_in_region(op: Operation, region: Region) -> Operation | None:
    """`op` or the op enclosing it whose block is in `region`, else None."""
    current: Operation | None = op
    while current is not None:
        block = current.parent_block()
        if block is not None and block.parent is region:
            return current
        current = current.parent_op()
    return None


def why_not_dominating(value: SSAValue, user: Operation, order: _Order) -> str | None:
    """Why the use of `value` by `user` breaks dominance, or None when it is fine."""
    if isinstance(value, OpResult):
        definer = value.op
        block = definer.parent_block()
        if block is None or block.parent is None:
            return "is defined by an op outside the module"
        at = location_of(definer)
        where = f" at {at}" if at else ""
        ancestor = _ancestor_in_region(user, block.parent)
        if ancestor is None:
            return f"is defined in another region ('{definer.name}'{where}) and is not visible here"
        if ancestor.parent_block() is not block:
            if order.dominates(block, ancestor.parent_block()):  # type: ignore[arg-type]
                return None
            return (
                f"is defined in a block that does not dominate this use ('{definer.name}'{where})"
            )
        if ancestor is definer:
            return f"is a result of the op that uses it ('{definer.name}'{where})"
        if order.index(ancestor) < order.index(definer):
            return f"is used before its definition ('{definer.name}'{where})"
        return None
    assert isinstance(value, BlockArgument)
    block = value.block
    if block.parent is None:
        return "is an argument of a block outside the module"
    ancestor = _ancestor_in_region(user, block.parent)
    if ancestor is None or not order.dominates(block, ancestor.parent_block()):  # type: ignore[arg-type]
        return "is an argument of a block that does not enclose or dominate this use"
    return None


def dominance_errors(
    root: Operation, file: str = "", names: Mapping[SSAValue, str] | None = None
) -> list[str]:
    """Every use in `root` that its definition does not dominate, as located messages
    (`file:line:col: error: 'graph.relu' operand #0 (%0) is used before its definition
    ('graph.tanh' at file:3:3)`), in source order."""
    order = _Order()
    errors = []
    for op in root.walk():
        if isinstance(op, ModuleOp):
            continue
        for i, value in enumerate(op.operands):
            problem = why_not_dominating(value, op, order)
            if problem is not None:
                message = f"'{op.name}' operand #{i} ({describe(value, names)}) {problem}"
                errors.append(format_diagnostic(op, "error", message, file))
    return errors
