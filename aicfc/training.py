"""The training loop inside the train step: hyperparameters, schedule, clipping, accumulation.

`TrainingOptions` says what a compiled train step does around its optimizer
(`aicfc.compile(..., lr_scheduler=, clip_grad_norm=, accumulate=, keep_gradients=)`);
`training_state` lists the state it keeps, with initial values, and `emit_counters` /
`emit_updates` write its ops into @train_step (aicfc/builder.py calls them around the
forward pass and the backward). Everything a PyTorch loop does on the host between
`loss.backward()` and the next step is an op on the device here
(docs/design.md#schedules-in-the-graph):

    %micro', %apply = autodiff.accumulation_step %micro every = k   (accumulate > 1)
    %epoch', %lr... = autodiff.lr_schedule %epoch, %apply, %initial_lr...  (a schedule)
    ... forward, loss, autodiff.backward ...
    %mean, %acc'    = autodiff.accumulate_grad %g, %acc, %apply every = k   (per param)
    %norm, %coef    = autodiff.clip_grad_norm %g... max_norm = c    ("grad_norm" output)
    autodiff.adam_step ... lr(%lr) ... grad_scale(%coef) apply(%apply)     (per param)

State names (docs/design.md#stable-names): the hyperparameters `optim.<g>.<name>` (one f64
scalar per param group g and operand name of the optimizer op; with a schedule the lr is
computed and `optim.<g>.initial_lr`, torch's `initial_lr`, is stored instead), the
schedule's counter `lr_scheduler.last_epoch` (i64), the accumulation counter
`grad_accum.micro_step` (i64) and buffers `<param>.grad_accum`, and with
keep_gradients each parameter's last gradient `<param>.grad` (GRADIENT_SUFFIX: kept
out of state dicts and checkpoints).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, f32
from xdsl.ir import Attribute, SSAValue

from aicfc.dialects import autodiff, graph
from aicfc.optim import HYPERPARAMETER_DTYPE, Optimizer, hyperparameter_state
from aicfc.optim.lr_scheduler import LAST_EPOCH, LRScheduler

MICRO_STEP = "grad_accum.micro_step"
"""The state counting micro-batches of the current accumulation window (i64, in [0, k))."""

ACCUM_SUFFIX = "grad_accum"
GRADIENT_SUFFIX = "grad"
GRAD_NORM = "grad_norm"
TRAINING_STATE_PREFIXES = ("optim.", "lr_scheduler.", "grad_accum.")
"""Name prefixes of the training loop's states that belong to no parameter."""
"""The output of a clipped step: the gradients' global 2-norm before clipping."""


def initial_lr_state(group: int) -> str:
    """The state name of a scheduled param group's base lr (torch's `initial_lr`)."""
    return hyperparameter_state(group, "initial_lr")


@dataclass(frozen=True)
class TrainingOptions:
    """What a train step does besides forward, backward and the optimizer's update.

    lr_scheduler:   an aicfc.optim.lr_scheduler schedule, evaluated on the device.
    clip_grad_norm: max_norm of torch.nn.utils.clip_grad_norm_ (None: no clipping).
    accumulate:     micro-batches per update (1: every step updates).
    keep_gradients: keep each parameter's gradient in a state buffer for
                    `Program.gradients()` (off: the update consumes it in place).
    Raises TypeError/ValueError naming the option for a bad value.
    """

    lr_scheduler: LRScheduler | None = None
    clip_grad_norm: float | None = None
    accumulate: int = 1
    keep_gradients: bool = False

    def __post_init__(self) -> None:
        if self.lr_scheduler is not None and not isinstance(self.lr_scheduler, LRScheduler):
            raise TypeError(
                "compile: lr_scheduler must be an aicfc.optim.lr_scheduler schedule, got "
                f"{type(self.lr_scheduler).__name__}"
            )
        c: Any = self.clip_grad_norm
        if c is not None:
            if isinstance(c, bool) or not isinstance(c, numbers.Real):
                raise TypeError(f"compile: clip_grad_norm must be a number, got {c!r}")
            if not (math.isfinite(float(c)) and float(c) > 0.0):
                raise ValueError(f"compile: clip_grad_norm must be positive and finite, got {c}")
            object.__setattr__(self, "clip_grad_norm", float(c))
        k: Any = self.accumulate
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"compile: accumulate must be an integer >= 1, got {k!r}")
        object.__setattr__(self, "accumulate", int(k))
        if not isinstance(self.keep_gradients, bool):
            raise TypeError(f"compile: keep_gradients must be a bool, got {self.keep_gradients!r}")


@dataclass(frozen=True)
class GroupLayout:
    """One param group of a compiled train step: its parameters and hyperparameters."""

    index: int
    params: tuple[str, ...]
    values: dict[str, Any] = field(hash=False)
    """Its hyperparameters at compile time, by torch's keys."""


def group_layout(model: Any, optimizer: Optimizer) -> list[GroupLayout]:
    """The param groups of `model` under `optimizer` (ValueError naming unassigned params)."""
    return [
        GroupLayout(i, tuple(names), values)
        for i, (names, values) in enumerate(optimizer.groups(model))
    ]


