"""autodiff.backward: where gradients are wanted (expanded by aicfc-expand-backward)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.tensors import fmt_shape, numel, ranked, require_float

F = OpFlag


NOT_SECOND_ORDER = "second-order differentiation is not supported"


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
