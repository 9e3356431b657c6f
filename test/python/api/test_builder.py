"""aicfc.builder: the train step and predict follow the function convention (architecture §1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from xdsl.dialects import func

import aicfc
from aicfc import nn, optim
from aicfc.builder import build_module, build_predict, build_train_step
from aicfc.dialects import autodiff, graph
from aicfc.dialects.roles import arg_name, arg_role, result_names
from aicfc.runtime.interpreter import run_func

ROOT = Path(__file__).resolve().parents[3]


def mlp() -> nn.Sequential:
    aicfc.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def signature(fn: func.FuncOp) -> list[tuple[str | None, str | None]]:
    return [(arg_role(a), arg_name(a)) for a in fn.body.block.args]


def test_train_step_signature_and_results():
    fn = build_train_step(mlp(), "cross_entropy", optim.Adam(), (4, 6))
    args = signature(fn)
    assert args[:6] == [
        ("input", "x"),
        ("input", "y"),
        ("param", "0.weight"),
        ("state", "0.weight.exp_avg"),
        ("state", "0.weight.exp_avg_sq"),
        ("state", "0.weight.step"),
    ]
    assert len(args) == 2 + 4 * 4 + 5
    assert args[-5:] == [  # the hyperparameters of the one param group, read by every update
        ("state", "optim.0.lr"),
        ("state", "optim.0.beta1"),
        ("state", "optim.0.beta2"),
        ("state", "optim.0.eps"),
        ("state", "optim.0.weight_decay"),
    ]
    assert result_names(fn) == ["loss"] + [n for _, n in args[2:]]
    assert str(fn.body.block.args[1].type) == "tensor<4xi32>"


def test_train_step_ops_in_order():
    fn = build_train_step(mlp(), "mse", optim.SGD(lr=0.1, momentum=0.9), (4, 6))
    kinds = [type(op) for op in fn.body.block.ops]
    assert kinds == [
        graph.MatmulOp,
        graph.BiasAddOp,
        graph.TanhOp,
        graph.MatmulOp,
        graph.BiasAddOp,
        graph.MseLossOp,
        autodiff.BackwardOp,
        graph.ConstantOp,  # the gradient scale and apply flag (1: no clipping, every step)
        *[autodiff.SgdStepOp] * 4,
        func.ReturnOp,
    ]
    backward = next(op for op in fn.body.block.ops if isinstance(op, autodiff.BackwardOp))
    assert [arg_name(v) for v in backward.wrt] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    matmul = next(op for op in fn.body.block.ops if isinstance(op, graph.MatmulOp))
    assert matmul.transpose_b is not None  # weights are [out, in] as in torch


def test_dropout_adds_rng_offset_state_and_is_absent_from_predict():
    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))
    step = build_train_step(model, "cross_entropy", optim.Adam(), (4, 6))
    assert signature(step)[-6] == ("state", "rng.offset")  # then the hyperparameters
    assert result_names(step)[-6] == "rng.offset"
    assert any(isinstance(op, graph.DropoutOp) for op in step.body.block.ops)
    pred = build_predict(model, (4, 6))
    assert not any(isinstance(op, graph.DropoutOp) for op in pred.body.block.ops)
    assert result_names(pred) == ["output"]


def test_predict_runs_in_the_interpreter():
    model = mlp()
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    (out,) = run_func(build_predict(model, (4, 6)), {"x": x, **model.state_dict()})
    p = {k: v.astype(np.float64) for k, v in model.state_dict().items()}
    ref = np.tanh(x @ p["0.weight"].T + p["0.bias"]) @ p["2.weight"].T + p["2.bias"]
    assert np.max(np.abs(out - ref)) < 1e-5 * np.max(np.abs(ref))


def test_module_text_round_trips():
    text = aicfc.print(build_module(mlp(), "cross_entropy", optim.Adam(lr=3e-4), 4))
    assert 'aicfc.name = "optim.0.lr", aicfc.init = dense<3.000000e-04> : tensor<f64>' in text
    assert aicfc.print(aicfc.parse(text)) == text


def test_committed_example_module_is_up_to_date(tmp_path):
    """examples/digits_train_step.mlir is what the example's --emit-mlir writes today."""
    out = tmp_path / "step.mlir"
    subprocess.run(
        [sys.executable, str(ROOT / "examples/train_digits.py"), "--emit-mlir", str(out)],
        check=True,
    )
    assert out.read_text() == (ROOT / "examples/digits_train_step.mlir").read_text()
