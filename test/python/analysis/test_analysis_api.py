"""The report through the Python API: aicfc.analyze and Program.report."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import aicfc
from aicfc import nn, optim
from aicfc.analysis import analyze_module
from aicfc.builder import build_predict


def mlp_10_20_5() -> nn.Sequential:
    aicfc.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))


def test_aicfc_analyze_is_the_report_of_predict():
    model = mlp_10_20_5()
    report = aicfc.analyze(model, input_shape=(1, 10))
    assert str(report) == str(analyze_module(ModuleOp([build_predict(model, (1, 10))])))
    f = report.function("predict")
    assert [n.param_count for n in f.linears()] == [220, 105] and f.total_params == 325
    assert "Total parameters: 325" in str(report)


def test_analyze_needs_a_shape():
    with pytest.raises(ValueError, match="input_shape"):
        aicfc.analyze(mlp_10_20_5())


def test_program_report_static_and_measured_with_trained_params():
    model = mlp_10_20_5()
    prog = aicfc.compile(model, optimizer=optim.Adam(lr=1e-2), backend="numpy")
    # The report is of @predict as compiled: the pipeline already fused each layer.
    static = prog.report().function("predict")
    assert [n.title for n in static.nodes] == [
        "Linear(in_features=10, out_features=20, bias=True) + ReLU (fused)",
        "Linear(in_features=20, out_features=5, bias=True)",
    ]
    assert static.total_params == 325
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    y = rng.integers(0, 5, 64)
    for _ in range(5):
        prog.step(x, y)
    trained = prog.parameters()["0.weight"]
    assert not np.allclose(trained, model[0].weight.data)  # the model keeps its initial values
    m = prog.report(x).measurements[0]
    s = np.linalg.svd(trained, compute_uv=False)
    assert m.ranks[0].singular_values == pytest.approx(tuple(float(v) for v in s), rel=1e-5)
    h = np.maximum(x @ trained.T + prog.parameters()["0.bias"], 0)
    assert m.activations[0].active_fraction == pytest.approx(float((h > 0).mean()), abs=1e-9)


def test_program_report_rejects_a_bad_batch():
    prog = aicfc.compile(mlp_10_20_5(), optimizer=optim.Adam(lr=1e-3), backend="numpy")
    with pytest.raises(aicfc.InputError, match='input "x"'):
        prog.report(np.zeros((4, 10), dtype=np.float64))


def test_program_report_does_not_suggest_what_the_pipeline_does():
    """Regression: prog.report() suggested "fuse ... (aicfc-fuse)" although compile fuses."""
    prog = aicfc.compile(mlp_10_20_5(), optimizer=optim.Adam(lr=1e-3), backend="numpy")
    unfused = aicfc.analyze(mlp_10_20_5(), input_shape=(1, 10))
    assert any(c.action.startswith("fuse") for c in unfused.function("predict").candidates)
    assert not any(
        c.action.startswith("fuse") for c in prog.report().function("predict").candidates
    )


def test_analyze_of_a_program_measures_the_trained_weights():
    """aicfc.analyze(model) keeps measuring the model's initial weights; the Program's own."""
    model = mlp_10_20_5()
    prog = aicfc.compile(model, optimizer=optim.Adam(lr=5e-2), backend="numpy")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    y = rng.integers(0, 5, 64)
    for _ in range(20):
        prog.step(x, y)
    trained = aicfc.analyze(prog, x=x).measurements[0]
    initial = aicfc.analyze(model, x=x).measurements[0]
    s_trained = np.linalg.svd(prog.parameters()["2.weight"], compute_uv=False)
    s_initial = np.linalg.svd(model[2].weight.data, compute_uv=False)
    assert trained.ranks[1].singular_values == pytest.approx(tuple(s_trained), rel=1e-5)
    assert initial.ranks[1].singular_values == pytest.approx(tuple(s_initial), rel=1e-5)
    assert str(aicfc.analyze(prog, input_shape=(3, 10))) == str(prog.report(batch_size=3))


def test_analyze_raises_its_documented_errors():
    model = mlp_10_20_5()
    with pytest.raises(nn.ShapeError, match=r"takes \[N, 10\] inputs, got \[8, 21\]"):
        aicfc.analyze(model, input_shape=(8, 21))
    with pytest.raises(aicfc.InputError, match="expected dtype float32, got float64"):
        aicfc.analyze(model, x=np.zeros((4, 10)))
    with pytest.raises(aicfc.InputError, match="got a list, which NumPy converts to float64"):
        aicfc.analyze(model, x=[[0.5] * 10])
    prog = aicfc.compile(model, backend="numpy")
    with pytest.raises(nn.ShapeError, match=r"got \[2, 11\]"):
        aicfc.analyze(prog, input_shape=(2, 11))
