"""The autodiff dialect: reverse-mode differentiation and optimizer steps.

`autodiff.backward` marks where gradients are wanted; `aicfc-expand-backward`
replaces it by graph ops and the backward primitives below (docs/design.md#composite-backward,
docs/design.md#gradient-accumulation). Optimizer updates are SSA functions
(`param, grad, m, v, step -> param', m', v', step'`); their alias policies let
`aicfc-fold-inplace` turn them into in-place updates where that is safe.

```mlir
%g:2 = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<16x8xf32>, tensor<16xf32>)
         -> (tensor<16x8xf32>, tensor<16xf32>)
%w1, %m1, %v1, %s1 = autodiff.adam_step %w, %g#0, %m, %v, %s lr = 1.000000e-03
         : tensor<16x8xf32>, tensor<f32>
```
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
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
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import ADAM_TRIPLET, OUT0_IN0, SGD_PAIR, OpFlag, OpInfo
from aicfc.dialects.graph import Activation, ActivationAttr
from aicfc.dialects.tensors import (
    axis_in_range,
    fmt_shape,
    is_int,
    numel,
    ranked,
    require_float,
    require_nonempty,
    require_result,
    tensor,
    verify_rng_offset,
)

F = OpFlag
NOT_SECOND_ORDER = "second-order differentiation is not supported"


def _f64(x: float) -> FloatAttr[Float64Type]:
    return FloatAttr(x, Float64Type())


# ----------------------------------------------------------------------------
# autodiff.backward
# ----------------------------------------------------------------------------


@irdl_op_definition
class BackwardOp(AicfcOp):
    """Gradients of a scalar `loss` with respect to each value in `wrt`.

    The optional `seed` is d(output)/d(loss) (default 1). Result i has the type
    of wrt[i]. Replaced by `aicfc-expand-backward`; no backend executes it.

    ```mlir
    %g:2 = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<4x3xf32>,
             tensor<4xf32>) -> (tensor<4x3xf32>, tensor<4xf32>)
    ```
    """

    name = "autodiff.backward"
    L: ClassVar = VarConstraint("L", base(TensorType))
    loss = operand_def(L)
    wrt = var_operand_def(TensorType)
    seed = opt_operand_def(L)
    grads = var_result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        Pure(), OpInfo(F.IS_BACKWARD, differentiable=False, why_not=NOT_SECOND_ORDER)
    )
    assembly_format = (
        "$loss `wrt` $wrt (`seed` $seed^)? attr-dict `:` type($loss) `,` `(` type($wrt) `)` "
        "`->` `(` type($grads) `)`"
    )

    def __init__(self, loss: SSAValue, wrt: list[SSAValue], seed: SSAValue | None = None):
        super().__init__(
            operands=[loss, wrt, [seed] if seed is not None else []],
            result_types=[[v.type for v in wrt]],
        )

    def verify_(self) -> None:
        loss = ranked(self.name, "loss", self.loss)
        require_float(self.name, "loss", loss)
        if numel(loss.get_shape()) != 1:
            raise VerifyException(
                f"{self.name}: loss must have one element, got shape {fmt_shape(loss.get_shape())}"
            )
        # seed and loss share the constraint variable L, so their types already match.
        if len(self.grads) != len(self.wrt):
            raise VerifyException(
                f"{self.name}: {len(self.wrt)} values in wrt but {len(self.grads)} results"
            )
        for i, (v, g) in enumerate(zip(self.wrt, self.grads, strict=True)):
            t = ranked(self.name, f"wrt #{i}", v)
            require_float(self.name, f"wrt #{i}", t)
            if g.type != t:
                raise VerifyException(
                    f"{self.name}: result #{i} has type {g.type}, expected {t} "
                    f"(the type of wrt #{i})"
                )


# ----------------------------------------------------------------------------
# Backward primitives
# ----------------------------------------------------------------------------


class ActivationGradOp(AicfcOp):
    """`%dx = autodiff.<act>_grad %dy, %saved : tensor<...>`: dx = dy * act'(.)."""

    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    saved = operand_def(T)
    result = result_def(T)
    assembly_format = "$grad `,` $saved attr-dict `:` type($result)"

    def __init__(self, grad: SSAValue, saved: SSAValue):
        super().__init__(operands=[grad, saved], result_types=[grad.type])

    def verify_(self) -> None:
        require_float(self.name, "grad", ranked(self.name, "grad", self.grad))


