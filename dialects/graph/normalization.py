"""Layer normalisation: graph.layer_norm and the fused graph.add_layer_norm.

Both normalise over the last dim D with torch.nn.functional.layer_norm's semantics
(Ba, Kiros and Hinton 2016, "Layer normalization"): biased variance, eps inside the
square root, an optional elementwise weight and bias. Their mean and reciprocal
standard deviation are results, so the backward (autodiff.layer_norm_grad) and a fused
kernel (kernels/layernorm.cu) need not recompute them:

    mean = sum(x) / D,  var = sum((x - mean)^2) / D,  rstd = 1 / sqrt(var + eps),
    y = (x - mean) * rstd * weight + bias

A bias needs a weight (torch.nn.LayerNorm has no bias-only form): with one optional
operand of each kind present or absent in that order, the operands and the reference's
positional arguments stay unambiguous.

```mlir
%y, %mean, %rstd = graph.layer_norm %x weight %w bias %b eps = 1.000000e-05
    : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>
    -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
```
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import Float64Type, FloatAttr, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.checks import verify_layer_norm
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp, statistics_used
from aicfc.dialects.tensors import numel, ranked, require_result, tensor
from aicfc.dialects.wide_results import out_dtype, result_element

F = OpFlag

DEFAULT_EPS = 1e-5
"""torch.nn.LayerNorm's eps."""

STATISTICS_NOT_DIFFERENTIABLE = (
    "its mean and rstd results are statistics saved for the backward; differentiating "
    "through them is not supported"
)
NARROWED_NOT_DIFFERENTIABLE = (
    "its y is stored in bf16/f16 over an f32 input (aicfc-fold-narrowing-casts, which runs "
    "after differentiation); differentiate the f32 layer norm and its cast instead"
)


class LayerNormBase(GraphOp):
    """The eps property, the FLOP count and the VJP guard of both layer norm ops."""

    eps = prop_def(FloatAttr[Float64Type])

    @property
    def eps_value(self) -> float:
        return float(self.eps.value.data)

    def flops(self) -> int:
        # mean (1), variance (3), normalise (2), then weight (1) and bias (1) per element
        x = ranked(self.name, "input", self.operands[0])
        extra = sum(v is not None for v in (self.weight, self.bias))  # type: ignore[attr-defined]
        return numel(x.get_shape()) * (6 + extra)

    def verify_normalized(self) -> TensorType[Attribute]:
        """Check the operands (checks.verify_layer_norm) and the results y [..., D], mean
        and rstd [...] (the last three of both ops; y in x's dtype, or bf16/f16 over an
        f32 x: a narrow result, dialects/wide_results.py); returns x's type."""
        t, stats = verify_layer_norm(
            self.name,
            self.input,  # type: ignore[attr-defined]
            self.weight,  # type: ignore[attr-defined]
            self.bias,  # type: ignore[attr-defined]
            self.eps_value,
        )
        y, mean, rstd = self.results[-3:]
        yt = tensor(t.get_shape(), result_element(self, len(self.results) - 3, t.element_type))
        require_result(self.name, y.type, yt)
        require_result(self.name, mean.type, stats)
        require_result(self.name, rstd.type, stats)
        return t

    def why_not_differentiable(self) -> str | None:
        if statistics_used((self.mean, self.rstd)):  # type: ignore[attr-defined]
            return STATISTICS_NOT_DIFFERENTIABLE
        if out_dtype(self) is not None:
            return NARROWED_NOT_DIFFERENTIABLE
        return super().why_not_differentiable()


