"""Dynamic loss scaling on the device: unscale_grad, amp_select, update_scale.

torch.amp.GradScaler's semantics, as ops of the step (`aicfc-loss-scale` inserts them):
the backward is seeded with the scale, each gradient is unscaled with a found-inf flag
(`torch._amp_foreach_non_finite_check_and_unscale_`), every param and state keeps its old
value on an overflowing step (GradScaler.step skips optimizer.step) and the scale is
updated (`torch._amp_update_scale_`). The scale, its growth tracker and the flags are
scalar f32 tensors, so a replayed CUDA graph needs no host sync.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from xdsl.dialects.builtin import I64, Float64Type, FloatAttr, IntegerAttr, TensorType, f32, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.tensors import ranked, require_float, tensor

F = OpFlag
_SCALAR = tensor((), f32)
_WHY = "loss scaling acts on gradients and updates, after the backward"


@irdl_op_definition
class UnscaleGradOp(AicfcOp):
    """(g * (1 / scale), found_inf): the gradient of the scaled loss unscaled, and 1.0 if
    any element of g is inf or NaN, else 0.0 (torch's
    `_amp_foreach_non_finite_check_and_unscale_`, which multiplies by the f32 reciprocal).

    ```mlir
    %gu, %inf = autodiff.unscale_grad %g, %scale : tensor<16x8xf32>
    ```
    """

    name = "autodiff.unscale_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    scale = operand_def(_SCALAR)
    result = result_def(T)
    found_inf = result_def(_SCALAR)
    traits = traits_def(
        Pure(), OpInfo(F.IS_ELEMENTWISE | F.IS_REDUCTION, differentiable=False, why_not=_WHY)
    )
    assembly_format = "$grad `,` $scale attr-dict `:` type($grad)"

    def __init__(self, grad: SSAValue, scale: SSAValue):
        super().__init__(operands=[grad, scale], result_types=[grad.type, _SCALAR])

    def verify_(self) -> None:
        require_float(self.name, "grad", ranked(self.name, "grad", self.grad))


@irdl_op_definition
class AmpSelectOp(AicfcOp):
    """previous if found_inf != 0 else updated: a param or state of an overflowing step
    keeps its value (GradScaler.step skips the optimizer step).

    ```mlir
    %w2 = autodiff.amp_select %inf, %w1, %w : tensor<16x8xf32>
    ```
    """

    name = "autodiff.amp_select"
    T: ClassVar = VarConstraint("T", base(TensorType))
    found_inf = operand_def(_SCALAR)
    updated = operand_def(T)
    previous = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), OpInfo(F.IS_OPTIMIZER, differentiable=False, why_not=_WHY))
    assembly_format = "$found_inf `,` $updated `,` $previous attr-dict `:` type($updated)"

    def __init__(self, found_inf: SSAValue, updated: SSAValue, previous: SSAValue):
        super().__init__(operands=[found_inf, updated, previous], result_types=[updated.type])

    def verify_(self) -> None:
        ranked(self.name, "updated", self.updated)


@irdl_op_definition
class UpdateScaleOp(AicfcOp):
    """The next (scale, growth_tracker) of dynamic loss scaling (torch's
    `_amp_update_scale_`): on found_inf != 0, scale * backoff_factor and tracker 0; else
    tracker + 1, and when that reaches growth_interval, scale * growth_factor and tracker 0.

    ```mlir
    %s1, %t1 = autodiff.update_scale %s, %t, %inf growth_interval = 2000
    ```
    """

    name = "autodiff.update_scale"
    DEFAULTS: ClassVar[Mapping[str, float]] = MappingProxyType(
        {
            "init_scale": 65536.0,
            "growth_factor": 2.0,
            "backoff_factor": 0.5,
            "growth_interval": 2000,
        }
    )
    """torch.amp.GradScaler's defaults (init_scale is the scale state's first value)."""
    scale = operand_def(_SCALAR)
    growth_tracker = operand_def(_SCALAR)
    found_inf = operand_def(_SCALAR)
    new_scale = result_def(_SCALAR)
    new_growth_tracker = result_def(_SCALAR)
    growth_factor = prop_def(
        FloatAttr[Float64Type], default_value=FloatAttr(DEFAULTS["growth_factor"], Float64Type())
    )
    backoff_factor = prop_def(
        FloatAttr[Float64Type], default_value=FloatAttr(DEFAULTS["backoff_factor"], Float64Type())
    )
    growth_interval = prop_def(
        IntegerAttr[I64], default_value=IntegerAttr(int(DEFAULTS["growth_interval"]), i64)
    )
    traits = traits_def(Pure(), OpInfo(F.IS_OPTIMIZER, differentiable=False, why_not=_WHY))
    assembly_format = (
        "$scale `,` $growth_tracker `,` $found_inf (`growth_factor` `=` $growth_factor^)? "
        "(`backoff_factor` `=` $backoff_factor^)? (`growth_interval` `=` $growth_interval^)? "
        "attr-dict"
    )

    def __init__(self, scale: SSAValue, growth_tracker: SSAValue, found_inf: SSAValue):
        super().__init__(
            operands=[scale, growth_tracker, found_inf], result_types=[_SCALAR, _SCALAR]
        )

    def verify_(self) -> None:
        g, b = self.growth_factor.value.data, self.backoff_factor.value.data
        if not (math.isfinite(g) and g > 1.0):
            raise VerifyException(f"{self.name}: growth_factor must be finite and > 1, got {g}")
        if not 0.0 < b < 1.0:
            raise VerifyException(f"{self.name}: backoff_factor must be in (0, 1), got {b}")
        if self.growth_interval.value.data < 1:
            raise VerifyException(
                f"{self.name}: growth_interval must be >= 1, got {self.growth_interval.value.data}"
            )


__all__ = ["AmpSelectOp", "UnscaleGradOp", "UpdateScaleOp"]