_ACT_GRAD = F.IS_BACKWARD | F.IS_ELEMENTWISE | F.IS_ACTIVATION_GRAD


@irdl_op_definition
class ReluGradOp(ActivationGradOp):
    """dx = dy * (y > 0), with y the relu's output (docs/design.md#composite-backward).

    ```mlir
    %dx = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
    ```
    """

    name = "autodiff.relu_grad"
    traits = traits_def(Pure(), OpInfo(_ACT_GRAD | F.COLLAPSES_INFO, OUT0_IN0))


@irdl_op_definition
class GeluGradOp(ActivationGradOp):
    """dx = dy * (Phi(x) + x * phi(x)), with x the gelu's input (exact erf form).

    ```mlir
    %dx = autodiff.gelu_grad %dy, %x : tensor<8x16xf32>
    ```
    """

    name = "autodiff.gelu_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 8
    traits = traits_def(
        Pure(),
        OpInfo(
            _ACT_GRAD,
            OUT0_IN0,
            differentiable=False,
            why_not="its VJP needs gelu''(x) = phi(x) (2 - x^2), which no op computes",
        ),
    )


@irdl_op_definition
class TanhGradOp(ActivationGradOp):
    """dx = dy * (1 - y^2), with y the tanh's output.

    ```mlir
    %dx = autodiff.tanh_grad %dy, %y : tensor<8x16xf32>
    ```
    """

    name = "autodiff.tanh_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    traits = traits_def(Pure(), OpInfo(_ACT_GRAD, OUT0_IN0))


@irdl_op_definition
class SoftmaxGradOp(AicfcOp):
    """dx = y * (dy - sum(dy * y, axis)), with y the softmax's output.

    ```mlir
    %dx = autodiff.softmax_grad %dy, %y axis = 1 : tensor<8x10xf32>
    ```
    """

    name = "autodiff.softmax_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    output = operand_def(T)
    result = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_REDUCTION, OUT0_IN0))
    assembly_format = "$grad `,` $output `axis` `=` $axis attr-dict `:` type($result)"

    def __init__(self, grad: SSAValue, output: SSAValue, axis: int):
        super().__init__(
            operands=[grad, output],
            result_types=[grad.type],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        t = ranked(self.name, "grad", self.grad)
        require_float(self.name, "grad", t)
        axis_in_range(self.name, self.axis.value.data, len(t.get_shape()))


def _require_scalar_grad(op_name: str, grad: SSAValue, like: TensorType[Attribute]) -> None:
    """The incoming loss gradient: a scalar of the loss's element type."""
    g = ranked(op_name, "grad", grad)
    if g != tensor((), like.element_type):
        raise VerifyException(f"{op_name}: grad must be tensor<{like.element_type}>, got {g}")


def _verify_cross_entropy_operands(
    op_name: str, logits: SSAValue, labels: SSAValue, grad: SSAValue
) -> TensorType[Attribute]:
    """Float logits [N, C] (N * C > 0), i32/i64 labels [N], scalar grad; returns the logits type."""
    x = ranked(op_name, "logits", logits)
    y = ranked(op_name, "labels", labels)
    require_float(op_name, "logits", x)
    if len(x.get_shape()) != 2 or not is_int(y.element_type):
        raise VerifyException(
            f"{op_name}: expected logits [N, C] and i32/i64 labels [N], got {x} and {y}"
        )
    require_nonempty(op_name, "logits", x)
    if tuple(y.get_shape()) != (x.get_shape()[0],):
        raise VerifyException(
            f"{op_name}: labels must have shape [{x.get_shape()[0]}], got "
            f"{fmt_shape(y.get_shape())}"
        )
    _require_scalar_grad(op_name, grad, x)
    return x


@irdl_op_definition
class CrossEntropyGradOp(AicfcOp):
    """dlogits = (softmax(logits) - onehot(labels)) * dloss / N.

    ```mlir
    %dx = autodiff.cross_entropy_grad %x, %y, %dl
            : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
    ```
    """

    name = "autodiff.cross_entropy_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 5
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.TAKES_CLASS_LABELS))
    assembly_format = (
        "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)"
    )

    def __init__(self, logits: SSAValue, labels: SSAValue, grad: SSAValue):
        super().__init__(operands=[logits, labels, grad], result_types=[logits.type])

    def verify_(self) -> None:
        x = _verify_cross_entropy_operands(self.name, self.logits, self.labels, self.grad)
        require_result(self.name, self.result.type, x)