def training_state(
    model: Any, optimizer: Optimizer, options: TrainingOptions
) -> dict[str, np.ndarray]:
    """Every state of the training loop with its initial value, in argument order (after the
    params, their optimizer states and rng.offset)."""
    params = dict(model.named_parameters())
    values: dict[str, np.ndarray] = {}
    scheduled = options.lr_scheduler is not None
    for g in group_layout(model, optimizer):
        for name, v in optimizer.to_state(g.values).items():
            key = initial_lr_state(g.index) if scheduled and name == "lr" else None
            values[key or hyperparameter_state(g.index, name)] = np.asarray(
                v, dtype=HYPERPARAMETER_DTYPE
            )
    if scheduled:
        values[LAST_EPOCH] = np.zeros((), dtype=np.int64)
    if options.accumulate > 1:
        values[MICRO_STEP] = np.zeros((), dtype=np.int64)
        for n, p in params.items():
            values[f"{n}.{ACCUM_SUFFIX}"] = np.zeros_like(p.data)
    if options.keep_gradients:
        for n, p in params.items():
            values[f"{n}.{GRADIENT_SUFFIX}"] = np.zeros_like(p.data)
    return values


def transient_states(model: Any, options: TrainingOptions) -> list[str]:
    """The states that do not determine the next step (the kept gradients)."""
    if not options.keep_gradients:
        return []
    return [f"{n}.{GRADIENT_SUFFIX}" for n, _ in model.named_parameters()]


def float_constant(b: Builder, value: float, element_type: Attribute) -> SSAValue:
    """A `graph.constant dense<value> : tensor<element_type>`."""
    t: Any = TensorType(element_type, [])
    op = b.insert(graph.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [value])))
    return op.results[0]


@dataclass
class Counters:
    """What `emit_counters` made: the update's apply flag, each group's scheduled lr, and
    the counters' next values (results named after their states)."""

    apply: SSAValue | None
    """None: every step applies (emit_updates writes the constant 1 where it is read)."""
    lrs: dict[int, SSAValue]
    results: list[tuple[str, SSAValue]]


def emit_counters(
    b: Builder, values: Mapping[str, SSAValue], groups: list[GroupLayout], options: TrainingOptions
) -> Counters:
    """The accumulation counter and the schedule, first in the step (they read only state,
    so on the GPU they run beside the forward pass)."""
    results: list[tuple[str, SSAValue]] = []
    apply: SSAValue | None = None
    if options.accumulate > 1:
        step = b.insert(autodiff.AccumulationStepOp(values[MICRO_STEP], options.accumulate))
        apply = step.apply
        results.append((MICRO_STEP, step.new_count))
    lrs: dict[int, SSAValue] = {}
    if options.lr_scheduler is not None:
        apply = apply if apply is not None else float_constant(b, 1.0, f32)
        kinds, milestones, coefficients = options.lr_scheduler.properties()
        initial = [values[initial_lr_state(g.index)] for g in groups]
        op = b.insert(
            autodiff.LrScheduleOp(
                values[LAST_EPOCH], apply, initial, kinds, milestones, coefficients
            )
        )
        results.append((LAST_EPOCH, op.new_last_epoch))
        lrs = {g.index: lr for g, lr in zip(groups, op.lr, strict=True)}
    return Counters(apply, lrs, results)


def emit_updates(
    b: Builder,
    values: Mapping[str, SSAValue],
    grads: dict[str, SSAValue],
    groups: list[GroupLayout],
    optimizer: Optimizer,
    options: TrainingOptions,
    counters: Counters,
    element_type: Attribute,
) -> tuple[list[tuple[str, SSAValue]], dict[str, SSAValue]]:
    """Accumulation, kept gradients, clipping and the optimizer's ops, after the backward.

    Returns (outputs, next values): outputs are program outputs ("grad_norm"), next values
    the new value of each param and state the step writes, by name (the hyperparameters
    are read, never written: `unchanged_states` names them).
    """
    names = list(grads)
    outputs: list[tuple[str, SSAValue]] = []
    nexts: dict[str, SSAValue] = {}
    apply = counters.apply
    if options.accumulate > 1:
        assert apply is not None
        for n in names:
            acc = f"{n}.{ACCUM_SUFFIX}"
            op = b.insert(
                autodiff.AccumulateGradOp(grads[n], values[acc], apply, options.accumulate)
            )
            grads[n], nexts[acc] = op.mean, op.new_accum
    if options.keep_gradients:
        for n in names:
            nexts[f"{n}.{GRADIENT_SUFFIX}"] = grads[n]
    if options.clip_grad_norm is not None:
        clip = b.insert(autodiff.ClipGradNormOp([grads[n] for n in names], options.clip_grad_norm))
        outputs.append((GRAD_NORM, clip.total_norm))
        grad_scale: SSAValue = clip.clip_coef
    else:
        grad_scale = float_constant(b, 1.0, element_type)
    if apply is None:  # the constant 1 (the unclipped f32 grad_scale is one already)
        reuse = options.clip_grad_norm is None and element_type == f32
        apply = grad_scale if reuse else float_constant(b, 1.0, f32)
    # group by group (each group's parameters in model order): one group's updates sit
    # side by side, as torch's fused AdamW steps one param group at a time
    for g, n in [(group, n) for group in groups for n in group.params if n in grads]:
        hyper = {
            h: counters.lrs[g.index]
            if h == "lr" and g.index in counters.lrs
            else values[hyperparameter_state(g.index, h)]
            for h in optimizer.OP.HYPERPARAMETERS
        }
        state = {s: values[f"{n}.{s}"] for s in optimizer.state_names(g.values)}
        new_param, new_state = optimizer.emit(
            b, values[n], grads[n], state, hyper, grad_scale, apply
        )
        nexts[n] = new_param
        nexts.update({f"{n}.{s}": v for s, v in new_state.items()})
    for name, v in counters.results:
        nexts[name] = v
    return outputs, nexts


def unchanged_states(groups: list[GroupLayout], optimizer: Optimizer) -> set[str]:
    """The states a train step reads and never writes: every group's hyperparameters."""
    names = {*optimizer.OP.HYPERPARAMETERS, "initial_lr"}
    return {hyperparameter_state(g.index, h) for g in groups for h in names}
