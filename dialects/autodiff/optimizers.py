"""Optimizer steps in SSA form: adam_step and sgd_step (PyTorch's semantics).

Each returns the next values of the parameter and of its state; their alias
policies let aicfc-fold-inplace turn them into in-place updates where that is
safe, and the bias correction reads the step counter on the device
(docs/design.md#device-side-counters).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from xdsl.dialects.builtin import Float64Type, FloatAttr, TensorType, UnitAttr, f32
from xdsl.ir import SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import ADAM_TRIPLET, SGD_PAIR, OpFlag, OpInfo
from aicfc.dialects.tensors import ranked, require_float, tensor

F = OpFlag


def _f64(x: float) -> FloatAttr[Float64Type]:
    return FloatAttr(x, Float64Type())


def _check_hyperparameters(op: AicfcOp, names: tuple[str, ...]) -> None:
    """Optimizer hyperparameters: finite and >= 0 (torch.optim refuses negative ones)."""
    for what in names:
        v = getattr(op, what).value.data
        if not math.isfinite(v):
            raise VerifyException(f"{op.name}: {what} must be finite, got {v}")
        if v < 0.0:
            raise VerifyException(f"{op.name}: {what} must be non-negative, got {v}")


def _scalar_step(op_name: str, step: SSAValue) -> None:
    t = ranked(op_name, "step", step)
    if t != tensor((), f32):
        raise VerifyException(f"{op_name}: step must be a scalar tensor<f32>, got {t}")


@irdl_op_definition
class AdamStepOp(AicfcOp):
    """One Adam update with PyTorch's semantics (torch.optim.Adam, Kingma and Ba 2015).

    t = step + 1; g = grad + weight_decay * param (unless decoupled, AdamW:
    param *= 1 - lr * weight_decay); m' = beta1 m + (1 - beta1) g;
    v' = beta2 v + (1 - beta2) g^2; param' = param - lr / (1 - beta1^t) * m' /
    (sqrt(v') / sqrt(1 - beta2^t) + eps); step' = t. The bias correction reads
    the step counter, so a replayed CUDA graph needs no host-fed scalar
    (docs/design.md#device-side-counters).

    ```mlir
    %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %g, %m, %v, %s lr = 1.000000e-03
                           : tensor<16x8xf32>, tensor<f32>
    ```
    """

    name = "autodiff.adam_step"
    DEFAULTS: ClassVar[Mapping[str, float]] = MappingProxyType(
        {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
    )
    """The defaults of the optional hyperparameters (torch.optim.Adam's; lr has none): the
    properties, `__init__`, the NumPy reference, aicfc.optim.Adam and the CUDA launcher
    read them here."""
    FLOPS_PER_ELEMENT: ClassVar[int] = 12
    T: ClassVar = VarConstraint("T", base(TensorType))
    S: ClassVar = VarConstraint("S", base(TensorType))
    param = operand_def(T)
    grad = operand_def(T)
    exp_avg = operand_def(T)
    exp_avg_sq = operand_def(T)
    step = operand_def(S)
    new_param = result_def(T)
    new_exp_avg = result_def(T)
    new_exp_avg_sq = result_def(T)
    new_step = result_def(S)
    lr = prop_def(FloatAttr[Float64Type])
    beta1 = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["beta1"]))
    beta2 = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["beta2"]))
    eps = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["eps"]))
    weight_decay = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["weight_decay"]))
    decoupled_weight_decay = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_OPTIMIZER,
            ADAM_TRIPLET,
            differentiable=False,
            why_not="an optimizer update is not differentiated",
        ),
    )
    assembly_format = (
        "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step `lr` `=` $lr "
        "(`beta1` `=` $beta1^)? (`beta2` `=` $beta2^)? (`eps` `=` $eps^)? "
        "(`weight_decay` `=` $weight_decay^)? (`decoupled` $decoupled_weight_decay^)? "
        "attr-dict `:` type($param) `,` type($step)"
    )

    def __init__(
        self,
        param: SSAValue,
        grad: SSAValue,
        exp_avg: SSAValue,
        exp_avg_sq: SSAValue,
        step: SSAValue,
        lr: float,
        beta1: float = DEFAULTS["beta1"],
        beta2: float = DEFAULTS["beta2"],
        eps: float = DEFAULTS["eps"],
        weight_decay: float = DEFAULTS["weight_decay"],
        decoupled_weight_decay: bool = False,
    ):
        super().__init__(
            operands=[param, grad, exp_avg, exp_avg_sq, step],
            result_types=[param.type, param.type, param.type, step.type],
            properties={
                "lr": _f64(lr),
                "beta1": _f64(beta1),
                "beta2": _f64(beta2),
                "eps": _f64(eps),
                "weight_decay": _f64(weight_decay),
                "decoupled_weight_decay": UnitAttr() if decoupled_weight_decay else None,
            },
        )

    def verify_(self) -> None:
        require_float(self.name, "param", ranked(self.name, "param", self.param))
        _scalar_step(self.name, self.step)
        for what in ("beta1", "beta2"):
            b = getattr(self, what).value.data
            if not 0.0 <= b < 1.0:
                raise VerifyException(f"{self.name}: {what} must be in [0, 1), got {b}")
        _check_hyperparameters(self, ("lr", "eps", "weight_decay"))


@irdl_op_definition
class SgdStepOp(AicfcOp):
    """One SGD update with PyTorch's semantics (torch.optim.SGD, dampening 0).

    g = grad + weight_decay * param; with momentum: buf' = momentum * buf + g and
    g = g + momentum * buf' (nesterov) or g = buf'; param' = param - lr * g.
    The momentum buffer starts at zero, which equals PyTorch's first step
    (buf = g) because dampening is 0.

    ```mlir
    %p1 = autodiff.sgd_step %p, %g lr = 1.000000e-02
            : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %p2, %b2 = autodiff.sgd_step %p, %g, %buf lr = 1.000000e-02 momentum = 9.000000e-01
                 : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    ```
    """

    name = "autodiff.sgd_step"
    DEFAULTS: ClassVar[Mapping[str, float]] = MappingProxyType(
        {"momentum": 0.0, "weight_decay": 0.0}
    )
    """The defaults of the optional hyperparameters (torch.optim.SGD's; lr has none)."""
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    param = operand_def(T)
    grad = operand_def(T)
    momentum_buffer = opt_operand_def(T)
    new_param = result_def(T)
    new_momentum_buffer = opt_result_def(T)
    lr = prop_def(FloatAttr[Float64Type])
    momentum = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["momentum"]))
    weight_decay = prop_def(FloatAttr[Float64Type], default_value=_f64(DEFAULTS["weight_decay"]))
    nesterov = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_OPTIMIZER,
            SGD_PAIR,
            differentiable=False,
            why_not="an optimizer update is not differentiated",
        ),
    )
    assembly_format = (
        "$param `,` $grad (`,` $momentum_buffer^)? `lr` `=` $lr (`momentum` `=` $momentum^)? "
        "(`weight_decay` `=` $weight_decay^)? (`nesterov` $nesterov^)? attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        param: SSAValue,
        grad: SSAValue,
        momentum_buffer: SSAValue | None,
        lr: float,
        momentum: float = DEFAULTS["momentum"],
        weight_decay: float = DEFAULTS["weight_decay"],
        nesterov: bool = False,
    ):
        has_buf = momentum_buffer is not None
        super().__init__(
            operands=[param, grad, [momentum_buffer] if momentum_buffer is not None else []],
            result_types=[param.type, [param.type] if has_buf else []],
            properties={
                "lr": _f64(lr),
                "momentum": _f64(momentum),
                "weight_decay": _f64(weight_decay),
                "nesterov": UnitAttr() if nesterov else None,
            },
        )

    def verify_(self) -> None:
        require_float(self.name, "param", ranked(self.name, "param", self.param))
        _check_hyperparameters(self, ("lr", "momentum", "weight_decay"))
        has_buf = self.momentum_buffer is not None
        if (self.momentum.value.data != 0.0) != has_buf:
            raise VerifyException(
                f"{self.name}: a momentum buffer operand is needed exactly when momentum != 0 "
                f"(momentum = {self.momentum.value.data})"
            )
        if self.nesterov is not None and not has_buf:
            raise VerifyException(f"{self.name}: nesterov needs momentum")
        if (self.new_momentum_buffer is not None) != has_buf:
            raise VerifyException(
                f"{self.name}: {int(has_buf)} momentum buffer operand(s) but "
                f"{int(self.new_momentum_buffer is not None)} new momentum buffer result(s); "
                "the updated buffer must be returned exactly when one is passed"
            )
