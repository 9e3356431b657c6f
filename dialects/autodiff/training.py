"""The rest of a training loop in SSA form: schedules, clipping, gradient accumulation.

Every op here computes on the device what a PyTorch loop computes on the host
between `loss.backward()` and `optimizer.step()`, so a captured graph needs no
host-fed value (docs/design.md#schedules-in-the-graph):

- `autodiff.lr_schedule`: each param group's learning rate after `last_epoch`
  optimizer steps (torch.optim.lr_scheduler's closed forms, dialects/schedule_table.py),
  and the counter advanced when the step applies its update;
- `autodiff.clip_grad_norm`: the global 2-norm of the gradients and the coefficient
  that torch.nn.utils.clip_grad_norm_ multiplies them with;
- `autodiff.accumulation_step` and `autodiff.accumulate_grad`: k micro-batches per
  update, counted on the device (docs/design.md#gradient-accumulation-over-micro-batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f32,
    f64,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.autodiff.optimizers import constant_scalar, verify_scalar
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import ACCUMULATE_PAIR, OUT0_IN0, OpFlag, OpInfo
from aicfc.dialects.schedule_table import segment_error
from aicfc.dialects.tensors import numel, ranked, require_float, shape_of, tensor

F = OpFlag
_NOT_DIFFERENTIATED = "a step of the optimizer's bookkeeping is not differentiated"


def _counter(op_name: str, what: str, value: SSAValue) -> None:
    t = ranked(op_name, what, value)
    if t != tensor((), i64):
        raise VerifyException(f"{op_name}: {what} must be a scalar tensor<i64>, got {t}")


@irdl_op_definition
class LrScheduleOp(AicfcOp):
    """Learning rates of a schedule after `last_epoch` optimizer steps (PyTorch's schedulers).

    lr[g] = schedule(initial_lr[g], last_epoch) for each param group g, with the
    schedule's closed form (dialects/schedule_table.py: `kinds`, `milestones`,
    `coefficients`; the segments of a SequentialLR, each restarted at its milestone);
    new_last_epoch = last_epoch + 1 where apply != 0, else last_epoch (torch's
    `scheduler.last_epoch`, which `scheduler.step()` advances once per update).
    Evaluated in float64. The learning rates are those of the current update, as
    torch's `param_groups[g]["lr"]` before `optimizer.step()`.

    ```mlir
    %e1, %lr = autodiff.lr_schedule %e, %apply, %lr0 kinds = "linear,cosine"
        milestones = [10] coefficients = [0.1, 1.0, 10.0, 0.0, 90.0, 0.0, 0.0, 0.0]
        : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
    ```
    """

    name = "autodiff.lr_schedule"
    FLOPS_PER_ELEMENT: ClassVar[int] = 8
    E: ClassVar = VarConstraint("E", base(TensorType))
    H: ClassVar = VarConstraint("H", base(TensorType))
    last_epoch = operand_def(E)
    apply = operand_def(base(TensorType))
    initial_lr = var_operand_def(H)
    new_last_epoch = result_def(E)
    lr = var_result_def(H)
    kinds = prop_def(StringAttr)
    milestones = prop_def(DenseArrayBase.constr(i64))
    coefficients = prop_def(DenseArrayBase.constr(f64))
    traits = traits_def(
        Pure(), OpInfo(F.IS_OPTIMIZER, OUT0_IN0, differentiable=False, why_not=_NOT_DIFFERENTIATED)
    )
    assembly_format = (
        "$last_epoch `,` $apply `,` $initial_lr `kinds` `=` $kinds `milestones` `=` $milestones "
        "`coefficients` `=` $coefficients attr-dict `:` type($last_epoch) `,` type($apply) `,` "
        "type($initial_lr) `->` type($lr)"
    )

    def __init__(
        self,
        last_epoch: SSAValue,
        apply: SSAValue,
        initial_lr: Sequence[SSAValue],
        kinds: str,
        milestones: Sequence[int],
        coefficients: Sequence[float],
    ):
        super().__init__(
            operands=[last_epoch, apply, list(initial_lr)],
            result_types=[last_epoch.type, [v.type for v in initial_lr]],
            properties={
                "kinds": StringAttr(kinds),
                "milestones": DenseArrayBase.from_list(i64, [int(m) for m in milestones]),
                "coefficients": DenseArrayBase.from_list(f64, [float(c) for c in coefficients]),
            },
        )

    def schedule(self) -> tuple[str, tuple[int, ...], tuple[float, ...]]:
        """(kinds, milestones, coefficients) as Python values."""
        return (
            self.kinds.data,
            tuple(int(m) for m in self.milestones.get_values()),
            tuple(float(c) for c in self.coefficients.get_values()),
        )

    def verify_(self) -> None:
        _counter(self.name, "last_epoch", self.last_epoch)
        verify_scalar(self.name, "apply", self.apply)
        if not self.initial_lr:
            raise VerifyException(f"{self.name}: needs at least one initial_lr (a param group)")
        for i, v in enumerate(self.initial_lr):
            verify_scalar(self.name, f"initial_lr #{i}", v)
        if len(self.lr) != len(self.initial_lr):
            raise VerifyException(
                f"{self.name}: {len(self.initial_lr)} initial_lr operands but {len(self.lr)} "
                "lr results; one learning rate per param group"
            )
        why = segment_error(*self.schedule())
        if why:
            raise VerifyException(f"{self.name}: {why}")


@irdl_op_definition
class ClipGradNormOp(AicfcOp):
    """The global 2-norm of the gradients and the clipping coefficient (clip_grad_norm_).

    total_norm = sqrt(sum over every gradient of its squared elements), accumulated in
    float64 and rounded once to the gradients' dtype; clip_coef = min(1, max_norm /
    (total_norm + 1e-6)) in that dtype. torch.nn.utils.clip_grad_norm_ (norm_type 2)
    returns total_norm and multiplies the gradients by clip_coef; here the optimizer
    reads the gradients scaled by it (its `grad_scale` operand), so they are never
    rewritten. A non-finite gradient gives a non-finite total_norm.

    ```mlir
    %norm, %coef = autodiff.clip_grad_norm %g0, %g1 max_norm = 1.000000e+00
        : tensor<16x8xf32>, tensor<16xf32> -> tensor<f32>
    ```
    """

    name = "autodiff.clip_grad_norm"
    DISPLAY_NAME: ClassVar[str] = "clip_grad_norm_"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    EPS: ClassVar[float] = 1e-6
    """Added to the norm before dividing (torch.nn.utils.clip_grad_norm_'s 1e-6)."""
    S: ClassVar = VarConstraint("S", base(TensorType))
    grads = var_operand_def(base(TensorType))
    total_norm = result_def(S)
    clip_coef = result_def(S)
    max_norm = prop_def(FloatAttr[Float64Type])
    traits = traits_def(
        Pure(),
        OpInfo(F.IS_OPTIMIZER | F.IS_REDUCTION, differentiable=False, why_not=_NOT_DIFFERENTIATED),
    )
    assembly_format = (
        "$grads `max_norm` `=` $max_norm attr-dict `:` type($grads) `->` type($total_norm)"
    )

    def __init__(self, grads: Sequence[SSAValue], max_norm: float):
        if not grads:
            raise ValueError("ClipGradNormOp needs at least one gradient")
        t = grads[0].type
        assert isinstance(t, TensorType)
        scalar: Attribute = TensorType(t.element_type, [])
        super().__init__(
            operands=[list(grads)],
            result_types=[scalar, scalar],
            properties={"max_norm": FloatAttr(float(max_norm), Float64Type())},
        )

    def flops(self) -> int:
        return sum(2 * numel(shape_of(g.type)) for g in self.grads)

    def verify_(self) -> None:
        if not self.grads:
            raise VerifyException(f"{self.name}: needs at least one gradient")
        first = ranked(self.name, "gradient #0", self.grads[0])
        require_float(self.name, "gradient #0", first)
        for i, g in enumerate(self.grads):
            t = ranked(self.name, f"gradient #{i}", g)
            if t.element_type != first.element_type:
                raise VerifyException(
                    f"{self.name}: every gradient must have one dtype, got {first.element_type} "
                    f"(gradient #0) and {t.element_type} (gradient #{i})"
                )
        expected = TensorType(first.element_type, [])
        if self.total_norm.type != expected:
            raise VerifyException(
                f"{self.name}: total_norm and clip_coef must be {expected}, got "
                f"{self.total_norm.type}"
            )
        v = self.max_norm.value.data
        if not v > 0.0 or v == float("inf"):
            raise VerifyException(f"{self.name}: max_norm must be positive and finite, got {v}")


@irdl_op_definition
class AccumulationStepOp(AicfcOp):
    """Counts micro-batches of gradient accumulation: the update applies on every k-th.

    new_count = (count + 1) mod every; apply = 1 when this micro-batch ends a window of
    `every` (count + 1 == every), else 0, as a tensor<f32> (the `apply` operand of the
    optimizer steps and of autodiff.lr_schedule, and the `reset` of
    autodiff.accumulate_grad).

    ```mlir
    %c1, %apply = autodiff.accumulation_step %c every = 4 : tensor<i64> -> tensor<f32>
    ```
    """

    name = "autodiff.accumulation_step"
    E: ClassVar = VarConstraint("E", base(TensorType))
    count = operand_def(E)
    new_count = result_def(E)
    apply = result_def(base(TensorType))
    every = prop_def(IntegerAttr[I64])
    traits = traits_def(
        Pure(), OpInfo(F.IS_OPTIMIZER, OUT0_IN0, differentiable=False, why_not=_NOT_DIFFERENTIATED)
    )
    assembly_format = "$count `every` `=` $every attr-dict `:` type($count) `->` type($apply)"

    def __init__(self, count: SSAValue, every: int):
        super().__init__(
            operands=[count],
            result_types=[count.type, tensor((), f32)],
            properties={"every": IntegerAttr(int(every), i64)},
        )

    def verify_(self) -> None:
        _counter(self.name, "count", self.count)
        if self.apply.type != tensor((), f32):
            raise VerifyException(
                f"{self.name}: apply must be a tensor<f32>, got {self.apply.type}"
            )
        if self.every.value.data < 1:
            raise VerifyException(f"{self.name}: every must be >= 1, got {self.every.value.data}")


@irdl_op_definition
class AccumulateGradOp(AicfcOp):
    """One micro-batch's gradient into the accumulation buffer; the window's mean gradient.

    sum = accum + grad; mean = sum / every (the gradient of the mean loss over the
    window's micro-batches, which equals one batch `every` times as large);
    new_accum = 0 where reset != 0 (the window ends: the update reads `mean`), else sum.

    ```mlir
    %mean, %acc1 = autodiff.accumulate_grad %g, %acc, %reset every = 4
        : tensor<16x8xf32>, tensor<f32>
    ```
    """

    name = "autodiff.accumulate_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    accum = operand_def(T)
    reset = operand_def(base(TensorType))
    mean = result_def(T)
    new_accum = result_def(T)
    every = prop_def(IntegerAttr[I64])
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_OPTIMIZER | F.IS_ELEMENTWISE,
            ACCUMULATE_PAIR,
            differentiable=False,
            why_not=_NOT_DIFFERENTIATED,
        ),
    )
    assembly_format = (
        "$grad `,` $accum `,` $reset `every` `=` $every attr-dict `:` type($grad) `,` type($reset)"
    )

    def __init__(self, grad: SSAValue, accum: SSAValue, reset: SSAValue, every: int):
        super().__init__(
            operands=[grad, accum, reset],
            result_types=[grad.type, grad.type],
            properties={"every": IntegerAttr(int(every), i64)},
        )

    def verify_(self) -> None:
        t = ranked(self.name, "grad", self.grad)
        require_float(self.name, "grad", t)
        verify_scalar(self.name, "reset", self.reset)
        flag = constant_scalar(self.reset)
        if flag is not None and flag not in (0.0, 1.0):
            raise VerifyException(f"{self.name}: reset must be 0 or 1, got {flag}")
        if self.every.value.data < 1:
            raise VerifyException(f"{self.name}: every must be >= 1, got {self.every.value.data}")
