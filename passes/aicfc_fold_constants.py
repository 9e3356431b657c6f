"""aicfc-fold-constants: op(constant, ..., constant) -> constant, for graph and autodiff ops.

    %c = graph.add %a, %b   (both graph.constant)  ->  %c = graph.constant <a + b>

The value is computed by the NumPy reference (`runtime/reference.py`), the one
definition of what each op means, so a folded constant is bit-identical to
what the NumPy runtime would compute at run time. Writing a second evaluator
here would be a second definition to keep in step.

Why a pass and not a canonicalization pattern: a dialect imports no runtime
(the layering of docs/architecture.md), and folding needs the reference, so
`canonicalize` keeps the structural rewrites (dialects/canonicalization/) and
this pass, run right after it in the train pipeline, does the arithmetic.

Operand values the reference refuses (constant labels outside [0, C)) are an
error naming the op, as they would be when the step runs.

Not folded:
- stochastic ops (dropout): the draw stays visible in the IR and the report;
- results the NumPy runtime has no dtype for;
- folds that would grow the IR: the results may hold at most as many
  elements as the constant operands together, unless every result is a
  splat (one repeated value) or they are small (at most `SMALL_CONSTANT`
  elements in all). `broadcast_to` of a dense
  [16] constant to [4096, 16] therefore stays a broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.diagnostics import OpError, copy_location
from aicfc.dialects.flags import OpFlag, constant_value, static_flags
from aicfc.dialects.graph import ConstantOp
from aicfc.dialects.tensors import numel
from aicfc.runtime.interpreter import InterpreterError, dense_to_numpy, numpy_dtype
from aicfc.runtime.reference import REFERENCE

SMALL_CONSTANT = 256
"""Folds whose results have at most this many elements are always done."""


def constant_operands(op: Operation) -> list[DenseIntOrFPElementsAttr] | None:
    """The operand values of an op this pass may fold, else None.

    An op qualifies when it is a graph or autodiff op without regions, neither a
    constant nor stochastic, and every operand is a dense `graph.constant`.
    Whether it is folded then depends on its values and results (see the module
    docstring); the operator report asks this for its "precompute" candidates.
    """
    if not isinstance(op, AicfcOp) or not op.operands or op.regions:
        return None
    if static_flags(op) & (OpFlag.IS_CONSTANT | OpFlag.IS_STOCHASTIC):
        return None
    values = []
    for v in op.operands:
        value = constant_value(v)
        if value is None:
            return None
        values.append(value)
    return values


def _grows_ir(operands: list[DenseIntOrFPElementsAttr], results: list[TensorType]) -> bool:
    out = sum(numel(t.get_shape()) for t in results)
    return out > SMALL_CONSTANT and out > sum(len(a) for a in operands)


class FoldConstantOperands(RewritePattern):
    """op(c1, ..., cn) -> constant(reference(op)(c1, ..., cn)) for any graph op whose
    operands are all graph.constant (see the module docstring for what is skipped)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        operands = constant_operands(op)
        if operands is None:
            return
        assert isinstance(op, AicfcOp)
        types = [r.type for r in op.results]
        if not all(isinstance(t, TensorType) for t in types):
            return
        result_types: list[TensorType] = types  # type: ignore[assignment]
        ref = REFERENCE.get(type(op))
        if ref is None:
            return
        try:
            arrays = [dense_to_numpy(a) for a in operands]
            dtypes = [numpy_dtype(t.element_type) for t in result_types]
        except InterpreterError:
            return  # a dtype the NumPy runtime cannot hold: leave the op to run
        try:
            outs = ref(*arrays, **op.kernel_params())[: len(result_types)]
        except ValueError as e:  # the reference refuses the values (labels outside [0, C))
            raise OpError(op, f"cannot be evaluated on its constant operands: {e}") from None
        values = [
            np.asarray(v, dtype=dt).reshape(tuple(t.get_shape()))
            for t, dt, v in zip(result_types, dtypes, outs, strict=True)
        ]
        dense = [v for v in values if v.size > 1 and not (v == v.reshape(-1)[0]).all()]
        if dense and _grows_ir(operands, result_types):
            return
        new_ops = [
            ConstantOp(DenseIntOrFPElementsAttr.from_list(t, v.reshape(-1).tolist()))  # type: ignore[type-var, arg-type]
            for t, v in zip(result_types, values, strict=True)
        ]
        copy_location(op, *new_ops)
        rewriter.replace(op, new_ops, [c.result for c in new_ops])


@dataclass(frozen=True)
class AicfcFoldConstantsPass(ModulePass):
    """Fold every graph/autodiff op whose operands are all graph.constant (no options)."""

    name = "aicfc-fold-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([FoldConstantOperands()])).rewrite_module(
            op
        )
