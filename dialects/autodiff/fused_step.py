"""autodiff.mlp_train_step: a whole MLP train step as one op (forward, loss, backward, Adam).

aicfc-fuse-train-step forms it from the ops of a train step after expansion (the
gemm_epilogue chain, cross_entropy_with_grad, the dW products, the gemm_epilogue_grad
chain and one adam_step per parameter) where a kernel of the target's family runs it
and wins (docs/design.md#fused-mlp-train-step). The composite stays visible: the op
names every layer's parameters and states and each layer's activation, and its NumPy
reference (runtime/reference.py mlp_train_step) runs the ops it replaced, in order.

Operand layout (`HEAD` then the layers): x [M, K0], labels [M] (i32/i64), dloss [],
lr, beta1, beta2, eps, weight_decay (0-d, f64 in the steps aicfc builds), grad_scale,
apply (0-d f32); then per layer: weight [N, K], weight.exp_avg, weight.exp_avg_sq,
weight.step, and where `bias` says so bias [N], bias.exp_avg, bias.exp_avg_sq,
bias.step. Results: the loss [], then per layer the next value of each of its
parameter and state operands, in operand order (`LAYER_FIELDS`), which the alias
policy `train_step_state` lets aicfc-fold-inplace write in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, StringAttr, TensorType, UnitAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.activation_table import FACTS
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import TRAIN_STEP_STATE, OpFlag, OpInfo
from aicfc.dialects.tensors import numel, shape_of

HEAD: tuple[str, ...] = ("x", "labels", "dloss", "lr", "beta1", "beta2", "eps", "weight_decay")
HEAD += ("grad_scale", "apply")
"""The operands before the layers'."""

LAYER_FIELDS = ("weight", "weight.exp_avg", "weight.exp_avg_sq", "weight.step")
BIAS_FIELDS = ("bias", "bias.exp_avg", "bias.exp_avg_sq", "bias.step")


def layer_widths(bias: Sequence[bool]) -> list[int]:
    """Operands (and results) of each layer: 8 with a bias, 4 without."""
    return [len(LAYER_FIELDS) + (len(BIAS_FIELDS) if b else 0) for b in bias]


