"""Optimizer steps in SSA form: adam_step and sgd_step (PyTorch's semantics).

Each returns the next values of the parameter and of its state; their alias
policies let aicfc-fold-inplace turn them into in-place updates where that is
safe. Nothing that may change between steps is a property: the bias correction
reads the step counter, and every hyperparameter (lr, betas, eps, weight decay,
momentum) is an operand, a scalar tensor that the train step takes as a state
argument (`optim.0.lr`), so a replayed CUDA graph reads it from device memory and a
new value needs no re-capture (docs/design.md#device-side-counters,
docs/design.md#hyperparameters-as-device-state).

adam_step may also keep a low-precision copy of its parameter (mixed precision,
aicfc-fold-weight-casts): with the optional operand `low_copy` (bf16 or f16, the
parameter's shape) it gives `new_low_copy`, the updated parameter rounded to nearest
even (graph.cast's rounding), which the next step's forward reads instead of casting
the master (docs/design.md#the-optimizer-writes-the-low-precision-weights).

Two more scalar operands control the update (docs/design.md#hyperparameters-as-device-state):
`grad_scale` multiplies the gradient as the update reads it (the clipping
coefficient of `autodiff.clip_grad_norm`; 1 when nothing scales), and `apply`
(1 or 0) says whether this step updates at all: with 0, the parameter and every
state come out bit-identical to what went in (gradient accumulation between
updates; a step whose gradients are not finite).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from xdsl.dialects.builtin import BFloat16Type, Float16Type, TensorType, UnitAttr, f32
from xdsl.ir import SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import ADAM_TRIPLET, SGD_PAIR, OpFlag, OpInfo, constant_value
from aicfc.dialects.tensors import ranked, require_float, tensor

F = OpFlag

LOW_COPY_DTYPES = (BFloat16Type(), Float16Type())
"""The element types of adam_step's low_copy (the dtypes of aicfc-autocast)."""

_NOT_DIFFERENTIATED = "an optimizer update is not differentiated"


def constant_scalar(value: SSAValue) -> float | None:
    """The value of a scalar that a constant op defines (graph.constant), else None."""
    attr = constant_value(value)
    if attr is None:
        return None
    values: tuple[Any, ...] = tuple(attr.get_values())  # a float tensor's: not complex
    return float(values[0]) if len(values) == 1 else None


def verify_scalar(op_name: str, what: str, value: SSAValue) -> None:
    """`value` is a 0-d float tensor (a hyperparameter or a control scalar)."""
    t = ranked(op_name, what, value)
    require_float(op_name, what, t)
    if tuple(t.get_shape()) != ():
        raise VerifyException(f"{op_name}: {what} must be a scalar (0-d) tensor, got {t}")


def verify_hyperparameters(op: AicfcOp, names: tuple[str, ...], unit: tuple[str, ...]) -> None:
    """Scalars; where a constant defines one, it is finite and >= 0 (and < 1 for `unit`),
    as torch.optim checks (a state argument's value is checked when the API sets it)."""
    for what in names:
        value = getattr(op, what)
        verify_scalar(op.name, what, value)
        v = constant_scalar(value)
        if v is None:
            continue
        if not math.isfinite(v):
            raise VerifyException(f"{op.name}: {what} must be finite, got {v}")
        if v < 0.0:
            raise VerifyException(f"{op.name}: {what} must be non-negative, got {v}")
        if what in unit and v >= 1.0:
            raise VerifyException(f"{op.name}: {what} must be in [0, 1), got {v}")


def verify_control(op: AicfcOp) -> None:
    """grad_scale and apply: 0-d float scalars; a constant apply is 0 or 1."""
    for what in ("grad_scale", "apply"):
        verify_scalar(op.name, what, getattr(op, what))
    flag = constant_scalar(op.apply)  # type: ignore[attr-defined]
    if flag is not None and flag not in (0.0, 1.0):
        raise VerifyException(f"{op.name}: apply must be 0 or 1, got {flag}")


def _scalar_step(op_name: str, step: SSAValue) -> None:
    t = ranked(op_name, "step", step)
    if t != tensor((), f32):
        raise VerifyException(f"{op_name}: step must be a scalar tensor<f32>, got {t}")


