"""Learning-rate schedules with torch.optim.lr_scheduler's names and semantics, on the device.

A schedule here is a description, given to `aicfc.compile(..., lr_scheduler=...)`; the
compiled train step evaluates it from the device step counter `lr_scheduler.last_epoch`
with `autodiff.lr_schedule` (docs/design.md#schedules-in-the-graph), so nothing is fed
from the host per step and there is no `scheduler.step()` to call: the counter advances
with every update, as torch's does when `scheduler.step()` follows each
`optimizer.step()`. The learning rate of update t (counting from 0) is torch's
`param_groups[g]["lr"]` at that update, for each param group g from its initial lr
(the optimizer's or the group's: torch's `base_lrs`):

    lr_scheduler.SequentialLR([
        lr_scheduler.LinearLR(start_factor=0.01, total_iters=100),   # warm-up
        lr_scheduler.CosineAnnealingLR(T_max=900),
    ], milestones=[100])

Offered: ConstantLR, LinearLR, StepLR, ExponentialLR, CosineAnnealingLR and
SequentialLR of them (each restarted at its milestone, as SequentialLR does). The
values are the closed forms of dialects/schedule_table.py; torch computes most of them
recursively, which agrees to rounding in float64. LambdaLR (and MultiplicativeLR) are
not offered: they call a Python function at every step, and a step replayed as one CUDA
graph runs no Python; `LambdaLR(...)` raises NotImplementedError saying so.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

from aicfc.dialects.schedule_table import (
    COEFFICIENTS_PER_SEGMENT,
    KINDS_BY_NAME,
    coefficient_error,
)
from aicfc.runtime.reference_optim import schedule_lr

LAST_EPOCH = "lr_scheduler.last_epoch"
"""The state name of the schedule's step counter (torch's `scheduler.last_epoch`)."""


class LRScheduler:
    """Base of the schedules: its segments as (kind, coefficients), and its lr at a step."""

    KIND: ClassVar[str] = ""

    def segments(self) -> list[tuple[str, dict[str, float]]]:
        """The schedule as segments of dialects/schedule_table.py kinds."""
        values = {
            name: float(getattr(self, name)) for name in KINDS_BY_NAME[self.KIND].coefficients
        }
        return [(self.KIND, values)]

    def milestones(self) -> tuple[int, ...]:
        return ()

    def properties(self) -> tuple[str, tuple[int, ...], tuple[float, ...]]:
        """(kinds, milestones, coefficients): the properties of autodiff.lr_schedule."""
        segments = self.segments()
        coefficients: list[float] = []
        for _, values in segments:
            row = list(values.values())
            coefficients += row + [0.0] * (COEFFICIENTS_PER_SEGMENT - len(row))
        return ",".join(k for k, _ in segments), self.milestones(), tuple(coefficients)

    def lr(self, base_lr: float, last_epoch: int) -> float:
        """The learning rate after `last_epoch` updates from `base_lr` (the reference's
        closed form, the same function the NumPy backend runs)."""
        return schedule_lr(base_lr, last_epoch, *self.properties())

    def step(self, *args: Any) -> NoReturn:
        """There is nothing to step: the compiled train step advances the schedule."""
        raise TypeError(
            f"{type(self).__name__}.step(): aicfc evaluates the schedule inside Program.step "
            "from the device counter lr_scheduler.last_epoch, which every update advances; "
            "remove the scheduler.step() call"
        )

    def _check(self) -> None:
        for name in KINDS_BY_NAME[self.KIND].coefficients:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(
                    f"{type(self).__name__}: {name} must be a number, got {type(v).__name__} {v!r}"
                )
        for kind, values in self.segments():
            why = coefficient_error(kind, values)
            if why:
                raise ValueError(f"{type(self).__name__}: {why}")


@dataclass(frozen=True)
class ConstantLR(LRScheduler):
    """lr = base * factor for the first total_iters updates, then base (torch ConstantLR)."""

    factor: float = 1.0 / 3
    total_iters: int = 5
    KIND: ClassVar[str] = "constant"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True)
class LinearLR(LRScheduler):
    """lr = base * (start_factor + (end_factor - start_factor) * min(t, total_iters) /
    total_iters) (torch LinearLR: a linear warm-up from start_factor)."""

    start_factor: float = 1.0 / 3
    end_factor: float = 1.0
    total_iters: int = 5
    KIND: ClassVar[str] = "linear"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True)
class StepLR(LRScheduler):
    """lr = base * gamma ** (t // step_size) (torch StepLR)."""

    step_size: int
    gamma: float = 0.1
    KIND: ClassVar[str] = "step"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True)
