"""The NumPy reference of the optimizer steps and the training loop's bookkeeping.

torch.optim's Adam and SGD updates (`adam_step`, `sgd_step`), the learning-rate schedules
(`schedule_lr`, `lr_schedule`, closed forms of dialects/schedule_table.py's kinds),
gradient clipping and accumulation (`clip_grad_norm`, `accumulation_step`,
`accumulate_grad`) and dynamic loss scaling as torch.amp.GradScaler does it
(`unscale_grad`, `amp_select`, `update_scale`). Part of the NumPy reference:
runtime/reference.py re-exports these functions and keys them by op class in its
REFERENCE table (their conventions: its docstring). Hyperparameters arrive as 0-d arrays
(f64 state in the train steps aicfc builds) and are used as Python floats, as torch.optim
uses a param group's numbers.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

import numpy as np

from aicfc.dialects import autodiff as ad
from aicfc.dialects.schedule_table import segment_values, split_kinds

Array = np.ndarray


def _unchanged(*arrays: Array) -> tuple[Array, ...]:
    """Copies of the inputs: the results of an update whose `apply` is 0."""
    return tuple(np.array(a, copy=True) for a in arrays)


def _scaled(grad: Array, grad_scale: Array) -> Array:
    """grad * grad_scale in the gradient's dtype (exactly grad where the scale is 1)."""
    s = float(grad_scale)
    return grad if s == 1.0 else grad * grad.dtype.type(s)


def adam_step(
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    step: Array,
    lr: Array,
    beta1: Array,
    beta2: Array,
    eps: Array,
    weight_decay: Array,
    grad_scale: Array,
    apply: Array,
    low_copy: Array | None = None,
    *,
    decoupled_weight_decay: bool = False,
) -> tuple[Array, ...]:
    """torch.optim.Adam's single-tensor update, in its order of operations, on the gradient
    times grad_scale; with apply = 0 the inputs unchanged. With a `low_copy` (bf16/f16)
    also param' cast to its dtype (graph.cast's rounding, round to nearest even)."""
    if float(apply) == 0.0:
        kept = [] if low_copy is None else [low_copy]
        return _unchanged(param, exp_avg, exp_avg_sq, step, *kept)
    new = _adam(
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        step,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        grad_scale,
        decoupled_weight_decay,
    )
    if low_copy is None:
        return new
    with np.errstate(over="ignore"):  # f16 past 65504 is inf, as cast's
        return (*new, new[0].astype(low_copy.dtype))


def _adam(
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    step: Array,
    lr: Array,
    beta1: Array,
    beta2: Array,
    eps: Array,
    weight_decay: Array,
    grad_scale: Array,
    decoupled_weight_decay: bool,
) -> tuple[Array, ...]:
    dt = param.dtype.type
    lr_, b1, b2, eps_, wd = (float(h) for h in (lr, beta1, beta2, eps, weight_decay))
    grad = _scaled(grad, grad_scale)
    t = float(step) + 1.0
    if wd and decoupled_weight_decay:
        param = param * dt(1.0 - lr_ * wd)
    elif wd:
        grad = grad + dt(wd) * param
    m = exp_avg + dt(1.0 - b1) * (grad - exp_avg)  # torch: exp_avg.lerp_(grad, 1 - beta1)
    v = exp_avg_sq * dt(b2) + dt(1.0 - b2) * grad * grad
    step_size = lr_ / (1.0 - b1**t)
    bias_correction2_sqrt = (1.0 - b2**t) ** 0.5
    denom = np.sqrt(v) / dt(bias_correction2_sqrt) + dt(eps_)
    new_param = param - dt(step_size) * (m / denom)
    return new_param, m, v, np.asarray(t, dtype=step.dtype)


def sgd_step(
    param: Array,
    grad: Array,
    lr: Array,
    momentum: Array,
    weight_decay: Array,
    grad_scale: Array,
    apply: Array,
    momentum_buffer: Array | None = None,
    *,
    nesterov: bool = False,
) -> tuple[Array, ...]:
    """torch.optim.SGD's update with dampening 0 (buffer starting at zero) on the gradient
    times grad_scale; with apply = 0 the inputs unchanged."""
    if float(apply) == 0.0:
        return _unchanged(param, *([] if momentum_buffer is None else [momentum_buffer]))
    dt = param.dtype.type
    lr_, mu, wd = float(lr), float(momentum), float(weight_decay)
    grad = _scaled(grad, grad_scale)
    if wd:
        grad = grad + dt(wd) * param
    if momentum_buffer is None:
        return (param - dt(lr_) * grad,)
    buf = dt(mu) * momentum_buffer + grad
    step = grad + dt(mu) * buf if nesterov else buf
    return param - dt(lr_) * step, buf


def _constant_lr(b: float, t: int, *, factor: float, total_iters: float) -> float:
    return b * (factor if t < total_iters else 1.0)


def _linear_lr(
    b: float, t: int, *, start_factor: float, end_factor: float, total_iters: float
) -> float:
    return b * (start_factor + (end_factor - start_factor) * min(total_iters, t) / total_iters)


