"""The ordered train pipeline and the IR-level helpers (parse, print, run_pipeline, run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aicfc
from aicfc.passes.aicfc_train_pipeline import AicfcTrainPipelinePass
from aicfc.passes.pipelines import stage_names, train_pipeline

ROOT = Path(__file__).resolve().parents[3]
STEP = (ROOT / "test/passes/aicfc-train-pipeline.mlir").read_text()


def test_steps_in_order():
    steps = train_pipeline("numpy", inplace=False)
    assert [(s.stage, s.passes) for s in steps] == [
        ("fused", "aicfc-fuse"),
        ("backward", "aicfc-expand-backward"),
        ("fused-backward", "aicfc-fuse"),
        ("canonical", "canonicalize,aicfc-fold-constants,cse"),
        ("hoisted", "aicfc-hoist-updates"),
        ("exec", "aicfc-lower-exec{backend=numpy}"),
        ("inplace", "aicfc-fold-inplace{enable=false}"),
        ("planned", "aicfc-plan-memory"),
    ]
    assert stage_names(steps)[0] == "graph"
    assert train_pipeline("cupy")[5].passes == "aicfc-lower-exec{backend=cuda}"
    fused = train_pipeline("cupy", fuse_train_step=True)  # only when asked (docs/design.md)
    assert (fused[4].stage, fused[4].passes) == (
        "fused-step",
        "aicfc-fuse-train-step{backend=cuda}",
    )
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        train_pipeline("tpu")


def test_named_pass_equals_the_steps_run_one_by_one():
    whole = aicfc.run_pipeline(aicfc.parse(STEP), [AicfcTrainPipelinePass()])
    by_step = aicfc.parse(STEP)
    for step in train_pipeline():
        aicfc.run_pipeline(by_step, step.passes)
    assert aicfc.print(whole) == aicfc.print(by_step)


def test_run_pipeline_unknown_pass():
    with pytest.raises(ValueError, match="aicfc-fusee"):
        aicfc.run_pipeline(aicfc.parse(STEP), "aicfc-fusee")


def test_parse_error_is_located():
    text = (
        "func.func @f(%a: tensor<2xi32>) -> tensor<2xi32> {\n"
        "  %b = graph.relu %a : tensor<2xi32>\n"
        "  func.return %b : tensor<2xi32>\n}\n"
    )
    with pytest.raises(aicfc.IRError, match=r"^step\.mlir:2:3: error: .*float element type"):
        aicfc.parse(text, name="step.mlir")


def values(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = np.float32
    return {
        "x": rng.standard_normal((4, 3)).astype(f),
        "y": np.array([0, 1, 1, 0], np.int32),
        "fc.weight": rng.standard_normal((2, 3)).astype(f),
        "fc.weight.exp_avg": np.zeros((2, 3), f),
        "fc.weight.exp_avg_sq": np.zeros((2, 3), f),
        "fc.weight.step": np.zeros((), f),
        "fc.bias": rng.standard_normal(2).astype(f),
        "fc.bias.exp_avg": np.zeros(2, f),
        "fc.bias.exp_avg_sq": np.zeros(2, f),
        "fc.bias.step": np.zeros((), f),
    }


def test_run_graph_ir_one_adam_step():
    """Loss of logits x W^T + b, and Adam's first step param - lr * g / (|g| + eps)."""
    v = values()
    out = aicfc.run(aicfc.parse(STEP), "train_step", v)
    x, w, b = (v[k].astype(np.float64) for k in ("x", "fc.weight", "fc.bias"))
    z = x @ w.T + b
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = np.mean(-np.log(p[np.arange(4), v["y"]]))
    assert abs(float(out["loss"]) - loss) <= 1e-5 * loss
    p[np.arange(4), v["y"]] -= 1
    gw = (p / 4).T @ x
    w1 = w - 1e-3 * gw / (np.abs(gw) + 1e-8)
    assert np.max(np.abs(out["fc.weight"] - w1)) <= 1e-5 * np.max(np.abs(w1))
    assert float(out["fc.weight.step"]) == 1.0
    np.testing.assert_array_equal(
        v["fc.weight"], values()["fc.weight"]
    )  # caller's arrays untouched


def test_run_exec_ir_equals_graph_ir_and_counts_steps():
    v = values()
    lowered = aicfc.run_pipeline(aicfc.parse(STEP), "aicfc-train-pipeline")
    a = aicfc.run(aicfc.print(lowered), None, v, steps=3)
    b = aicfc.run(aicfc.parse(STEP), "train_step", v, steps=3)
    assert float(a["fc.bias.step"]) == 3.0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_run_input_errors_name_the_input():
    v = values()
    v["fc.bias"] = np.zeros(3, np.float32)
    with pytest.raises(aicfc.InputError, match=r'"fc\.bias".*float32\[2\].*float32\[3\]'):
        aicfc.run(aicfc.parse(STEP), "train_step", v)
    v = values()
    del v["fc.bias.step"]
    with pytest.raises(aicfc.InputError, match=r"missing input 'fc\.bias\.step'"):
        aicfc.run(aicfc.parse(STEP), "train_step", v)
    with pytest.raises(ValueError, match="no function @predict"):
        aicfc.run(aicfc.parse(STEP), "predict", values())