class ExponentialLR(LRScheduler):
    """lr = base * gamma ** t (torch ExponentialLR)."""

    gamma: float
    KIND: ClassVar[str] = "exponential"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True)
class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) * (1 + cos(pi t / T_max)) / 2 (torch
    CosineAnnealingLR; past T_max it rises again, as torch's does)."""

    T_max: int
    eta_min: float = 0.0
    KIND: ClassVar[str] = "cosine"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True, init=False)
class SequentialLR(LRScheduler):
    """schedulers[k] from milestones[k-1] on (torch SequentialLR), each at its local step
    t - milestones[k-1] (torch restarts it there with `step(0)`). Warm-up then cosine:
    SequentialLR([LinearLR(...), CosineAnnealingLR(...)], milestones=[warmup])."""

    schedulers: tuple[LRScheduler, ...]
    milestones_: tuple[int, ...]

    def __init__(self, schedulers: Sequence[LRScheduler], milestones: Sequence[int]):
        schedulers = tuple(schedulers)
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler, but got none")
        for i, s in enumerate(schedulers):
            if isinstance(s, SequentialLR) or not isinstance(s, LRScheduler):
                raise TypeError(
                    f"SequentialLR: schedulers[{i}] must be one of ConstantLR, LinearLR, "
                    f"StepLR, ExponentialLR, CosineAnnealingLR, got {type(s).__name__}"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR expects {len(schedulers) - 1} milestones for {len(schedulers)} "
                f"schedulers, got {len(milestones)}"
            )
        if any(isinstance(m, bool) or int(m) != m for m in milestones):
            raise ValueError(f"SequentialLR: milestones must be integers, got {list(milestones)}")
        ms = tuple(int(m) for m in milestones)
        if any(m <= 0 for m in ms) or list(ms) != sorted(set(ms)):
            raise ValueError(
                f"SequentialLR: milestones must be positive and increasing, got {list(ms)}"
            )
        object.__setattr__(self, "schedulers", schedulers)
        object.__setattr__(self, "milestones_", ms)

    def segments(self) -> list[tuple[str, dict[str, float]]]:
        return [seg for s in self.schedulers for seg in s.segments()]

    def milestones(self) -> tuple[int, ...]:
        return self.milestones_


def warmup_cosine(updates: int, warmup_fraction: float = 0.05) -> SequentialLR:
    """The common transformer recipe over `updates` optimizer updates: the lr rises linearly
    from 1% of the base lr over the first `warmup_fraction` of them (at least one), then
    follows a cosine to 0 (LinearLR then CosineAnnealingLR in a SequentialLR). Raises
    ValueError for updates < 1 or a fraction outside [0, 1)."""
    if isinstance(updates, bool) or not isinstance(updates, int) or updates < 1:
        raise ValueError(f"warmup_cosine: updates must be an integer >= 1, got {updates!r}")
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(f"warmup_cosine: warmup_fraction must be in [0, 1), got {warmup_fraction}")
    warmup = max(1, int(updates * warmup_fraction))
    return SequentialLR(
        [
            LinearLR(start_factor=0.01, total_iters=warmup),
            CosineAnnealingLR(T_max=max(1, updates - warmup)),
        ],
        milestones=[warmup],
    )


def LambdaLR(*args: Any, **kwargs: Any) -> NoReturn:
    """Not offered: see the module docstring."""
    raise NotImplementedError(
        "LambdaLR calls a Python function at every step, and aicfc's step is one compiled "
        "(on the GPU, one captured) graph that runs no Python; use ConstantLR, LinearLR, "
        "StepLR, ExponentialLR, CosineAnnealingLR or a SequentialLR of them"
    )


MultiplicativeLR = LambdaLR


__all__ = [
    "LAST_EPOCH",
    "ConstantLR",
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiplicativeLR",
    "SequentialLR",
    "StepLR",
    "warmup_cosine",
]
