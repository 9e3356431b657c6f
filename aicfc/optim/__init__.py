"""Optimizers as IR emitters: each writes one SSA update op per parameter.

An optimizer here is a frozen description (hyperparameters with PyTorch's defaults and
semantics, and its param groups: optim/groups.py) that knows which state tensors it
keeps per parameter and how to emit the update (`autodiff.adam_step` /
`autodiff.sgd_step`). Per-parameter state names follow PyTorch's optimizer state keys,
prefixed by the parameter name:

    Adam / AdamW:          "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step"
    SGD with momentum > 0: "<param>.momentum_buffer"

Every state starts at zero (step = 0.0, as a tensor<f32> so the bias correction is
computed on the device from it). The hyperparameters are state too, one f64 scalar per
param group and name (`optim.0.lr`, `optim.0.beta1`, ...: the op class's
`HYPERPARAMETERS`), so a compiled step reads them from device memory and
`Program.param_groups` changes them without a re-capture
(docs/design.md#hyperparameters-as-device-state). The update math is
`runtime/reference_optim.py` (adam_step, sgd_step), checked against torch.optim by
test/python/test_torch_oracle.py. Schedules: `aicfc.optim.lr_scheduler`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from xdsl.builder import Builder
from xdsl.ir import SSAValue

from aicfc.dialects import autodiff
from aicfc.optim.groups import ParamGroup, assign

_ADAM = autodiff.AdamStepOp.DEFAULTS
_SGD = autodiff.SgdStepOp.DEFAULTS
"""The hyperparameter defaults (PyTorch's), written once on the op classes."""

HYPERPARAMETER_DTYPE = np.dtype(np.float64)
"""The dtype of the hyperparameter states (the host's Python floats, exactly)."""


def hyperparameter_state(group: int, name: str) -> str:
    """The state name of hyperparameter `name` (an op's operand) of param group `group`."""
    return f"optim.{group}.{name}"


def _number(where: str, value: Any, upper: float | None = None) -> float:
    """`value` as a float in [0, upper) (or [0, inf) with no upper), as torch.optim checks.

    Raises TypeError for a non-number and ValueError outside the range or not finite,
    naming `where`: an invalid hyperparameter must fail here, not train silently.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or (upper is not None and v >= upper):
        bound = f"in [0, {upper:g})" if upper is not None else ">= 0 and finite"
        raise ValueError(f"{where} must be {bound}, got {value!r}")
    return v


@dataclass(frozen=True)
class Optimizer:
    """Base: the hyperparameters by torch's param-group keys, the states, the update.

    param_groups: rules that split the parameters into groups with their own
    hyperparameters (optim/groups.py); empty: one group of every parameter.
    """

    param_groups: tuple[ParamGroup, ...] = field(default=(), kw_only=True)

    STATE_NAMES: ClassVar[tuple[str, ...]] = ()
    OP: ClassVar[type[autodiff.AdamStepOp] | type[autodiff.SgdStepOp]]
    KEYS: ClassVar[tuple[str, ...]] = ()
    """torch's param-group keys of the hyperparameters ("lr", "betas", ...)."""

    def __post_init__(self) -> None:
        groups = tuple(self.param_groups)
        for i, g in enumerate(groups):
            if not isinstance(g, ParamGroup):
                raise TypeError(
                    f"{type(self).__name__}: param_groups[{i}] must be an optim.ParamGroup, "
                    f"got {type(g).__name__}"
                )
        object.__setattr__(self, "param_groups", groups)
        for k, v in self.defaults().items():  # normalised and checked, as torch does
            object.__setattr__(self, k, self.check(k, v, type(self).__name__))
        self.check_structure(self.defaults(), type(self).__name__)
        for i, g in enumerate(groups):
            self.values(g, f"{type(self).__name__}: param_groups[{i}]")

    # --- hyperparameters ------------------------------------------------------

    def defaults(self) -> dict[str, Any]:
        """The optimizer's hyperparameters by torch's keys (betas as a pair)."""
        return {k: getattr(self, k) for k in self.KEYS}

    def check(self, key: str, value: Any, where: str) -> Any:
        """`value` of hyperparameter `key` normalised (a float, betas a pair of floats);
        TypeError/ValueError naming `where` and the key for a bad one or an unknown key."""
        if key not in self.KEYS:
            raise ValueError(
                f"{where}: {type(self).__name__} has no hyperparameter {key!r} "
                f"(known: {', '.join(self.KEYS)})"
            )
        if key == "betas":
            if not isinstance(value, tuple | list) or len(value) != 2:
                raise ValueError(f"{where}: betas must be a pair, got {value!r}")
            return tuple(_number(f"{where}: betas[{i}]", b, 1.0) for i, b in enumerate(value))
        return _number(f"{where}: {key}", value)

    def values(self, group: ParamGroup | None, where: str = "") -> dict[str, Any]:
        """The hyperparameters of `group` (the optimizer's, overridden by the group's)."""
        values = self.defaults()
        if group is not None:
            for k, v in group.hyperparameters.items():
                values[k] = self.check(k, v, where or type(self).__name__)
        self.check_structure(values, where or type(self).__name__)
        return values

    def check_structure(self, values: Mapping[str, Any], where: str) -> None:
        """Refuse hyperparameters that contradict the optimizer's flags (SGD: nesterov
        without momentum)."""

    def to_state(self, values: Mapping[str, Any]) -> dict[str, float]:
        """torch's keys -> the op's hyperparameter operands (betas -> beta1, beta2)."""
        out: dict[str, float] = {}
        for k, v in values.items():
            if k == "betas":
                out["beta1"], out["beta2"] = float(v[0]), float(v[1])
            else:
                out[k] = float(v)
        return out

    def from_state(self, state: Mapping[str, float]) -> dict[str, Any]:
        """The op's hyperparameter operands -> torch's keys."""
        out: dict[str, Any] = {}
        for k in self.KEYS:
            out[k] = (state["beta1"], state["beta2"]) if k == "betas" else state[k]
        return out

    def groups(self, model: Any) -> list[tuple[list[str], dict[str, Any]]]:
        """(parameter names, hyperparameters by torch's keys) of each param group of
        `model`; ValueError naming the parameters that no group takes."""
        members = assign(self.param_groups, model)
        rules: tuple[ParamGroup | None, ...] = self.param_groups or (None,)
        return [(names, self.values(g)) for names, g in zip(members, rules, strict=True)]

    def structure(self) -> tuple[Any, ...]:
        """What a compiled train step depends on beyond the hyperparameter values: the
        class, its flags and the group rules (Program refuses a new optimizer that
        differs here)."""
        return (type(self), self.param_groups)

    # --- states and the update ------------------------------------------------

    def state_names(self, values: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        """Suffixes of the per-parameter states of a group with `values`, in argument order."""
        return self.STATE_NAMES

    def init_state(
        self, param: np.ndarray, values: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray]:
        """Initial value of each state of `param` (all zeros; Adam's step is a scalar f32)."""
        return {s: np.zeros_like(param) for s in self.state_names(values)}

    def emit(
        self,
        b: Builder,
        param: SSAValue,
        grad: SSAValue,
        state: dict[str, SSAValue],
        hyper: Mapping[str, SSAValue],
        grad_scale: SSAValue,
        apply: SSAValue,
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        """Insert the update of one parameter; return (param', {state suffix: state'}).

        hyper: the value of each of `OP.HYPERPARAMETERS` (the group's state arguments, or
        the schedule's lr); grad_scale and apply: the update's control scalars.
        """
        raise NotImplementedError


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam (Kingma and Ba 2015) with torch.optim.Adam's semantics and defaults.

    lr: step size; betas: (beta1, beta2) in [0, 1); eps: added to sqrt(v_hat);
    weight_decay: L2 penalty added to the gradient, or with
    `decoupled_weight_decay=True` the AdamW decay param *= 1 - lr*wd
    (Loshchilov and Hutter 2019). weight_decay_min_rank: parameters of a lower rank
    are not decayed; 2 is nanoGPT's grouping (the matrices and embedding tables decay,
    biases and layer-norm weights do not: the two param_groups of nanoGPT's
    configure_optimizers), shorthand for `param_groups=(ParamGroup(min_ndim=r),
    ParamGroup(max_ndim=r - 1, weight_decay=0.0))`. amsgrad, maximize and capturable
    flags of PyTorch are not offered (the step counter always lives on the device).
    Raises ValueError, as torch.optim.Adam does, for lr, eps or weight_decay < 0
    or a beta outside [0, 1) (and for non-finite values), TypeError for a non-number,
    and ValueError for a weight_decay_min_rank that is not an integer >= 0 or is given
    with other param_groups.
    """

    lr: float = 1e-3
    betas: tuple[float, float] = (_ADAM["beta1"], _ADAM["beta2"])
    eps: float = _ADAM["eps"]
    weight_decay: float = _ADAM["weight_decay"]
    decoupled_weight_decay: bool = False
    weight_decay_min_rank: int = 0

    STATE_NAMES: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq", "step")
    OP: ClassVar = autodiff.AdamStepOp
    KEYS: ClassVar[tuple[str, ...]] = ("lr", "betas", "eps", "weight_decay")

    def __post_init__(self) -> None:
        rank: Any = self.weight_decay_min_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(
                f"{type(self).__name__}: weight_decay_min_rank must be an integer >= 0, "
                f"got {rank!r}"
            )
        if rank > 0:
            ranked = (ParamGroup(min_ndim=rank), ParamGroup(max_ndim=rank - 1, weight_decay=0.0))
            if tuple(self.param_groups) not in ((), ranked):
                raise ValueError(
                    f"{type(self).__name__}: weight_decay_min_rank={rank} is a shorthand for "
                    "two param_groups; give one or the other"
                )
            object.__setattr__(self, "param_groups", ranked)
        super().__post_init__()

    def structure(self) -> tuple[Any, ...]:
        return (*super().structure(), self.decoupled_weight_decay)

    def init_state(
        self, param: np.ndarray, values: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray]:
        return {
            "exp_avg": np.zeros_like(param),
            "exp_avg_sq": np.zeros_like(param),
            "step": np.zeros((), dtype=np.float32),
        }

    def emit(
        self,
        b: Builder,
        param: SSAValue,
        grad: SSAValue,
        state: dict[str, SSAValue],
        hyper: Mapping[str, SSAValue],
        grad_scale: SSAValue,
        apply: SSAValue,
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        op = b.insert(
            autodiff.AdamStepOp(
                param,
                grad,
                state["exp_avg"],
                state["exp_avg_sq"],
                state["step"],
                hyper,
                grad_scale,
                apply,
                decoupled_weight_decay=self.decoupled_weight_decay,
            )
        )
        return op.new_param, {
            "exp_avg": op.new_exp_avg,
            "exp_avg_sq": op.new_exp_avg_sq,
            "step": op.new_step,
        }


@dataclass(frozen=True)
class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW; default weight_decay 1e-2)."""

    weight_decay: float = 1e-2
    decoupled_weight_decay: bool = True


@dataclass(frozen=True)
class SGD(Optimizer):
    """Stochastic gradient descent with torch.optim.SGD's semantics (dampening 0).

    g = grad + weight_decay * param; with momentum mu > 0: buf = mu*buf + g and
    the step uses buf, or g + mu*buf with `nesterov=True`; param -= lr * step.
    The momentum buffer starts at zero, which equals PyTorch's first step. A group
    compiled with momentum 0 has no buffer (its momentum cannot be raised later).
    Raises ValueError, as torch.optim.SGD does, for lr, momentum or weight_decay < 0
    (and for non-finite values), TypeError for a non-number.
    """

    lr: float = 1e-3
    momentum: float = _SGD["momentum"]
    weight_decay: float = _SGD["weight_decay"]
    nesterov: bool = False

    OP: ClassVar = autodiff.SgdStepOp
    KEYS: ClassVar[tuple[str, ...]] = ("lr", "momentum", "weight_decay")

    def check_structure(self, values: Mapping[str, Any], where: str) -> None:
        if self.nesterov and values["momentum"] <= 0.0:
            raise ValueError(f"{where}: nesterov needs momentum > 0 (as in torch.optim.SGD)")

    def structure(self) -> tuple[Any, ...]:
        return (*super().structure(), self.nesterov)

    def state_names(self, values: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        momentum = (values or self.defaults())["momentum"]
        return ("momentum_buffer",) if momentum != 0.0 else ()

    def emit(
        self,
        b: Builder,
        param: SSAValue,
        grad: SSAValue,
        state: dict[str, SSAValue],
        hyper: Mapping[str, SSAValue],
        grad_scale: SSAValue,
        apply: SSAValue,
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        op = b.insert(
            autodiff.SgdStepOp(
                param,
                grad,
                hyper,
                grad_scale,
                apply,
                state.get("momentum_buffer"),
                nesterov=self.nesterov,
            )
        )
        if op.new_momentum_buffer is None:
            return op.new_param, {}
        return op.new_param, {"momentum_buffer": op.new_momentum_buffer}


__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Optimizer",
    "ParamGroup",
    "hyperparameter_state",
]
