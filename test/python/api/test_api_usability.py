"""Findings of a new user's first session with the Python API (each a regression test).

Layer mismatches are the model's fault, not x's; load_state_dict(strict=False) says
what it skipped; a Python list's dtype is explained; backend="auto" says why; "cuda"
names the cupy backend; a parameter without a gradient is warned about; the package
has a version.
"""

from __future__ import annotations

import importlib.metadata
import logging
import warnings

import numpy as np
import pytest
from xdsl.ir import SSAValue

import aicfc
from aicfc import nn, optim
from aicfc.backends import get_backend, resolve_backend
from aicfc.runtime.errors import BackendUnavailable


def mlp(*dims: int) -> nn.Sequential:
    aicfc.manual_seed(0)
    layers: list[nn.Module] = []
    for i in range(0, len(dims) - 1, 2):
        layers += [nn.Linear(dims[i], dims[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def data(n: int, features: int, classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, features)).astype(np.float32), rng.integers(0, classes, n)


# --- layers that do not fit ----------------------------------------------------------


def test_layer_mismatch_is_caught_at_compile_naming_both_layers():
    model = mlp(20, 32, 31, 4)  # Linear(20, 32) -> ReLU -> Linear(31, 4)
    with pytest.raises(nn.LayerMismatch) as info:
        aicfc.compile(model, backend="numpy")
    message = str(info.value)
    assert "layer '2' Linear(in_features=31, out_features=4, bias=True) takes [N, 31]" in message
    assert "layer '0' Linear(in_features=20, out_features=32, bias=True) outputs [N, 32]" in message
    assert "(32 != 31)" in message
    assert 'input "x"' not in message
    assert isinstance(info.value, nn.ShapeError)


def test_layer_mismatch_inside_a_nested_sequential_names_the_container():
    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), nn.Sequential(nn.Tanh(), nn.Linear(5, 2)))
    with pytest.raises(nn.LayerMismatch, match=r"layer '1' Sequential\(\.\.\.\) takes \[N, 5\]"):
        aicfc.compile(model, backend="numpy")


def test_a_wrong_x_width_still_blames_x():
    prog = aicfc.compile(mlp(20, 32, 32, 4), backend="numpy")
    with pytest.raises(
        aicfc.InputError, match=r'input "x": expected shape \[N, 20\], got \[3, 21\]'
    ):
        prog.predict(np.zeros((3, 21), np.float32))


# --- load_state_dict(strict=False) ---------------------------------------------------


def test_load_state_dict_non_strict_returns_missing_and_unexpected_keys():
    prog = aicfc.compile(mlp(4, 8, 8, 3), optimizer=optim.SGD(lr=0.1), backend="numpy")
    before = prog.state_dict()
    w = np.full((8, 4), 0.25, np.float32)
    result = prog.load_state_dict({"0.weights": w, "2.bias": np.ones(3, np.float32)}, strict=False)
    assert isinstance(result, aicfc.IncompatibleKeys)
    assert result.unexpected_keys == ["0.weights"]
    # the hyperparameter states are missing too (they keep their values)
    assert result.missing_keys == [
        "0.weight",
        "0.bias",
        "2.weight",
        "optim.0.lr",
        "optim.0.momentum",
        "optim.0.weight_decay",
    ]
    after = prog.state_dict()
    assert np.array_equal(after["2.bias"], np.ones(3, np.float32))
    assert np.array_equal(after["0.weight"], before["0.weight"])  # a missing key is untouched


def test_load_state_dict_strict_match_returns_empty_lists():
    prog = aicfc.compile(mlp(4, 8, 8, 3), backend="numpy")
    assert prog.load_state_dict(prog.state_dict()) == aicfc.IncompatibleKeys([], [])


# --- inputs that NumPy converts ------------------------------------------------------


def test_a_python_list_says_it_became_float64():
    prog = aicfc.compile(mlp(2, 4, 4, 3), backend="numpy")
    with pytest.raises(aicfc.InputError) as info:
        prog.predict([[0.5, 1.5], [2.0, -1.0]])
    assert "got a list, which NumPy converts to float64" in str(info.value)
    assert "np.asarray(x, dtype=np.float32)" in str(info.value)
    prog.step(np.zeros((2, 2), np.float32), [0, 2])  # a list of integer labels is fine


def test_mse_targets_as_a_list_are_explained():
    prog = aicfc.compile(mlp(2, 3), loss="mse", backend="numpy")
    with pytest.raises(aicfc.InputError, match='input "y": expected a float32 array, got a list'):
        prog.step(np.zeros((1, 2), np.float32), [[0.0, 1.0, 2.0]])


# --- backend names and the auto choice -----------------------------------------------


def _outcome(name: str) -> str:
    try:
        return type(get_backend(name)).__name__
    except BackendUnavailable as e:
        return f"unavailable: {e}"


def test_cuda_and_cupy_name_the_same_backend():
    assert _outcome("cuda") == _outcome("cupy")
    with pytest.raises(ValueError, match="cuda, the kernel family of cupy, selects cupy"):
        get_backend("tpu")


def test_auto_says_why_it_chose_its_backend(caplog):
    with caplog.at_level(logging.INFO, logger="aicfc"):
        prog = aicfc.compile(mlp(2, 3), backend="auto")
    assert prog.backend_reason.startswith(f"auto chose {prog.backend.name}")
    if prog.backend.name == "numpy":  # the reason is cupy's BackendUnavailable message
        assert (
            prog.backend_reason == f"auto chose numpy: {_outcome('cupy')[len('unavailable: ') :]}"
        )
    assert prog.backend_reason in caplog.text
    assert aicfc.compile(mlp(2, 3), backend="numpy").backend_reason == "requested"
    assert resolve_backend("numpy")[1] == "requested"


# --- a parameter the loss does not depend on -----------------------------------------


class Unused(nn.Module):
    """Holds a parameter its forward never reads (a typo in a user's emit)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(np.full(3, 2.0, np.float32))

    def emit(self, ctx: nn.EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        return x


def test_a_parameter_without_gradient_is_warned_about_once():
    aicfc.manual_seed(0)
    prog = aicfc.compile(nn.Sequential(nn.Linear(4, 3), Unused()), backend="numpy")
    x, y = data(8, 4, 3)
    with pytest.warns(UserWarning, match="parameter '1.scale' gets no gradient") as record:
        prog.step(x, y)
    assert len([w for w in record if "1.scale" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning for the same parameter
        prog.step(x, y)
        prog.step(x[:5], y[:5])  # another batch shape compiles again, still no warning
    assert np.array_equal(prog.parameters()["1.scale"], np.full(3, 2.0, np.float32))
    assert not np.array_equal(prog.parameters()["0.weight"], prog.model[0].weight.data)


# --- version ---------------------------------------------------------------------------


def test_version_is_the_installed_distributions():
    assert aicfc.__version__ == importlib.metadata.version("aicfc")
    assert aicfc.__version__[0].isdigit()
