"""The measured report (aicfc/measured.py): activity, ranks and data-driven candidates.

Expected values come from an independent NumPy forward pass written here, from
numpy.linalg.matrix_rank, and from matrices whose spectra are known in closed
form (identity, rank one, diag(3, 1)). Candidates are checked both ways: they
appear when a network is built to cross a threshold and are absent when it is
not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import aicfc
from aicfc import nn
from aicfc.analysis import analyze, measure
from aicfc.builder import build_predict
from aicfc.execute import run_pipeline
from aicfc.measured import Thresholds, effective_rank, energy_rank


def mlp(act: type[nn.Module] = nn.ReLU, hidden: int = 20) -> nn.Sequential:
    aicfc.manual_seed(0)
    return nn.Sequential(nn.Linear(10, hidden), act(), nn.Linear(hidden, 5))


def forward_hidden(model: nn.Sequential, x: np.ndarray, gelu: bool = False) -> np.ndarray:
    """The activation output, computed here with NumPy (the oracle)."""
    w, b = model[0].weight.data, model[0].bias.data
    z = x @ w.T + b
    if gelu:
        from scipy.special import erf

        return 0.5 * z * (1 + erf(z / np.sqrt(2)))
    return np.maximum(z, 0)


def kill_units(model: nn.Sequential, units: list[int]) -> None:
    model[0].bias.data[units] = -1e4  # z = x W^T + b < 0 for any x of moderate size


def batch(n: int = 128, seed: int = 0) -> np.ndarray:
    """Inputs of the test's own (a shared generator made each test's data depend on the
    tests run before it)."""
    return np.random.default_rng(seed).standard_normal((n, 10)).astype(np.float32)


def test_active_fraction_and_dead_units_match_a_numpy_forward():
    model = mlp()
    kill_units(model, [0, 3, 7])
    x = batch()
    m = analyze(model, x=x).measurements[0]
    (a,) = m.activations
    h = forward_hidden(model, x)
    assert a.shape == (128, 20) and a.samples == 128 and a.units == 20
    assert a.active_fraction == pytest.approx(float((h > 0).mean()), abs=1e-12)
    np.testing.assert_allclose(a.unit_active, (h > 0).mean(axis=0))
    assert a.dead_units == (0, 3, 7)
    assert m.batch == 128


def test_gelu_counts_positive_outputs():
    model = mlp(nn.GELU)
    kill_units(model, [1])
    x = batch()
    (a,) = analyze(model, x=x).measurements[0].activations
    h = forward_hidden(model, x, gelu=True)
    assert a.kind == "GELU"
    assert a.active_fraction == pytest.approx(float((h > 0).mean()), abs=1e-12)
    assert a.dead_units == (1,)


def test_hidden_dimension_reduction_appears_with_dead_units_and_is_exact_for_relu():
    model = mlp()
    dead = [2, 5, 11]  # 3 of 20 = 15% >= 10%
    kill_units(model, dead)
    x = batch()
    m = analyze(model, x=x).measurements[0]
    (c,) = [c for c in m.candidates if c.action.startswith("hidden dimension reduction")]
    saved = len(dead) * (10 + 1) + len(dead) * 5  # rows of W1 and b1, columns of W2
    assert f"saves {saved} parameters" in c.because and "20 -> 17" in c.because
    # The claim "outputs on this batch stay the same": drop the units and compare.
    keep = [u for u in range(20) if u not in dead]
    w1, b1 = model[0].weight.data[keep], model[0].bias.data[keep]
    w2, b2 = model[2].weight.data[:, keep], model[2].bias.data
    full = forward_hidden(model, x) @ model[2].weight.data.T + b2
    small = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(small, full, rtol=1e-6, atol=1e-6)


def test_no_reduction_candidate_below_the_threshold():
    model = mlp()
    kill_units(model, [4])  # 1 of 20 = 5% < 10%
    m = analyze(model, x=batch()).measurements[0]
    assert m.activations[0].dead_units == (4,)
    assert not [c for c in m.candidates if "hidden dimension" in c.action]
    # A stricter threshold turns the same measurement into a candidate.
    m = analyze(model, x=batch(), thresholds=Thresholds(reduce_fraction=0.05)).measurements[0]
    assert [c for c in m.candidates if "hidden dimension" in c.action]


def test_effective_rank_closed_forms():
    assert effective_rank(np.ones(7)) == pytest.approx(7.0)  # identity: p uniform
    assert effective_rank(np.array([5.0, 0.0, 0.0])) == pytest.approx(1.0)  # rank one
    p = np.array([0.75, 0.25])  # diag(3, 1)
    assert effective_rank(np.array([3.0, 1.0])) == pytest.approx(math.exp(-(p * np.log(p)).sum()))
    assert energy_rank(np.array([3.0, 1.0]), 0.9) == 1  # 9 / 10 of the energy
    assert energy_rank(np.array([3.0, 1.0]), 0.99) == 2


def test_ranks_of_low_rank_weights_and_the_low_rank_candidate():
    model = mlp(hidden=20)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((20, 2)), rng.standard_normal((2, 10))
    model[0].weight.data[...] = (a @ b).astype(np.float32)  # rank 2 of min(20, 10) = 10
    m = analyze(model, x=batch()).measurements[0]
    first, second = m.ranks
    assert first.name == "0.weight" and first.shape == (20, 10)
    assert first.numerical_rank == np.linalg.matrix_rank(model[0].weight.data) == 2
    s = np.linalg.svd(model[0].weight.data.astype(np.float64), compute_uv=False)
    q = s / s.sum()
    q = q[q > 0]
    assert first.effective_rank == pytest.approx(math.exp(-(q * np.log(q)).sum()), rel=1e-3)
    assert second.numerical_rank == np.linalg.matrix_rank(model[2].weight.data) == 5
    low = [c for c in m.candidates if c.action.startswith("low-rank approximation")]
    assert len(low) == 1 and "0.weight" in low[0].action
    assert "instead of 200 weight parameters" in low[0].because


def test_no_low_rank_candidate_for_random_weights():
    m = analyze(mlp(), x=batch()).measurements[0]
    assert all(r.numerical_rank == min(r.shape) for r in m.ranks)
    assert not [c for c in m.candidates if c.action.startswith("low-rank")]


def test_fused_predict_measures_the_same():
    model = mlp()
    kill_units(model, [0, 1])
    x = batch(32)
    module = ModuleOp([build_predict(model, x.shape)])
    values = {"x": x, **{n: p.data for n, p in model.named_parameters()}}
    plain = measure(module, values).measurements[0]
    run_pipeline(module, "aicfc-fuse")
    fused = measure(module, values).measurements[0]
    assert fused.activations[0].label.endswith("+ ReLU")
    assert fused.activations[0].unit_active == plain.activations[0].unit_active
    assert fused.activations[0].dead_units == (0, 1)


def test_text_states_definitions_and_thresholds():
    text = str(analyze(mlp(), x=batch()))
    assert "Measured report of @predict on a batch of 128 inputs" in text
    assert "Roy and Vetterli 2007" in text and "numpy.linalg.matrix_rank's default" in text
    assert "active = output > 0" in text
    assert "thresholds: dead or rarely active units >= 10% of a layer" in text


def test_wrong_dtype_names_the_argument():
    """The same InputError as Program.predict (was the interpreter's "argument #0")."""
    with pytest.raises(aicfc.InputError, match='input "x": expected dtype float32, got float64'):
        analyze(mlp(), x=batch().astype(np.float64))
