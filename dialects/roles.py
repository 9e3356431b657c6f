"""Roles and names of function arguments and results (`aicfc.role`, `aicfc.name`).

A train step is a `func.func` whose arguments carry `aicfc.role` ("input",
"param", "state") and `aicfc.name` ("fc1.weight"). A result whose `aicfc.name`
equals a param or state argument's name is that external's next value; any
other named result is a program output ("loss"). Names are the stable handle
users hold: no API asks for an SSA index (docs/design.md#stable-names). A state
argument that does not start at zero says where it starts with `aicfc.init`.
"""

from __future__ import annotations

from typing import Literal

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, SSAValue

ROLE_ATTR = "aicfc.role"
NAME_ATTR = "aicfc.name"
INIT_ATTR = "aicfc.init"
"""A state argument's initial value where it is not zero (a learning rate, `rng.offset`):
a dense literal of the argument's type, which aicfc-lower-exec keeps on the exec.buffer."""
Role = Literal["input", "param", "state"]
EXTERNAL_ROLES: tuple[Role, ...] = ("input", "param", "state")


def _func_of(block: Block | None) -> func.FuncOp | None:
    if block is None:
        return None
    parent = block.parent_op()
    return parent if isinstance(parent, func.FuncOp) else None


def _string_entry(attrs: DictionaryAttr, key: str) -> str | None:
    value = attrs.data.get(key)
    return value.data if isinstance(value, StringAttr) else None


def arg_attr(value: SSAValue, key: str) -> str | None:
    """The string attribute `key` of a func argument, or None."""
    if not isinstance(value, BlockArgument):
        return None
    fn = _func_of(value.block)
    if fn is None or fn.arg_attrs is None or value.block is not fn.body.blocks.first:
        return None
    return _string_entry(fn.arg_attrs.data[value.index], key)


def arg_role(value: SSAValue) -> str | None:
    """`aicfc.role` of a func argument ("input", "param", "state"), else None."""
    return arg_attr(value, ROLE_ATTR)


def arg_name(value: SSAValue) -> str | None:
    """`aicfc.name` of a func argument, else None."""
    return arg_attr(value, NAME_ATTR)


def result_names(fn: func.FuncOp) -> list[str | None]:
    """`aicfc.name` of each result of `fn` (None where a result has none)."""
    n = len(fn.function_type.outputs.data)
    if fn.res_attrs is None:
        return [None] * n
    return [_string_entry(d, NAME_ATTR) for d in fn.res_attrs.data]


def functions(module: ModuleOp) -> list[func.FuncOp]:
    """The defined func.funcs of `module` (declarations without a body skipped), in order."""
    return [op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks]


def make_attrs(
    role: str | None = None, name: str | None = None, init: Attribute | None = None
) -> DictionaryAttr:
    """A DictionaryAttr with `aicfc.role` / `aicfc.name` (and a state's `aicfc.init`) for
    arg_attrs/res_attrs."""
    entries: dict[str, Attribute] = {}
    if role is not None:
        entries[ROLE_ATTR] = StringAttr(role)
    if name is not None:
        entries[NAME_ATTR] = StringAttr(name)
    if init is not None:
        entries[INIT_ATTR] = init
    return DictionaryAttr(entries)


def arg_init(value: SSAValue) -> DenseIntOrFPElementsAttr | None:
    """`aicfc.init` of a func argument (a state's initial value, when not zero), else None."""
    if not isinstance(value, BlockArgument):
        return None
    fn = _func_of(value.block)
    if fn is None or fn.arg_attrs is None or value.block is not fn.body.blocks.first:
        return None
    init = fn.arg_attrs.data[value.index].data.get(INIT_ATTR)
    return init if isinstance(init, DenseIntOrFPElementsAttr) else None
