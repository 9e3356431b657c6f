"""Operator analysis from Python: the static report, measurements, models and Programs.

The static report of IR is built by `aicfc.passes.analysis` (what the
pass `aicfc-analyze` prints); this module adds what needs the API or the
runtime: `measure(module, values)` (aicfc/measured.py, with the definitions
and thresholds) runs the inference function (`@predict`) on a real batch with
the NumPy interpreter and reports the active fraction and dead units after
each ReLU/GELU and the effective and numerical rank of each linear weight, and
`analyze(model_or_program, ...)` builds the report of a model or a Program.
This module imports aicfc.program; the Program builds its own report from the
two modules below it (aicfc.passes.analysis, aicfc.measured), so no import
circle runs through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from aicfc.measured import measure
from aicfc.passes.analysis import (
    Candidate,
    Change,
    Collapse,
    FunctionReport,
    Node,
    Param,
    Report,
    analyze_function,
    analyze_module,
    linear_ops,
)

if TYPE_CHECKING:
    import numpy as np

    from aicfc.measured import Thresholds
    from aicfc.nn import Module
    from aicfc.program import Program


def analyze(
    model: Module | Program,
    input_shape: Sequence[int] | None = None,
    x: np.ndarray | None = None,
    params: Mapping[str, np.ndarray] | None = None,
    thresholds: Thresholds | None = None,
) -> Report:
    """The report of a model's forward pass, `@predict` built by aicfc.builder.build_predict.

    model: an aicfc.nn.Module, whose parameters are the ones it holds: after
        `aicfc.compile(model, ...)` and training, those are still the INITIAL
        weights (the Program owns the trained ones). Pass the Program itself (or
        `params=prog.parameters()`) to analyse the trained weights; a Program is
        reported as `Program.report` does (its compiled, fused @predict).
    input_shape: [N, in_features] of the inputs (taken from `x` when given).
    x: a batch of real inputs; with it the report also has the measured part,
        computed with `params` by name (default: the model's current parameters).

    Raises ValueError when neither input_shape nor x is given, nn.ShapeError when
    input_shape does not fit the model, and aicfc.InputError (the error of
    Program.predict) when x has another dtype than the parameters or a shape the
    model cannot take.
    """
    import numpy as np
    from xdsl.dialects.builtin import ModuleOp

    from aicfc.builder import build_predict
    from aicfc.program import Program, check_x

    if x is None and input_shape is None:
        raise ValueError("analyze: give input_shape=(N, in_features) or a batch x")
    if isinstance(model, Program):
        if x is None:
            assert input_shape is not None
            model.model.output_shape(tuple(input_shape))  # nn.ShapeError if it does not fit
            return model.report(batch_size=int(input_shape[0]), thresholds=thresholds)
        return model.report(x, thresholds=thresholds)
    named = dict(model.named_parameters())
    dtype = next(iter(named.values())).dtype if named else np.dtype(np.float32)
    if x is not None:
        x = check_x(model, x, dtype)
        input_shape = x.shape
    assert input_shape is not None
    model.output_shape(tuple(input_shape))  # nn.ShapeError naming the layer and dims
    module = ModuleOp([build_predict(model, tuple(input_shape), dtype)])
    if x is None:
        return analyze_module(module)
    values = dict(params) if params is not None else {n: p.data for n, p in named.items()}
    values["x"] = x
    return measure(module, values, "predict", thresholds)


__all__ = [
    "Candidate",
    "Change",
    "Collapse",
    "FunctionReport",
    "Node",
    "Param",
    "Report",
    "analyze",
    "analyze_function",
    "analyze_module",
    "linear_ops",
    "measure",
]
