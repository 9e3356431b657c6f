"""`Program.param_groups`: torch's param-group dicts over the hyperparameter states.

`prog.param_groups[0]["lr"] = 3e-4` writes the state `optim.0.lr` in the Program's
store, which every compiled batch shape reads (one BufferStore, fixed buffers), so the
next step of any shape uses it and nothing is re-captured
(docs/design.md#hyperparameters-as-device-state). A value is checked as the optimizer
checks its own (torch.optim's rules: a negative or NaN lr is a ValueError) before
anything is written. Keys: "params" (the names, read-only), the optimizer's
hyperparameters ("lr", "betas", "eps", "weight_decay" for Adam; "lr", "momentum",
"weight_decay" for SGD) and, with a schedule, "initial_lr" (the schedule's base lr;
"lr" is then the schedule's value for the next update, read-only).

`replace_optimizer` is the `prog.optimizer = ...` setter: a new optimizer of the same
structure (class, flags, group rules, which groups keep a momentum buffer) has its
hyperparameters written into every group; any other is refused before anything changes.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import numpy as np

from aicfc.optim import HYPERPARAMETER_DTYPE, Optimizer, hyperparameter_state
from aicfc.optim.lr_scheduler import LAST_EPOCH
from aicfc.training import GroupLayout, initial_lr_state

if TYPE_CHECKING:
    from aicfc.program import Program


class ParamGroupView(MutableMapping[str, Any]):
    """One param group of a Program, as torch's `optimizer.param_groups[g]` dict."""

    def __init__(self, program: Program, layout: GroupLayout):
        self._program = program
        self._layout = layout

    @property
    def _scheduled(self) -> bool:
        return self._program.options.lr_scheduler is not None

    def keys_of(self) -> list[str]:
        keys = ["params", *self._program.optimizer.KEYS]
        return keys + (["initial_lr"] if self._scheduled else [])

    def _read(self, name: str) -> float:
        state = hyperparameter_state(self._layout.index, name)
        return float(self._program.backend.to_numpy(self._program.store[state]))

    def __getitem__(self, key: str) -> Any:
        if key == "params":
            return list(self._layout.params)
        if key not in self.keys_of():
            raise KeyError(f"param group {self._layout.index} has no {key!r} (keys: {list(self)})")
        if key == "initial_lr":
            return self._read("initial_lr")
        if key == "lr" and self._scheduled:
            return self._program.next_lr(self._layout.index)
        if key == "betas":
            return (self._read("beta1"), self._read("beta2"))
        return self._read(key)

    def __setitem__(self, key: str, value: Any) -> None:
        writes = self.checked(key, value)
        self._program.store.load_state_dict(writes, strict=False)

    def checked(self, key: str, value: Any) -> dict[str, np.ndarray]:
        """The state writes that set `key` to `value`; ValueError/TypeError (nothing written)
        for a bad value or a key that cannot change in a compiled Program."""
        where = f"param_groups[{self._layout.index}]"
        opt = self._program.optimizer
        if key == "params":
            raise ValueError(
                f"{where}['params']: a compiled Program's groups are fixed (the optimizer's "
                "param_groups rules chose them); compile again to regroup"
            )
        if key == "lr" and self._scheduled:
            sched = type(self._program.options.lr_scheduler).__name__
            raise ValueError(
                f"{where}['lr'] is computed by the schedule ({sched}) at every update; set "
                f"{where}['initial_lr'] (the schedule's base lr) instead"
            )
        if key == "initial_lr":
            if not self._scheduled:
                raise KeyError(f"{where} has no 'initial_lr': the Program has no schedule")
            lr = opt.check("lr", value, where)
            return {initial_lr_state(self._layout.index): np.asarray(lr, HYPERPARAMETER_DTYPE)}
        if key not in opt.KEYS:
            raise KeyError(f"{where} has no {key!r} (keys: {list(self)})")
        new = {**self._current(), key: opt.check(key, value, where)}
        check_compiled_structure(opt, self._layout, new, where)
        return {
            hyperparameter_state(self._layout.index, name): np.asarray(v, HYPERPARAMETER_DTYPE)
            for name, v in opt.to_state({key: new[key]}).items()
        }

    def _current(self) -> dict[str, Any]:
        return {
            k: self[k] for k in self._program.optimizer.KEYS if k != "lr" or not self._scheduled
        }

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"param_groups[{self._layout.index}]: keys cannot be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_of())

    def __len__(self) -> int:
        return len(self.keys_of())

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def check_compiled_structure(
    opt: Optimizer, layout: GroupLayout, values: dict[str, Any], where: str
) -> None:
    """Refuse values the compiled update cannot take: SGD momentum where the group has no
    momentum buffer, or nesterov without momentum."""
    opt.check_structure(values, where)
    compiled = opt.state_names(layout.values)
    if opt.state_names(values) != compiled and "momentum_buffer" not in compiled:
        raise ValueError(
            f"{where}: momentum {values['momentum']} needs a momentum buffer, and this group "
            "was compiled with momentum 0 (no buffer); compile with momentum > 0 to change it"
        )


def replace_optimizer(program: Program, new: Any) -> dict[str, np.ndarray]:
    """The state writes that make `new` the Program's optimizer; ValueError/TypeError
    (nothing written) where the compiled train steps cannot follow it."""
    old = program.optimizer
    if not isinstance(new, Optimizer):
        raise TypeError(f"optimizer must be an aicfc.optim optimizer, got {type(new).__name__}")
    if new.structure() != old.structure():
        raise ValueError(
            f"cannot replace {old} by {new} in a compiled Program: its train steps are "
            "built for the optimizer's class, flags and param-group rules (and its state "
            "keys); compile again (aicfc.compile) for another optimizer, or set "
            "hyperparameters through prog.param_groups"
        )
    writes: dict[str, np.ndarray] = {}
    groups = new.groups(program.model)
    for layout, (_, values) in zip(program.group_layouts, groups, strict=True):
        where = f"optimizer {type(new).__name__}: param group {layout.index}"
        check_compiled_structure(new, layout, values, where)
        for name, v in new.to_state(values).items():
            if name == "lr" and program.options.lr_scheduler is not None:
                name = "initial_lr"
            writes[hyperparameter_state(layout.index, name)] = np.asarray(v, HYPERPARAMETER_DTYPE)
    return writes


def last_epoch(program: Program) -> int:
    """The schedule's counter: updates applied so far."""
    return int(program.backend.to_numpy(program.store[LAST_EPOCH]))