def _step_lr(b: float, t: int, *, step_size: float, gamma: float) -> float:
    return b * gamma ** float(t // int(step_size))


def _exponential_lr(b: float, t: int, *, gamma: float) -> float:
    return b * gamma ** float(t)


def _cosine_lr(b: float, t: int, *, T_max: float, eta_min: float) -> float:
    return eta_min + (b - eta_min) * (1.0 + math.cos(math.pi * t / T_max)) / 2.0


CLOSED_FORMS: dict[str, Callable[..., float]] = {
    "constant": _constant_lr,
    "linear": _linear_lr,
    "step": _step_lr,
    "exponential": _exponential_lr,
    "cosine": _cosine_lr,
}
"""The closed form of each schedule kind (dialects/schedule_table.py), by name."""


def schedule_lr(
    base: float,
    last_epoch: int,
    kinds: str,
    milestones: tuple[int, ...],
    coefficients: tuple[float, ...],
) -> float:
    """The learning rate after `last_epoch` updates of a schedule (autodiff.lr_schedule's
    properties), in float64: the segment whose milestone `last_epoch` has passed, at its
    local step (torch's SequentialLR restarts a scheduler at its milestone)."""
    names = split_kinds(kinds)
    segment = bisect.bisect_right(milestones, last_epoch)
    t = last_epoch - (milestones[segment - 1] if segment else 0)
    values = segment_values(names[segment], coefficients, segment)
    return CLOSED_FORMS[names[segment]](float(base), t, **values)


def lr_schedule(
    last_epoch: Array,
    apply: Array,
    *initial_lr: Array,
    kinds: str,
    milestones: tuple[int, ...],
    coefficients: tuple[float, ...],
) -> tuple[Array, ...]:
    """(last_epoch + [apply != 0], lr of each group at last_epoch)."""
    epoch = int(last_epoch)
    lrs = [
        np.asarray(schedule_lr(float(b), epoch, kinds, milestones, coefficients), dtype=b.dtype)
        for b in initial_lr
    ]
    new_epoch = np.asarray(epoch + (float(apply) != 0.0), dtype=last_epoch.dtype)
    return (new_epoch, *lrs)


def clip_grad_norm(*grads: Array, max_norm: float) -> tuple[Array, Array]:
    """(total_norm, clip_coef) of torch.nn.utils.clip_grad_norm_: the 2-norm of all the
    gradients (squares summed in float64, rounded once), min(1, max_norm / (norm + 1e-6))
    in the gradients' dtype (NaN stays NaN, as torch.clamp keeps it)."""
    dt = grads[0].dtype.type
    total = 0.0
    for grad in grads:
        g64 = np.asarray(grad, dtype=np.float64).ravel()
        total += float(np.sum(g64 * g64))
    norm = dt(math.sqrt(total))
    coef = dt(max_norm) / (norm + dt(ad.ClipGradNormOp.EPS))
    return np.asarray(norm), np.asarray(np.minimum(dt(1.0), coef), dtype=norm.dtype)


def accumulation_step(count: Array, *, every: int) -> tuple[Array, Array]:
    """((count + 1) mod every, 1.0 where count + 1 == every else 0.0 as f32)."""
    c = int(count) + 1
    return np.asarray(c % every, dtype=count.dtype), np.asarray(
        1.0 if c == every else 0.0, dtype=np.float32
    )


def accumulate_grad(grad: Array, accum: Array, reset: Array, *, every: int) -> tuple[Array, Array]:
    """(mean, new_accum): sum = accum + grad; mean = sum / every; new_accum = 0 where
    reset != 0, else sum."""
    total = accum + grad
    mean = total / total.dtype.type(every)
    return mean, (np.zeros_like(total) if float(reset) != 0.0 else total)


# --- dynamic loss scaling (torch.amp.GradScaler) --------------------------------


def unscale_grad(grad: Array, scale: Array) -> tuple[Array, Array]:
    """(grad * (1 / scale), 1.0 if any element of grad is not finite else 0.0)."""
    inv = np.float32(1.0) / np.float32(scale)
    found = np.asarray(0.0 if np.isfinite(grad).all() else 1.0, np.float32)
    return grad * inv.astype(grad.dtype), found


def amp_select(found_inf: Array, updated: Array, previous: Array) -> tuple[Array]:
    return ((previous if float(found_inf) != 0.0 else updated).copy(),)


def update_scale(
    scale: Array,
    growth_tracker: Array,
    found_inf: Array,
    *,
    growth_factor: float = 2.0,
    backoff_factor: float = 0.5,
    growth_interval: int = 2000,
) -> tuple[Array, Array]:
    """torch._amp_update_scale_: back off on an overflow, grow after growth_interval good
    steps in a row, unless the grown scale would not be finite (it stays; the tracker
    restarts either way)."""
    s, t = np.float32(scale), np.float32(growth_tracker)
    if float(found_inf) != 0.0:
        s, t = s * np.float32(backoff_factor), np.float32(0.0)
    else:
        t = t + np.float32(1.0)
        if t >= growth_interval:
            with np.errstate(over="ignore"):
                grown = s * np.float32(growth_factor)
            s, t = (grown if np.isfinite(grown) else s), np.float32(0.0)
    return np.asarray(s, np.float32), np.asarray(t, np.float32)
