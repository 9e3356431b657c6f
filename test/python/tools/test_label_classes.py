"""aicfc-run finds the class labels (TAKES_CLASS_LABELS) and token ids (IS_GATHER) among a
function's inputs by op flags, in graph IR and in exec IR after lowering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import aicfc
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import CrossEntropyOp, MseLossOp
from aicfc.ir import parse_module
from aicfc.tools.aicfc_run import label_classes, token_id_rows

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


def _gpt_module() -> ModuleOp:
    """A GPT step whose logits are [2, 4, 11]: T = 4 is not the class count."""
    from aicfc import optim
    from aicfc.builder import build_module
    from aicfc.models.gpt import GPT, GPTConfig

    aicfc.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=4, n_layer=1, n_head=2, n_embd=8))
    return build_module(model, "cross_entropy", optim.Adam(), batch_size=2)


def test_labels_over_positions_and_token_ids_of_a_gpt() -> None:
    module = _gpt_module()
    assert label_classes(module) == {"y": 11}  # the logits' last dim, not T
    assert token_id_rows(module) == {"x": 11}  # the wte table's rows (not wpe's constant)
    aicfc.run_pipeline(module, "aicfc-train-pipeline")
    assert label_classes(module) == {"y": 11}
    assert token_id_rows(module) == {"x": 11}


def test_aicfc_run_refuses_token_ids_out_of_range(tmp_path) -> None:
    path = tmp_path / "gpt.mlir"
    path.write_text(aicfc.print(_gpt_module()))
    data = tmp_path / "bad.npz"
    np.savez(data, x=np.full((2, 4), 11, np.int32))
    done = subprocess.run(
        [Path(sys.executable).parent / "aicfc-run", path, "-i", data],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        'input "x": ids must be in [0, 11) (the 11 rows of the embedding table it indexes), '
        "got values from 11 to 11"
    ) in done.stderr
