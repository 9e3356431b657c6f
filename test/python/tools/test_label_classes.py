"""aicfc-run finds the class labels among a function's inputs by op flags
(TAKES_CLASS_LABELS), in graph IR and in exec IR after lowering."""

from __future__ import annotations

from pathlib import Path

import aicfc
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import CrossEntropyOp, MseLossOp
from aicfc.ir import parse_module
from aicfc.tools.aicfc_run import label_classes

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "digits_train_step.mlir"


def test_graph_ir_labels_of_the_digits_step() -> None:
    module = parse_module(EXAMPLE.read_text(), str(EXAMPLE))
    assert label_classes(module) == {"y": 10}


def test_exec_ir_labels_after_the_pipeline() -> None:
    module = parse_module(EXAMPLE.read_text(), str(EXAMPLE))
    aicfc.run_pipeline(module, "aicfc-train-pipeline")
    assert label_classes(module) == {"y": 10}


def test_mse_has_no_class_labels() -> None:
    assert static_flags(CrossEntropyOp) & OpFlag.TAKES_CLASS_LABELS
    assert not static_flags(MseLossOp) & OpFlag.TAKES_CLASS_LABELS
    text = """
    func.func @f(%p: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "p"},
                 %t: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "t"}) -> tensor<f32> {
      %l = graph.mse_loss %p, %t : tensor<4x3xf32> -> tensor<f32>
      func.return %l : tensor<f32>
    }"""
    assert label_classes(parse_module(text)) == {}
