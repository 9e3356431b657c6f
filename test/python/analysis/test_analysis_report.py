"""The static operator report (passes/analysis/, the aicfc-analyze pass).

Expected counts are computed here from the layer sizes with the conventions
of dialects/base.py (a multiply-add is 2 FLOPs; bytes = every operand read
once + every result written once, 4 bytes per f32), never read back from the
code under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from aicfc import nn, optim
from aicfc.builder import build_module, build_predict
from aicfc.dialects.graph import Activation, GemmEpilogueOp
from aicfc.execute import run_pipeline
from aicfc.ir import parse_module
from aicfc.passes.analysis import analyze_module

LIT_FILE = Path(__file__).resolve().parents[2] / "passes" / "aicfc-analyze.mlir"


def linear_counts(batch: int, fan_in: int, fan_out: int) -> tuple[int, int, int]:
    """(params, FLOPs, bytes) of matmul + bias_add at f32."""
    params = fan_out * fan_in + fan_out
    flops = 2 * batch * fan_in * fan_out + batch * fan_out
    matmul_bytes = 4 * (batch * fan_in + fan_out * fan_in + batch * fan_out)
    bias_bytes = 4 * (batch * fan_out + fan_out + batch * fan_out)
    return params, flops, matmul_bytes + bias_bytes


def mlp_10_20_5() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))


def predict_module(model: nn.Module, x_shape: tuple[int, ...]) -> ModuleOp:
    return ModuleOp([build_predict(model, x_shape)])


def test_mlp_10_20_5_parameters_flops_and_bytes():
    report = analyze_module(predict_module(mlp_10_20_5(), (1, 10))).function("predict")
    kinds = [n.kind for n in report.nodes]
    assert kinds == ["Linear", "ReLU", "Linear"]
    first, relu, second = report.nodes
    assert (first.param_count, first.flops, first.bytes_moved) == linear_counts(1, 10, 20)
    assert (second.param_count, second.flops, second.bytes_moved) == linear_counts(1, 20, 5)
    assert (first.param_count, second.param_count, report.total_params) == (220, 105, 325)
    assert (relu.flops, relu.bytes_moved, relu.param_count) == (20, 4 * 20 * 2, 0)
    assert first.input_shapes == ((1, 10),) and first.output_shapes == ((1, 20),)
    assert relu.input_shapes == ((1, 20),) and second.output_shapes == ((1, 5),)
    assert first.properties == ("linear", "trainable")
    assert relu.properties == ("nonlinear", "irreversible", "collapse-producing")
    assert [p.name for p in first.params] == ["0.weight", "0.bias"]
    total_flops = linear_counts(1, 10, 20)[1] + 20 + linear_counts(1, 20, 5)[1]
    total_bytes = linear_counts(1, 10, 20)[2] + 160 + linear_counts(1, 20, 5)[2]
    assert (report.total_flops, report.total_bytes) == (total_flops, total_bytes)
    assert report.arithmetic_intensity == pytest.approx(total_flops / total_bytes)


def test_mlp_10_20_5_facts_and_candidates():
    report = analyze_module(predict_module(mlp_10_20_5(), (1, 10))).function("predict")
    assert [(c.node, c.reason) for c in report.collapse_points] == [
        (1, "every negative input becomes 0")
    ]
    assert [(c.node, c.in_features, c.out_features) for c in report.expansions] == [(0, 10, 20)]
    assert [(c.node, c.in_features, c.out_features) for c in report.contractions] == [(2, 20, 5)]
    actions = [c.action for c in report.candidates]
    # The three candidates of docs/design.md#operator-analysis, in its order, then the fusion
    # the IR allows.
    assert actions[:3] == [
        "inspect effective rank of Node 0 Linear(10 -> 20)",
        "measure ReLU activation ratio at Node 1",
        "consider hidden dimension reduction",
    ]
    assert report.candidates[2].nodes == (0, 1)
    assert any(a.startswith("fuse Node 0 Linear(10 -> 20) and Node 1 ReLU") for a in actions)


def test_no_expansion_no_collapse_no_such_candidates():
    model = nn.Sequential(nn.Linear(20, 8), nn.Tanh(), nn.Linear(8, 4))
    report = analyze_module(predict_module(model, (3, 20))).function("predict")
    assert report.collapse_points == [] and report.expansions == []
    assert len(report.contractions) == 2
    actions = " ".join(c.action for c in report.candidates)
    assert "effective rank" not in actions and "hidden dimension" not in actions


def test_fused_linear_relu_is_one_nonlinear_node():
    module = predict_module(mlp_10_20_5(), (4, 10))
    run_pipeline(module, "aicfc-fuse")
    report = analyze_module(module).function("predict")
    assert [n.kind for n in report.nodes] == ["Linear", "Linear"]
    fused = report.nodes[0]
    assert fused.activation == "ReLU" and fused.param_count == 220
    assert "collapse-producing" in fused.properties and "linear" not in fused.properties
    assert report.nodes[1].properties == ("linear", "trainable")
    assert report.total_params == 325
    assert [c.node for c in report.collapse_points] == [0]


def test_train_step_lists_autodiff_ops_apart():
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Dropout(0.25, seed=3), nn.Linear(4, 3))
    module = build_module(model, "cross_entropy", optim.Adam(lr=1e-3), 8, ("train_step",))
    report = analyze_module(module).function("train_step")
    assert report.training is not None
    assert dict(report.training.counts) == {"autodiff.backward": 1, "autodiff.adam_step": 4}
    assert all(not name.startswith("autodiff.") for n in report.nodes for name in n.op_names)
    assert report.total_params == (4 * 6 + 4) + (3 * 4 + 3)
    reasons = {report.nodes[c.node].kind: c.reason for c in report.collapse_points}
    assert (
        reasons["Dropout"] == "a random fraction p = 0.25 of its inputs becomes 0, in training only"
    )
    assert reasons["CrossEntropy"] == "reduces logits [8, 3] to a scalar loss"
    assert "Training ops (autodiff, not in the totals)" in str(report)


def test_report_text_is_what_the_pass_prints():
    text = LIT_FILE.read_text()
    want = str(analyze_module(parse_module(text)))
    out = subprocess.run(
        [sys.executable, "-m", "aicfc.tools.aicfc_opt", str(LIT_FILE), "-p", "aicfc-analyze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith(want)
    assert "Total parameters: 325" in want
    assert out[len(want) :].lstrip().startswith("builtin.module")


def test_unknown_function_is_a_key_error_naming_the_functions():
    with pytest.raises(KeyError, match=r"no function @nope .*@predict"):
        analyze_module(predict_module(mlp_10_20_5(), (1, 10)), "nope")


def test_numbers_scale_with_the_batch():
    small = analyze_module(predict_module(mlp_10_20_5(), (1, 10))).function("predict")
    big = analyze_module(predict_module(mlp_10_20_5(), (64, 10))).function("predict")
    assert big.total_params == small.total_params
    assert big.nodes[0].flops == linear_counts(64, 10, 20)[1]
    # Weights are read once per call: intensity grows with the batch.
    assert big.arithmetic_intensity > small.arithmetic_intensity
    assert np.isclose(big.nodes[0].flops / small.nodes[0].flops, 64)


def test_a_module_without_functions_says_so():
    assert str(analyze_module(ModuleOp([]))) == (
        "Operator report: no func.func in the module (exec IR is not analysed)\n"
    )


def test_expanded_train_step_marks_gradient_nodes():
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    module = build_module(model, "cross_entropy", optim.SGD(lr=0.1), 4, ("train_step",))
    run_pipeline(module, "aicfc-expand-backward")
    report = analyze_module(module).function("train_step")
    forward = [n for n in report.nodes if not n.gradient]
    grads = [n for n in report.nodes if n.gradient]
    assert [n.kind for n in forward][:3] == ["Linear", "ReLU", "Linear"]
    # dX = dZ W reads a param too, but it is a gradient, never a Linear layer.
    assert grads and all(n.kind != "Linear" for n in grads)
    assert [(c.in_features, c.out_features) for c in report.expansions] == [(6, 12)]
    assert [(c.in_features, c.out_features) for c in report.contractions] == [(12, 3)]
    assert all(not report.nodes[c.node].gradient for c in report.collapse_points)
    assert report.total_flops == sum(n.flops for n in report.nodes)


def _actions(report_fn, prefix: str) -> list[str]:
    return [c.action for c in report_fn.candidates if c.action.startswith(prefix)]


def test_fold_candidates_are_the_pairs_aicfc_fold_linear_folds():
    """Regression: after aicfc-fuse the report proposed folding Linear(4 -> 6) into the next
    layer although that layer has a fused ReLU, a pair aicfc-fold-linear never folds."""
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    module = predict_module(model, (2, 4))
    report = analyze_module(module).function("predict")
    # Unfused: nothing between the first two layers, and 8*4 <= 6*4 + 8*6.
    assert _actions(report, "fold") == [
        "fold Node 0 Linear(4 -> 6) and Node 1 Linear(6 -> 8) into one Linear(4 -> 8)"
    ]
    run_pipeline(module, "aicfc-fuse")
    fused = analyze_module(module).function("predict")
    assert fused.nodes[1].activation == "ReLU"
    assert _actions(fused, "fold") == []
    before = [op.name for op in module.walk()]
    run_pipeline(module, "aicfc-fold-linear")
    assert [op.name for op in module.walk()] == before  # the pass agrees: nothing to fold


def test_fuse_candidates_are_what_aicfc_fuse_fuses():
    """Regression: after aicfc-expand-backward GELU's input Z is also read by gelu_grad, so
    the report proposed fusing only matmul + bias_add, while aicfc-fuse fuses the GELU too
    (the gemm_epilogue re-exports Z as pre_act)."""
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    module = build_module(model, "cross_entropy", optim.SGD(lr=0.1), 4, ("train_step",))
    run_pipeline(module, "aicfc-expand-backward")
    report = analyze_module(module).function("train_step")
    assert _actions(report, "fuse") == [
        "fuse Node 0 Linear(6 -> 16) and Node 1 GELU into one graph.gemm_epilogue",
        "fuse Node 2 Linear(16 -> 3) into one graph.gemm_epilogue",
    ]
    run_pipeline(module, "aicfc-fuse")
    names = [op.name for op in module.walk()]
    assert "graph.gelu" not in names and "graph.bias_add" not in names
    epilogues = [op for op in module.walk() if isinstance(op, GemmEpilogueOp)]
    assert [op.activation for op in epilogues] == [Activation.GELU, Activation.NONE]


def test_a_product_that_is_no_layer_is_a_fuse_candidate_too():
    """aicfc-fuse fuses any plain product with its activation, not only layers with param
    weights (the old report listed Linear nodes only); the report lists what it fuses."""
    src = """
    func.func @scores(%q: tensor<4x8xf32>, %k: tensor<8x4xf32>) -> tensor<4x4xf32> {
      %s = graph.matmul %q, %k : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      %r = graph.relu %s : tensor<4x4xf32>
      func.return %r : tensor<4x4xf32>
    }
    """
    report = analyze_module(parse_module(src)).function("scores")
    assert [n.kind for n in report.nodes] == ["MatMul", "ReLU"]
    assert _actions(report, "fuse") == [
        "fuse Node 0 MatMul and Node 1 ReLU into one graph.gemm_epilogue"
    ]
    assert report.candidates[-1].nodes == (0, 1)