@irdl_op_definition
class CrossEntropyWithGradOp(AicfcOp):
    """The cross-entropy loss, its gradient and the bias gradient before it, in one op.

    loss = mean_n(logsumexp(x_n) - x_n[y_n]) (graph.cross_entropy);
    grad_logits = (softmax(x) - onehot(y)) * grad / N (autodiff.cross_entropy_grad);
    grad_bias, when present, = sum over rows of grad_logits (the bias gradient of
    the layer whose output the logits are: a reduce_sum over axis 0). aicfc-fuse
    builds it from those ops after aicfc-expand-backward, so one kernel reads the
    logits once for all of them (TensorFlow's SparseSoftmaxCrossEntropyWithLogits
    likewise returns the loss with its backprop). It has no VJP: its gradient is
    one of its results.

    ```mlir
    %l, %dx, %db = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>,
                     tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<10xf32>)
    ```
    """

    name = "autodiff.cross_entropy_with_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 10
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    grad = operand_def(TensorType)
    loss = result_def(TensorType)
    grad_logits = result_def(TensorType)
    grad_bias = opt_result_def(TensorType)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_LOSS | F.IS_BACKWARD | F.IS_FUSED | F.IS_REDUCTION | F.TAKES_CLASS_LABELS,
            differentiable=False,
            why_not="it is made after differentiation; its gradient is one of its results",
        ),
    )
    assembly_format = (
        "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self, logits: SSAValue, labels: SSAValue, grad: SSAValue, with_grad_bias: bool = False
    ):
        t = ranked(self.name, "logits", logits)
        c = t.get_shape()[-1]
        super().__init__(
            operands=[logits, labels, grad],
            result_types=[
                tensor((), t.element_type),
                t,
                [tensor((c,), t.element_type)] if with_grad_bias else [],
            ],
        )

    def verify_(self) -> None:
        x = _verify_cross_entropy_operands(self.name, self.logits, self.labels, self.grad)
        require_result(self.name, self.loss.type, tensor((), x.element_type))
        require_result(self.name, self.grad_logits.type, x)
        if self.grad_bias is not None:
            c = x.get_shape()[1]
            require_result(self.name, self.grad_bias.type, tensor((c,), x.element_type))


@irdl_op_definition
class MseLossGradOp(AicfcOp):
    """dpred = 2 * (pred - target) * dloss / numel(pred).

    ```mlir
    %dp = autodiff.mse_loss_grad %p, %t, %dl : (tensor<8x4xf32>, tensor<8x4xf32>,
            tensor<f32>) -> tensor<8x4xf32>
    ```
    """

    name = "autodiff.mse_loss_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    pred = operand_def(TensorType)
    target = operand_def(TensorType)
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_ELEMENTWISE))
    assembly_format = "$pred `,` $target `,` $grad attr-dict `:` functional-type(operands, results)"

    def __init__(self, pred: SSAValue, target: SSAValue, grad: SSAValue):
        super().__init__(operands=[pred, target, grad], result_types=[pred.type])

    def verify_(self) -> None:
        p = ranked(self.name, "pred", self.pred)
        t = ranked(self.name, "target", self.target)
        require_float(self.name, "pred", p)
        if p != t:
            raise VerifyException(f"{self.name}: pred {p} and target {t} must have one type")
        require_nonempty(self.name, "pred", p)
        _require_scalar_grad(self.name, self.grad, p)
        require_result(self.name, self.result.type, p)


@irdl_op_definition
class DropoutGradOp(AicfcOp):
    """dx = dy * mask / (1 - p), recomputing the forward's Philox mask from (seed, offset).

    ```mlir
    %dx = autodiff.dropout_grad %dy, %offset p = 0.1 seed = 7 : tensor<8x16xf32>, tensor<i64>
    ```
    """

    name = "autodiff.dropout_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 2
    T: ClassVar = VarConstraint("T", base(TensorType))
    grad = operand_def(T)
    offset = operand_def(TensorType)
    result = result_def(T)
    p = prop_def(FloatAttr[Float64Type])
    seed = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure(), OpInfo(F.IS_BACKWARD | F.IS_ELEMENTWISE, OUT0_IN0))
    assembly_format = (
        "$grad `,` $offset `p` `=` $p `seed` `=` $seed attr-dict `:` type($grad) `,` type($offset)"
    )

    def __init__(self, grad: SSAValue, offset: SSAValue, p: float, seed: int):
        super().__init__(
            operands=[grad, offset],
            result_types=[grad.type],
            properties={"p": _f64(p), "seed": IntegerAttr(seed, i64)},
        )

    def verify_(self) -> None:
        require_float(self.name, "grad", ranked(self.name, "grad", self.grad))
        verify_rng_offset(self.name, self.offset)
        p = self.p.value.data
        if not 0.0 <= p < 1.0:
            raise VerifyException(f"{self.name}: p must be in [0, 1), got {p}")