@irdl_op_definition
class AdamStepOp(AicfcOp):
    """One Adam update with PyTorch's semantics (torch.optim.Adam, Kingma and Ba 2015).

    With apply = 1: g = grad * grad_scale; t = step + 1; g += weight_decay * param
    (unless decoupled, AdamW: param *= 1 - lr * weight_decay); m' = beta1 m +
    (1 - beta1) g; v' = beta2 v + (1 - beta2) g^2; param' = param - lr / (1 - beta1^t)
    * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps); step' = t; with a `low_copy` operand
    (bf16/f16, param's shape) new_low_copy = cast(param') (round to nearest even). With
    apply = 0 every result equals its input (new_low_copy = low_copy). lr, beta1, beta2,
    eps and weight_decay are 0-d float operands (f64 in the train steps aicfc builds: the
    host's values exactly, as torch's are Python floats); grad_scale (the gradients' dtype)
    and apply (f32) are 0-d floats.

    ```mlir
    %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2)
        eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one)
        : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
    %p2, %m2, %v2, %s2, %w2 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2)
        eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one)
        low_copy(%w : tensor<16x8xbf16>)
        : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<16x8xbf16>
    ```
    """

    name = "autodiff.adam_step"
    DEFAULTS: ClassVar[Mapping[str, float]] = MappingProxyType(
        {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
    )
    """The defaults of the optional hyperparameters (torch.optim.Adam's; lr has none):
    aicfc.optim.Adam's initial values of the hyperparameter states."""
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = ("lr", "beta1", "beta2", "eps", "weight_decay")
    """The hyperparameter operands, in operand order (aicfc.optim names a state after each)."""
    FLOPS_PER_ELEMENT: ClassVar[int] = 12
    T: ClassVar = VarConstraint("T", base(TensorType))
    S: ClassVar = VarConstraint("S", base(TensorType))
    H: ClassVar = VarConstraint("H", base(TensorType))
    param = operand_def(T)
    grad = operand_def(T)
    exp_avg = operand_def(T)
    exp_avg_sq = operand_def(T)
    step = operand_def(S)
    lr = operand_def(H)
    beta1 = operand_def(H)
    beta2 = operand_def(H)
    eps = operand_def(H)
    weight_decay = operand_def(H)
    grad_scale = operand_def(base(TensorType))
    apply = operand_def(base(TensorType))
    low_copy = opt_operand_def(base(TensorType))
    new_param = result_def(T)
    new_exp_avg = result_def(T)
    new_exp_avg_sq = result_def(T)
    new_step = result_def(S)
    new_low_copy = opt_result_def(base(TensorType))
    decoupled_weight_decay = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_OPTIMIZER,
            ADAM_TRIPLET,
            differentiable=False,
            why_not=_NOT_DIFFERENTIATED,
        ),
    )
    assembly_format = (
        "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step `lr` `(` $lr `)` "
        "`betas` `(` $beta1 `,` $beta2 `)` `eps` `(` $eps `)` "
        "`weight_decay` `(` $weight_decay `)` `grad_scale` `(` $grad_scale `)` "
        "`apply` `(` $apply `)` "
        "(`low_copy` `(` $low_copy^ `:` type($low_copy) `)`)? "
        "(`decoupled` $decoupled_weight_decay^)? "
        "attr-dict `:` type($param) `,` type($step) `,` type($lr) `,` type($grad_scale) `,` "
        "type($apply) (`->` type($new_low_copy)^)?"
    )

    def __init__(
        self,
        param: SSAValue,
        grad: SSAValue,
        exp_avg: SSAValue,
        exp_avg_sq: SSAValue,
        step: SSAValue,
        hyperparameters: Mapping[str, SSAValue],
        grad_scale: SSAValue,
        apply: SSAValue,
        decoupled_weight_decay: bool = False,
        low_copy: SSAValue | None = None,
    ):
        """hyperparameters: the operand of each name of HYPERPARAMETERS; low_copy: the
        parameter's bf16/f16 copy that the update rewrites (None: no copy)."""
        hyper = [hyperparameters[n] for n in self.HYPERPARAMETERS]
        low = [low_copy] if low_copy is not None else []
        super().__init__(
            operands=[param, grad, exp_avg, exp_avg_sq, step, *hyper, grad_scale, apply, low],
            result_types=[param.type, param.type, param.type, step.type, [v.type for v in low]],
            properties={
                "decoupled_weight_decay": UnitAttr() if decoupled_weight_decay else None,
            },
        )

    def verify_(self) -> None:
        require_float(self.name, "param", ranked(self.name, "param", self.param))
        _scalar_step(self.name, self.step)
        verify_hyperparameters(self, self.HYPERPARAMETERS, unit=("beta1", "beta2"))
        verify_control(self)
        verify_low_copy(self)