@irdl_op_definition
class LayerNormOp(LayerNormBase):
    """y = (x - mean) * rstd * weight + bias over the last dim D (torch F.layer_norm).

    x [..., D] float; weight [D] and bias [D] optional (a bias only with a weight);
    results y [..., D] and the statistics mean [...] and rstd [...] = 1 / sqrt(var + eps)
    (biased variance), in x's dtype; over an f32 x, y may be bf16/f16 (a narrow result:
    float32 math, y rounded to nearest even as it is stored; aicfc-fold-narrowing-casts).

    ```mlir
    %y, %m, %r = graph.layer_norm %x weight %w eps = 1.000000e-05
        : tensor<8x16xf32>, tensor<16xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
    """

    name = "graph.layer_norm"
    DISPLAY_NAME: ClassVar[str] = "LayerNorm"
    input = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    mean = result_def(TensorType)
    rstd = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_NORMALIZATION | F.IS_REDUCTION | F.HAS_PARAM | F.COLLAPSES_INFO,
            narrow_results=(0,),
        ),
    )
    assembly_format = (
        "$input (`weight` $weight^)? (`bias` $bias^)? `eps` `=` $eps attr-dict `:` "
        "type($input) (`,` type($weight)^)? (`,` type($bias)^)? `->` `(` type(results) `)`"
    )

    def __init__(
        self,
        x: SSAValue,
        weight: SSAValue | None = None,
        bias: SSAValue | None = None,
        eps: float = DEFAULT_EPS,
    ):
        t = ranked(self.name, "input", x)
        stats = tensor(t.get_shape()[:-1], t.element_type)
        super().__init__(
            operands=[
                x,
                [weight] if weight is not None else [],
                [bias] if bias is not None else [],
            ],
            result_types=[t, stats, stats],
            properties={"eps": FloatAttr(eps, Float64Type())},
        )

    def verify_(self) -> None:
        self.verify_normalized()


@irdl_op_definition
class AddLayerNormOp(LayerNormBase):
    """The residual add and the layer norm after it, fused: sum = x + residual,
    y = layer_norm(sum) (graph.layer_norm's math, weight, bias and eps).

    aicfc-fuse forms it from graph.add -> graph.layer_norm where the sum has other users
    (the residual stream of a pre-LN transformer block): it is a result, so they read it
    here, and one kernel (kernels/layernorm.cu aicfc_add_layer_norm_f32) reads x and the
    residual once. Results: sum [..., D], y [..., D], mean [...], rstd [...], in x's dtype
    (y may be bf16/f16 over an f32 x, as graph.layer_norm's).

    ```mlir
    %s, %y, %m, %r = graph.add_layer_norm %x, %res weight %w bias %b eps = 1.000000e-05
        : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
        -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
    """

    name = "graph.add_layer_norm"
    DISPLAY_NAME: ClassVar[str] = "AddLayerNorm"
    input = operand_def(TensorType)
    residual = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    sum = result_def(TensorType)
    result = result_def(TensorType)
    mean = result_def(TensorType)
    rstd = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        Pure(),
        OpInfo(
            F.IS_NORMALIZATION | F.IS_REDUCTION | F.IS_FUSED | F.HAS_PARAM | F.COLLAPSES_INFO,
            narrow_results=(1,),
        ),
    )
    assembly_format = (
        "$input `,` $residual (`weight` $weight^)? (`bias` $bias^)? `eps` `=` $eps attr-dict "
        "`:` type($input) `,` type($residual) (`,` type($weight)^)? (`,` type($bias)^)? `->` "
        "`(` type(results) `)`"
    )

    def __init__(
        self,
        x: SSAValue,
        residual: SSAValue,
        weight: SSAValue | None = None,
        bias: SSAValue | None = None,
        eps: float = DEFAULT_EPS,
    ):
        t = ranked(self.name, "input", x)
        stats = tensor(t.get_shape()[:-1], t.element_type)
        super().__init__(
            operands=[
                x,
                residual,
                [weight] if weight is not None else [],
                [bias] if bias is not None else [],
            ],
            result_types=[t, t, stats, stats],
            properties={"eps": FloatAttr(eps, Float64Type())},
        )

    def verify_(self) -> None:
        t = self.verify_normalized()
        r = ranked(self.name, "residual", self.residual)
        if r != t:
            raise VerifyException(f"{self.name}: residual {r} and input {t} must have one type")
        require_result(self.name, self.sum.type, t)

    def flops(self) -> int:
        return super().flops() + numel(ranked(self.name, "input", self.input).get_shape())
