"""Remarks on a train step whose state cannot advance, found when the IR is parsed.

A result whose `aicfc.name` equals a param or state argument's is that argument's
next value (dialects/roles.py); any other named result is a program output. So a
misspelled result name (`"0.weight.exp_avgg"`) silently turns a next value into an
output, and the state argument it should update then keeps its initial value on
every step. Both halves are reported, as `IRWarning`s (a UserWarning in the API;
aicfc-opt and aicfc-run print the located message, `file:line:col: remark: ...`):

- a state argument that no result is named after (it is never updated);
- a result named like a param or state argument (difflib ratio >= 0.8) but matching
  none, with the name it probably means.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument

from aicfc.dialects.diagnostics import IRWarning, location_of
from aicfc.dialects.roles import arg_name, arg_role, functions, result_names


def state_update_remarks(
    module: ModuleOp, file: str = "", locations: Mapping[BlockArgument, str] | None = None
) -> list[str]:
    """The remarks (see module docstring) for every func.func of `module`, located at the
    argument (`locations`, from the parser) or else at the function."""
    remarks = []
    for fn in functions(module):
        where_fn = location_of(fn) or file
        externals = {
            name: a
            for a in fn.args
            if arg_role(a) in ("param", "state") and (name := arg_name(a)) is not None
        }
        results = [r for r in result_names(fn) if r is not None]
        for name, a in externals.items():
            if arg_role(a) == "state" and name not in results:
                where = (locations or {}).get(a) or where_fn
                remarks.append(
                    f"{where}: remark: 'func.func' state argument %{a.name_hint or a.index} "
                    f'("{name}") of @{fn.sym_name.data} is never updated: no result is named '
                    f'"{name}", so it keeps its initial value on every step'
                )
        for r in results:
            close = difflib.get_close_matches(r, list(externals), n=1, cutoff=0.8)
            if r not in externals and close:
                remarks.append(
                    f"{where_fn}: remark: 'func.func' result \"{r}\" of @{fn.sym_name.data} "
                    f'names no argument; did you mean "{close[0]}"? (a result named after a '
                    "param or state argument is its next value; this one is a program output)"
                )
    return remarks


def warn_state_updates(
    module: ModuleOp, file: str = "", locations: Mapping[BlockArgument, str] | None = None
) -> None:
    """Issue each of `state_update_remarks` as an IRWarning."""
    for remark in state_update_remarks(module, file, locations):
        warnings.warn(IRWarning(remark), stacklevel=3)