@irdl_op_definition
class EpilogueGradOp(AicfcOp):
    """The backward of a GEMM epilogue: dZ = dY * act'(saved), dbias = sum over rows of dZ.

    `saved` is the forward output Y for relu (relu'(z) = y > 0) and the
    pre-activation Z for gelu. dZ keeps the forward output's layout and the bias
    gradient reduces dZ itself, never a transpose (docs/design.md#composite-backward).

    ```mlir
    %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
                 : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
    ```
    """

    name = "autodiff.epilogue_grad"
    FLOPS_PER_ELEMENT: ClassVar[int] = 3
    grad = operand_def(TensorType)
    saved = operand_def(TensorType)
    grad_pre_act = result_def(TensorType)
    grad_bias = result_def(TensorType)
    act = prop_def(ActivationAttr)
    traits = traits_def(
        Pure(), OpInfo(F.IS_BACKWARD | F.IS_FUSED | F.IS_ACTIVATION_GRAD | F.IS_REDUCTION)
    )
    assembly_format = (
        "$grad `,` $saved `act` `=` $act attr-dict `:` functional-type(operands, results)"
    )

    def __init__(self, grad: SSAValue, saved: SSAValue, act: Activation):
        t = ranked(self.name, "grad", grad)
        n = t.get_shape()[-1]
        super().__init__(
            operands=[grad, saved],
            result_types=[t, tensor((n,), t.element_type)],
            properties={"act": ActivationAttr(act)},
        )

    def verify_(self) -> None:
        g = ranked(self.name, "grad", self.grad)
        s = ranked(self.name, "saved", self.saved)
        require_float(self.name, "grad", g)
        if len(g.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: grad must be rank 2 [M, N], got {fmt_shape(g.get_shape())}"
            )
        if g != s:
            raise VerifyException(f"{self.name}: grad {g} and saved {s} must have one type")
        if self.act.data == Activation.NONE:
            raise VerifyException(
                f"{self.name}: act must be relu or gelu (for none, dZ = dY: use graph.reduce_sum)"
            )
        require_result(self.name, self.grad_pre_act.type, g)
        require_result(self.name, self.grad_bias.type, tensor((g.get_shape()[1],), g.element_type))

    def why_not_differentiable(self) -> str | None:
        if self.act.data != Activation.RELU:  # as gelu_grad
            return (
                f"with act {self.act.data.value}, its second derivative needs gelu'' "
                "(no op computes it)"
            )
        return super().why_not_differentiable()


# ----------------------------------------------------------------------------
# Optimizer steps
# ----------------------------------------------------------------------------


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
    beta1 = prop_def(FloatAttr[Float64Type], default_value=_f64(0.9))
    beta2 = prop_def(FloatAttr[Float64Type], default_value=_f64(0.999))
    eps = prop_def(FloatAttr[Float64Type], default_value=_f64(1e-8))
    weight_decay = prop_def(FloatAttr[Float64Type], default_value=_f64(0.0))
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
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
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
    FLOPS_PER_ELEMENT: ClassVar[int] = 4
    T: ClassVar = VarConstraint("T", base(TensorType))
    param = operand_def(T)
    grad = operand_def(T)
    momentum_buffer = opt_operand_def(T)
    new_param = result_def(T)
    new_momentum_buffer = opt_result_def(T)
    lr = prop_def(FloatAttr[Float64Type])
    momentum = prop_def(FloatAttr[Float64Type], default_value=_f64(0.0))
    weight_decay = prop_def(FloatAttr[Float64Type], default_value=_f64(0.0))
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
        momentum: float = 0.0,
        weight_decay: float = 0.0,
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


Autodiff = Dialect(
    "autodiff",
    [
        BackwardOp,
        ReluGradOp,
        GeluGradOp,
        TanhGradOp,
        SoftmaxGradOp,
        CrossEntropyGradOp,
        CrossEntropyWithGradOp,
        MseLossGradOp,
        DropoutGradOp,
        EpilogueGradOp,
        AdamStepOp,
        SgdStepOp,
    ],
    [],
)
