"""aicfc-analyze: print the operator analysis report of each function (design.md#operator-analysis).

For each graph op: input and output shapes, dtype, parameters, FLOPs, bytes
moved and properties (linear, trainable, nonlinear, irreversible,
collapse-producing, stochastic, shape-only); a matmul(+bias_add) or
gemm_epilogue with param weights is one "Linear" node. Then totals
(parameters, FLOPs, bytes, arithmetic intensity), collapse points, linear
expansions and contractions, and optimization candidates. Autodiff ops are
listed apart (see the package passes/analysis/, which builds the report; this
pass only prints it).

The totals count graph ops only. Before aicfc-expand-backward a train step's
`autodiff.backward` has no gradient ops yet: the report says "autodiff.backward
not expanded: backward FLOPs not counted" rather than counting them as 0.

Output: the report goes to stdout, and aicfc-opt then prints the module (the IR
is not changed), so stdout is the report followed by the IR. For the report
alone, send the IR elsewhere with `-o`:

    aicfc-opt model.mlir -p aicfc-analyze -o /dev/null
    aicfc-opt model.mlir -p 'aicfc-fuse,aicfc-analyze{function=predict}'

Option `function`: report only that function (default: all); a name the module
lacks is a command-line error (`aicfc-opt: error: aicfc-analyze: no function ...`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from aicfc.passes.analysis import analyze_module
from aicfc.passes.options import PassOptionError


@dataclass(frozen=True)
class AicfcAnalyzePass(ModulePass):
    """Print `analysis.analyze_module(module)` to stdout; the IR is unchanged."""

    name = "aicfc-analyze"

    function: str = ""
    """Name of the one function to report (without @); empty: every function."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        try:
            report = analyze_module(op, self.function or None)
        except KeyError as e:
            raise PassOptionError(f"aicfc-analyze: {e.args[0]}") from None
        sys.stdout.write(str(report))
        sys.stdout.flush()
