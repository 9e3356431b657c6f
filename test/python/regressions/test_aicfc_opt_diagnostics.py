"""Regression: IR that a pass left invalid was reported by aicfc-opt without a location.

xDSL's driver verifies the module between passes with a plain `verify()`,
whose error names no op position (it printed e.g. "exec.copy: source ...
differ in shape or dtype" alone). The driver now reports it like a parse
error: `file:line:col: error:` at the first failing op, exit code 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from aicfc.dialects import graph
from aicfc.tools import aicfc_opt

STEP = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


@dataclass(frozen=True)
class BreakRelu(ModulePass):
    """A faulty pass: puts an ill-typed reshape (4 -> 7 elements) before each graph.relu."""

    name = "test-break-relu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for relu in [o for o in op.walk() if isinstance(o, graph.ReluOp)]:
            bad = graph.ReshapeOp(relu.input, (7,))
            bad.location = relu.location
            Rewriter.insert_op(bad, InsertPoint.before(relu))


def test_invalid_ir_after_a_pass_is_located(tmp_path, monkeypatch, capsys):
    registry = {**aicfc_opt.get_all_passes(), BreakRelu.name: lambda: BreakRelu}
    monkeypatch.setattr(aicfc_opt, "get_all_passes", lambda: registry)
    path = tmp_path / "step.mlir"
    path.write_text(STEP)
    for passes in ("test-break-relu", "test-break-relu,cse"):  # last pass, and between passes
        assert aicfc_opt.main([str(path), "-p", passes]) == 1
        err = capsys.readouterr().err
        assert err.startswith(
            f"{path}:2:3: error: graph.reshape: cannot reshape [4] (4 elements) to [7] (7 elements)"
        ), err
        assert "internal error" not in err and "Traceback" not in err