@irdl_op_definition
class SgdStepOp(AicfcOp):
    """One SGD update with PyTorch's semantics (torch.optim.SGD, dampening 0).

    With apply = 1: g = grad * grad_scale + weight_decay * param; with a momentum
    buffer: buf' = momentum * buf + g and g = g + momentum * buf' (nesterov) or
    g = buf'; param' = param - lr * g. With apply = 0 every result equals its input.
    The momentum buffer starts at zero, which equals PyTorch's first step (buf = g)
    because dampening is 0; it is the last operand, present exactly when the
    optimizer was built with momentum != 0.

    ```mlir
    %p1 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd)
            grad_scale(%one) apply(%one) : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32>
    %p2, %b2 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd)
            grad_scale(%one) apply(%one) momentum_buffer(%buf) nesterov
            : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xf32>
    ```
    """

    name = "autodiff.sgd_step"
    DEFAULTS: ClassVar[Mapping[str, float]] = MappingProxyType(
        {"momentum": 0.0, "weight_decay": 0.0}
    )
    """The defaults of the optional hyperparameters (torch.optim.SGD's; lr has none)."""
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = ("lr", "momentum", "weight_decay")
    """The hyperparameter operands, in operand order."""
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    H: ClassVar = VarConstraint("H", base(TensorType))
    param = operand_def(T)
    grad = operand_def(T)
    lr = operand_def(H)
    momentum = operand_def(H)
    weight_decay = operand_def(H)
    grad_scale = operand_def(base(TensorType))
    apply = operand_def(base(TensorType))
    momentum_buffer = opt_operand_def(T)
    new_param = result_def(T)
    new_momentum_buffer = opt_result_def(T)
    nesterov = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_OPTIMIZER,
            SGD_PAIR,
            differentiable=False,
            why_not=_NOT_DIFFERENTIATED,
        ),
    )
    assembly_format = (
        "$param `,` $grad `lr` `(` $lr `)` `momentum` `(` $momentum `)` "
        "`weight_decay` `(` $weight_decay `)` `grad_scale` `(` $grad_scale `)` "
        "`apply` `(` $apply `)` (`momentum_buffer` `(` $momentum_buffer^ `)`)? "
        "(`nesterov` $nesterov^)? attr-dict `:` type($param) `,` type($lr) `,` "
        "type($grad_scale) `,` type($apply) (`->` type($new_momentum_buffer)^)?"
    )

    def __init__(
        self,
        param: SSAValue,
        grad: SSAValue,
        hyperparameters: Mapping[str, SSAValue],
        grad_scale: SSAValue,
        apply: SSAValue,
        momentum_buffer: SSAValue | None = None,
        nesterov: bool = False,
    ):
        """hyperparameters: the operand of each name of HYPERPARAMETERS."""
        has_buf = momentum_buffer is not None
        super().__init__(
            operands=[
                param,
                grad,
                *(hyperparameters[n] for n in self.HYPERPARAMETERS),
                grad_scale,
                apply,
                [momentum_buffer] if momentum_buffer is not None else [],
            ],
            result_types=[param.type, [param.type] if has_buf else []],
            properties={"nesterov": UnitAttr() if nesterov else None},
        )

    def verify_(self) -> None:
        require_float(self.name, "param", ranked(self.name, "param", self.param))
        verify_hyperparameters(self, self.HYPERPARAMETERS, unit=())
        verify_control(self)
        has_buf = self.momentum_buffer is not None
        mu = constant_scalar(self.momentum)
        if mu is not None and mu != 0.0 and not has_buf:
            raise VerifyException(
                f"{self.name}: momentum = {mu} needs a momentum buffer operand "
                "(momentum_buffer(...))"
            )
        if self.nesterov is not None and not has_buf:
            raise VerifyException(f"{self.name}: nesterov needs momentum")
        if (self.new_momentum_buffer is not None) != has_buf:
            raise VerifyException(
                f"{self.name}: {int(has_buf)} momentum buffer operand(s) but "
                f"{int(self.new_momentum_buffer is not None)} new momentum buffer result(s); "
                "the updated buffer must be returned exactly when one is passed"
            )


def verify_low_copy(op: AdamStepOp) -> None:
    """low_copy and new_low_copy: both or neither; a bf16/f16 tensor of an f32 param's shape."""
    has_copy = op.low_copy is not None
    if (op.new_low_copy is not None) != has_copy:
        raise VerifyException(
            f"{op.name}: {int(has_copy)} low_copy operand(s) but "
            f"{int(op.new_low_copy is not None)} new low copy result(s); the updated "
            "copy must be returned exactly when one is passed"
        )
    if op.low_copy is None:
        return
    p = ranked(op.name, "param", op.param)
    c = ranked(op.name, "low_copy", op.low_copy)
    if p.element_type != f32 or c.element_type not in LOW_COPY_DTYPES:
        raise VerifyException(
            f"{op.name}: low_copy must be a bf16 or f16 copy of an f32 param, got {c} for {p}"
        )
    if tuple(c.get_shape()) != tuple(p.get_shape()):
        raise VerifyException(f"{op.name}: low_copy must have the param's shape, got {c} for {p}")
    assert op.new_low_copy is not None
    if op.new_low_copy.type != c:
        raise VerifyException(
            f"{op.name}: new low copy must have low_copy's type {c}, got {op.new_low_copy.type}"
        )
