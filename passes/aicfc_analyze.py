"""aicfc-analyze: print the operator analysis report of every function (seed 002 §7).

For each graph op: input and output shapes, dtype, parameters, FLOPs, bytes
moved and properties (linear, trainable, nonlinear, irreversible,
collapse-producing, stochastic, shape-only); a matmul(+bias_add) or
gemm_epilogue with param weights is one "Linear" node. Then totals
(parameters, FLOPs, bytes, arithmetic intensity), collapse points, linear
expansions and contractions, and optimization candidates. Autodiff ops are
listed apart (see aicfc/analysis.py, which builds the report; this pass only
prints it).

The report goes to stdout, before the module that aicfc-opt prints; the IR is
not changed. Option `function`: report only that function (default: all).

    aicfc-opt model.mlir -p aicfc-analyze
    aicfc-opt model.mlir -p 'aicfc-fuse,aicfc-analyze{function=predict}'
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from aicfc.analysis import analyze_module


@dataclass(frozen=True)
class AicfcAnalyzePass(ModulePass):
    """Print `aicfc.analysis.analyze_module(module)` to stdout; the IR is unchanged."""

    name = "aicfc-analyze"

    function: str = ""
    """Name of the one function to report (without @); empty: every function."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        try:
            report = analyze_module(op, self.function or None)
        except KeyError as e:
            raise DiagnosticException(f"error: aicfc-analyze: {e.args[0]}") from None
        sys.stdout.write(str(report))
        sys.stdout.flush()
