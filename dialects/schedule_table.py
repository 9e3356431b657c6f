"""The learning-rate schedules that `autodiff.lr_schedule` evaluates, as plain data.

One row per kind: a PyTorch scheduler (torch.optim.lr_scheduler) whose learning
rate after t optimizer steps is a closed form of the base lr and t. A schedule is a
sequence of segments (SequentialLR's schedulers; one segment for a plain
scheduler): segment k runs from milestone k-1 (0 for the first) on, at local step
t - milestone, exactly as SequentialLR restarts each scheduler at its milestone
(`scheduler.step(0)`, which takes the closed form).

`autodiff.lr_schedule` carries a schedule as three properties: `kinds` (the
segments' kind names, comma-separated), `milestones` and `coefficients`
(COEFFICIENTS_PER_SEGMENT numbers per segment: the row's `coefficients` in order,
zero-padded). The closed forms, with b the base lr and t the local step:

- constant (ConstantLR; factor, total_iters): b * (factor if t < total_iters else 1)
- linear (LinearLR; start_factor s, end_factor e, total_iters n):
  b * (s + (e - s) * min(t, n) / n)
- step (StepLR; step_size, gamma): b * gamma ** (t // step_size)
- exponential (ExponentialLR; gamma): b * gamma ** t
- cosine (CosineAnnealingLR; T_max, eta_min):
  eta_min + (b - eta_min) * (1 + cos(pi t / T_max)) / 2

The NumPy reference (runtime/reference_optim.py `schedule_lr`), the CUDA kernel
(kernels/optim.cu, by `code`) and aicfc.optim.lr_scheduler read these rows; the
registry-side readers need no xDSL, hence a module of its own (as the activation table).
"""

from __future__ import annotations

from dataclasses import dataclass

COEFFICIENTS_PER_SEGMENT = 4
"""Numbers per segment in `coefficients` (the longest row's, zero-padded)."""


@dataclass(frozen=True)
class ScheduleKind:
    """One kind of segment: its name in `kinds`, PyTorch's class, its C code
    (`AICFC_SCHEDULE_<NAME>` of kernels/optim.cu) and its coefficients, in order."""

    name: str
    torch_name: str
    code: int
    coefficients: tuple[str, ...]


SCHEDULE_KINDS: tuple[ScheduleKind, ...] = (
    ScheduleKind("constant", "ConstantLR", 0, ("factor", "total_iters")),
    ScheduleKind("linear", "LinearLR", 1, ("start_factor", "end_factor", "total_iters")),
    ScheduleKind("step", "StepLR", 2, ("step_size", "gamma")),
    ScheduleKind("exponential", "ExponentialLR", 3, ("gamma",)),
    ScheduleKind("cosine", "CosineAnnealingLR", 4, ("T_max", "eta_min")),
)

KINDS_BY_NAME: dict[str, ScheduleKind] = {k.name: k for k in SCHEDULE_KINDS}

_COUNTS = {"total_iters": 0, "step_size": 1, "T_max": 1}
"""Coefficients that count steps: whole numbers of at least this (T_max and step_size
divide; a LinearLR over 0 steps divides too, so `linear` needs total_iters >= 1)."""


def coefficient_error(kind: str, values: dict[str, float]) -> str:
    """Why `values` (by coefficient name) are not a valid `kind` segment, or "" (the checks
    of torch.optim.lr_scheduler, plus the divisions a closed form makes)."""
    for name, v in values.items():
        if v != v or v in (float("inf"), float("-inf")):
            return f"{name} must be finite, got {v}"
        low = _COUNTS.get(name)
        if kind == "linear" and name == "total_iters":
            low = 1
        if low is not None and (v != int(v) or v < low):
            return f"{name} must be a whole number >= {low}, got {v:g}"
    if kind == "constant" and not 0.0 <= values["factor"] <= 1.0:
        return f"factor must be in [0, 1], got {values['factor']}"
    if kind == "linear":
        if not 0.0 < values["start_factor"] <= 1.0:
            return f"start_factor must be in (0, 1], got {values['start_factor']}"
        if not 0.0 <= values["end_factor"] <= 1.0:
            return f"end_factor must be in [0, 1], got {values['end_factor']}"
    if kind in ("step", "exponential") and values["gamma"] < 0.0:
        return f"gamma must be >= 0, got {values['gamma']}"
    if kind == "cosine" and values["eta_min"] < 0.0:
        return f"eta_min must be >= 0, got {values['eta_min']}"
    return ""


def segment_values(kind: str, coefficients: tuple[float, ...], index: int) -> dict[str, float]:
    """The coefficients of segment `index` (of kind `kind`) by name."""
    start = index * COEFFICIENTS_PER_SEGMENT
    names = KINDS_BY_NAME[kind].coefficients
    return dict(zip(names, coefficients[start : start + len(names)], strict=True))


def split_kinds(kinds: str) -> list[str]:
    """The segment kind names of a `kinds` property ("linear,cosine")."""
    return [k.strip() for k in kinds.split(",")] if kinds.strip() else []


def segment_error(kinds: str, milestones: tuple[int, ...], coefficients: tuple[float, ...]) -> str:
    """Why a schedule's three properties do not describe one, or "" if they do."""
    names = split_kinds(kinds)
    if not names:
        return "kinds names no segment"
    unknown = [n for n in names if n not in KINDS_BY_NAME]
    if unknown:
        return f"unknown kind {unknown[0]!r} (known: {', '.join(KINDS_BY_NAME)})"
    if len(milestones) != len(names) - 1:
        return f"{len(names)} segments need {len(names) - 1} milestones, got {len(milestones)}"
    if any(m <= 0 for m in milestones) or list(milestones) != sorted(set(milestones)):
        return f"milestones must be positive and increasing, got {list(milestones)}"
    if len(coefficients) != COEFFICIENTS_PER_SEGMENT * len(names):
        return (
            f"{len(names)} segments need {COEFFICIENTS_PER_SEGMENT * len(names)} coefficients, "
            f"got {len(coefficients)}"
        )
    for i, name in enumerate(names):
        why = coefficient_error(name, segment_values(name, coefficients, i))
        if why:
            return f"segment {i} ({name}): {why}"
    return ""