@irdl_op_definition
class MlpTrainStepOp(AicfcOp):
    """One train step of an MLP: Linear layers (h = act(h W^T + b)), softmax cross-entropy
    of the last layer's logits (mean over the batch, times dloss), its backward and one
    Adam (AdamW where `decoupled_weight_decay`) update of every weight and bias, with
    PyTorch's semantics (autodiff.adam_step's; hyperparameters read at every execution).

    acts: each layer's activation, comma-separated ("relu,relu,none"); the last is none.
    bias: 1 where a layer has a bias, else 0.

    ```mlir
    %loss, %w1, %m1, %v1, %s1 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps,
        %wd, %one, %one, %w, %m, %v, %s acts = "none" bias = [0]
        : (tensor<4x6xf32>, tensor<4xi32>, ...) -> (tensor<f32>, tensor<3x6xf32>, ...)
    ```
    """

    name = "autodiff.mlp_train_step"
    DISPLAY_NAME: ClassVar[str] = "MLPTrainStep"
    FLOPS_PER_ELEMENT: ClassVar[int] = 12
    """Adam's per parameter element (autodiff.adam_step's)."""
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    acts = prop_def(StringAttr)
    bias = prop_def(DenseArrayBase.constr(i64))
    decoupled_weight_decay = opt_prop_def(UnitAttr)
    traits = traits_def(
        Pure(),
        OpInfo(
            OpFlag.IS_OPTIMIZER | OpFlag.HAS_PARAM,
            TRAIN_STEP_STATE,
            differentiable=False,
            why_not="a whole train step (its own backward and update) is not differentiated",
        ),
    )
    assembly_format = (
        "$inputs `acts` `=` $acts `bias` `=` $bias (`decoupled` $decoupled_weight_decay^)? "
        "attr-dict `:` functional-type($inputs, $outputs)"
    )

    def __init__(
        self,
        head: Sequence[SSAValue],
        layers: Sequence[Sequence[SSAValue]],
        acts: Sequence[str],
        decoupled_weight_decay: bool = False,
    ):
        """head: the HEAD operands; layers: each layer's 4 or 8 operands (LAYER_FIELDS,
        then BIAS_FIELDS where it has a bias)."""
        flat = [*head, *(v for layer in layers for v in layer)]
        loss_type: Attribute = TensorType(head[0].type.element_type, [])  # type: ignore[attr-defined]
        super().__init__(
            operands=[flat],
            result_types=[[loss_type, *(v.type for layer in layers for v in layer)]],
            properties={
                "acts": StringAttr(",".join(acts)),
                "bias": DenseArrayBase.from_list(i64, [int(len(layer) == 8) for layer in layers]),
                "decoupled_weight_decay": UnitAttr() if decoupled_weight_decay else None,
            },
        )

    @property
    def activations(self) -> tuple[str, ...]:
        return tuple(self.acts.data.split(","))

    @property
    def has_bias(self) -> tuple[bool, ...]:
        return tuple(bool(b) for b in self.bias.get_values())

    def layer_operands(self) -> list[tuple[SSAValue, ...]]:
        """Each layer's operands (4 or 8, see LAYER_FIELDS / BIAS_FIELDS)."""
        out, at = [], len(HEAD)
        for n in layer_widths(self.has_bias):
            out.append(tuple(self.inputs[at : at + n]))
            at += n
        return out

    def flops(self) -> int:
        """2 M K N per layer forward, 2 M K N for dW and (above the first) for dX, and
        Adam's 12 per parameter element."""
        m = shape_of(self.inputs[0].type)[0]
        total = 0
        for i, layer in enumerate(self.layer_operands()):
            n, k = shape_of(layer[0].type)
            total += 2 * m * n * k * (3 if i else 2)
            total += self.FLOPS_PER_ELEMENT * sum(numel(shape_of(v.type)) for v in layer[::4])
        return total

    def verify_(self) -> None:
        acts, bias = self.activations, self.has_bias
        where = self.name
        if not acts or len(acts) != len(bias):
            raise VerifyException(
                f"{where}: acts ({len(acts)} layers) and bias ({len(bias)}) must name the same "
                "layers, at least one"
            )
        for a in acts:
            if a != "none" and a not in FACTS:
                raise VerifyException(f"{where}: unknown activation {a!r} in acts")
        if acts[-1] != "none":
            raise VerifyException(f"{where}: the last layer gives logits: its act must be none")
        want = len(HEAD) + sum(layer_widths(bias))
        if len(self.inputs) != want or len(self.outputs) != want - len(HEAD) + 1:
            raise VerifyException(
                f"{where}: {len(acts)} layers (bias {[int(b) for b in bias]}) take {want} "
                f"operands and give {want - len(HEAD) + 1} results, got {len(self.inputs)} "
                f"and {len(self.outputs)}"
            )
        x = shape_of(self.inputs[0].type)
        if len(x) != 2:
            raise VerifyException(f"{where}: x must be a matrix [M, K], got {list(x)}")
        k = x[1]
        for i, layer in enumerate(self.layer_operands()):
            w = shape_of(layer[0].type)
            if len(w) != 2 or w[1] != k:
                raise VerifyException(
                    f"{where}: layer {i} weight must be [N, {k}] (its input width), got {list(w)}"
                )
            if bias[i] and shape_of(layer[4].type) != (w[0],):
                raise VerifyException(f"{where}: layer {i} bias must be [{w[0]}]")
            k = w[0]
        for j, (v, r) in enumerate(zip(self.inputs[len(HEAD) :], self.outputs[1:], strict=True)):
            if v.type != r.type:
                raise VerifyException(
                    f"{where}: result #{j + 1} must have the type of operand "
                    f"#{j + len(HEAD)} ({v.type}), got {r.type}"
                )
