"""Optimizers as IR emitters: each writes one SSA update op per parameter.

An optimizer here is a frozen description (hyperparameters with PyTorch's
defaults and semantics) that knows which state tensors it keeps per parameter
and how to emit the update (`autodiff.adam_step` / `autodiff.sgd_step`). State
names follow PyTorch's optimizer state keys, prefixed by the parameter name:

    Adam / AdamW:          "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step"
    SGD with momentum > 0: "<param>.momentum_buffer"

Every state starts at zero (step = 0.0, as a tensor<f32> so the bias
correction is computed on the device from it). The update math is
`runtime/reference.py` (adam_step, sgd_step), checked against torch.optim by
test/python/test_torch_oracle.py.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from aicfc.dialects import autodiff

_ADAM = autodiff.AdamStepOp.DEFAULTS
_SGD = autodiff.SgdStepOp.DEFAULTS
"""The hyperparameter defaults (PyTorch's), written once on the op classes."""


def _hyperparameter(opt: object, name: str, value: Any, upper: float | None = None) -> float:
    """`value` as a float in [0, upper) (or [0, inf) with no upper), as torch.optim checks.

    Raises TypeError for a non-number and ValueError outside the range or not finite,
    naming the optimizer and the hyperparameter: an invalid one must fail here, not
    train silently.
    """
    where = f"{type(opt).__name__}: {name}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or (upper is not None and v >= upper):
        bound = f"in [0, {upper:g})" if upper is not None else ">= 0 and finite"
        raise ValueError(f"{where} must be {bound}, got {value!r}")
    return v


@dataclass(frozen=True)
class Optimizer:
    """Base: `state_shapes` says which states exist; `emit` writes the update."""

    STATE_NAMES: ClassVar[tuple[str, ...]] = ()

    def state_names(self) -> tuple[str, ...]:
        """Suffixes of this optimizer's per-parameter states, in argument order."""
        return self.STATE_NAMES

    def init_state(self, param: np.ndarray) -> dict[str, np.ndarray]:
        """Initial value of each state of `param` (all zeros; Adam's step is a scalar f32)."""
        return {s: np.zeros_like(param) for s in self.state_names()}

    def emit(
        self, b: Builder, param: SSAValue, grad: SSAValue, state: dict[str, SSAValue]
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        """Insert the update of one parameter; return (param', {state suffix: state'})."""
        raise NotImplementedError

    def group(self, shape: tuple[int, ...]) -> int:
        """The parameter group of a parameter of `shape` (torch.optim's param_groups): the
        train step emits the updates group by group, so the updates of one group, equal
        in their hyperparameters, sit side by side (one multi-tensor launch each)."""
        return 0


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam (Kingma and Ba 2015) with torch.optim.Adam's semantics and defaults.

    lr: step size; betas: (beta1, beta2) in [0, 1); eps: added to sqrt(v_hat);
    weight_decay: L2 penalty added to the gradient, or with
    `decoupled_weight_decay=True` the AdamW decay param *= 1 - lr*wd
    (Loshchilov and Hutter 2019). weight_decay_min_rank: parameters of a lower rank
    are not decayed (their own group, weight_decay 0); 2 is nanoGPT's grouping (the
    matrices and embedding tables decay, biases and layer-norm weights do not: the two
    param_groups of nanoGPT's configure_optimizers). amsgrad, maximize and capturable
    flags of PyTorch are not offered (the step counter always lives on the device).
    Raises ValueError, as torch.optim.Adam does, for lr, eps or weight_decay < 0
    or a beta outside [0, 1) (and for non-finite values), TypeError for a non-number
    (and ValueError for a weight_decay_min_rank that is not an integer >= 0).
    """

    lr: float = 1e-3
    betas: tuple[float, float] = (_ADAM["beta1"], _ADAM["beta2"])
    eps: float = _ADAM["eps"]
    weight_decay: float = _ADAM["weight_decay"]
    decoupled_weight_decay: bool = False
    weight_decay_min_rank: int = 0

    STATE_NAMES: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq", "step")

    def __post_init__(self) -> None:
        if not isinstance(self.betas, tuple | list) or len(self.betas) != 2:
            raise ValueError(f"{type(self).__name__}: betas must be a pair, got {self.betas!r}")
        betas = tuple(
            _hyperparameter(self, f"betas[{i}]", b, 1.0) for i, b in enumerate(self.betas)
        )
        object.__setattr__(self, "betas", betas)
        for name in ("lr", "eps", "weight_decay"):
            object.__setattr__(self, name, _hyperparameter(self, name, getattr(self, name)))
        rank = self.weight_decay_min_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(
                f"{type(self).__name__}: weight_decay_min_rank must be an integer >= 0, "
                f"got {rank!r}"
            )

    def group(self, shape: tuple[int, ...]) -> int:
        """0: decayed, 1: below weight_decay_min_rank (no weight decay)."""
        return 0 if len(shape) >= self.weight_decay_min_rank else 1

    def init_state(self, param: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "exp_avg": np.zeros_like(param),
            "exp_avg_sq": np.zeros_like(param),
            "step": np.zeros((), dtype=np.float32),
        }

    def emit(
        self, b: Builder, param: SSAValue, grad: SSAValue, state: dict[str, SSAValue]
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        ptype = param.type
        shape = tuple(ptype.get_shape()) if isinstance(ptype, TensorType) else ()
        decayed = self.group(shape) == 0
        op = b.insert(
            autodiff.AdamStepOp(
                param,
                grad,
                state["exp_avg"],
                state["exp_avg_sq"],
                state["step"],
                lr=self.lr,
                beta1=self.betas[0],
                beta2=self.betas[1],
                eps=self.eps,
                weight_decay=self.weight_decay if decayed else 0.0,
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
    The momentum buffer starts at zero, which equals PyTorch's first step.
    Raises ValueError, as torch.optim.SGD does, for lr, momentum or weight_decay < 0
    (and for non-finite values), TypeError for a non-number.
    """

    lr: float = 1e-3
    momentum: float = _SGD["momentum"]
    weight_decay: float = _SGD["weight_decay"]
    nesterov: bool = False

    def __post_init__(self) -> None:
        for name in ("lr", "momentum", "weight_decay"):
            object.__setattr__(self, name, _hyperparameter(self, name, getattr(self, name)))
        if self.nesterov and self.momentum <= 0.0:
            raise ValueError("SGD: nesterov needs momentum > 0 (as in torch.optim.SGD)")

    def state_names(self) -> tuple[str, ...]:
        return ("momentum_buffer",) if self.momentum != 0.0 else ()

    def emit(
        self, b: Builder, param: SSAValue, grad: SSAValue, state: dict[str, SSAValue]
    ) -> tuple[SSAValue, dict[str, SSAValue]]:
        op = b.insert(
            autodiff.SgdStepOp(
                param,
                grad,
                state.get("momentum_buffer"),
                lr=self.lr,
                momentum=self.momentum,
                weight_decay=self.weight_decay,
                nesterov=self.nesterov,
            )
        )
        if op.new_momentum_buffer is None:
            return op.new_param, {}
        return op.new_param, {"momentum_buffer": op.new_momentum_buffer}


__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
