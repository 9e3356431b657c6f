"""BufferStore: named param/state buffers, strict state_dict round trips that never rebind."""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.backends import get_backend
from aicfc.runtime.errors import StoreError

F32 = np.dtype(np.float32)


@pytest.fixture
def store():
    s = get_backend("numpy").create_store()
    s.declare("fc.weight", (2, 3), F32, "param")
    s.declare("fc.bias", (2,), F32, "param")
    s.declare("fc.weight.step", (), F32, "state")
    return s


def random_state(rng):
    return {
        "fc.weight": rng.standard_normal((2, 3)).astype(np.float32),
        "fc.bias": rng.standard_normal(2).astype(np.float32),
        "fc.weight.step": np.asarray(rng.integers(1, 100), np.float32),
    }


def test_declare_creates_zero_filled_buffers_and_returns_the_existing_one(store):
    w = store["fc.weight"]
    assert w.shape == (2, 3) and w.dtype == F32 and not w.any()
    assert store.declare("fc.weight", (2, 3), F32, "param") is w
    assert len(store) == 3 and "fc.bias" in store and list(store) == store.names()
    assert store.names("state") == ["fc.weight.step"]


@pytest.mark.parametrize(
    ("shape", "dtype", "role", "message"),
    [
        (
            (3, 2),
            F32,
            "param",
            r"a param of float32\[2, 3\] in the store, but the program declares "
            r"a param of float32\[3, 2\]",
        ),
        ((2, 3), np.dtype(np.float64), "param", ".* declares a param of float64"),
        ((2, 3), F32, "state", ".* declares a state of float32"),
    ],
)
def test_declare_mismatch_names_the_buffer(store, shape, dtype, role, message):
    with pytest.raises(StoreError, match='buffer "fc.weight" is ' + message):
        store.declare("fc.weight", shape, dtype, role)


def test_inputs_and_tmps_are_not_stored(store):
    with pytest.raises(StoreError, match='buffer "x": role input is not stored'):
        store.declare("x", (2,), F32, "input")
    with pytest.raises(StoreError, match='no buffer "x" in the store'):
        store["x"]


def test_state_dict_round_trip_writes_into_the_same_arrays(store):
    rng = np.random.default_rng(7)
    arrays = {n: store[n] for n in store}
    state = random_state(rng)
    store.load_state_dict(state)
    for name, value in state.items():
        assert store[name] is arrays[name]
        np.testing.assert_array_equal(store[name], value)
    saved = store.state_dict()
    assert set(saved) == set(state)
    for name in saved:
        np.testing.assert_array_equal(saved[name], state[name])
        assert not np.shares_memory(saved[name], store[name])  # copies, not views
    saved["fc.bias"][:] = 99.0
    assert not (store["fc.bias"] == 99.0).any()
    assert list(store.state_dict("param")) == ["fc.weight", "fc.bias"]


def test_load_state_dict_is_strict_about_names(store):
    rng = np.random.default_rng(8)
    state = random_state(rng)
    extra = {**state, "fc2.weight": np.zeros((1,), np.float32)}
    with pytest.raises(StoreError, match=r"unexpected buffers: fc2\.weight"):
        store.load_state_dict(extra)
    partial = {k: v for k, v in state.items() if k != "fc.bias"}
    with pytest.raises(StoreError, match=r"missing buffers: fc\.bias"):
        store.load_state_dict(partial)
    assert not store["fc.weight"].any()  # nothing was written by the refused loads
    store.load_state_dict(partial, strict=False)
    np.testing.assert_array_equal(store["fc.weight"], state["fc.weight"])
    assert not store["fc.bias"].any()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            np.zeros((3, 2), np.float32),
            r'buffer "fc.weight" is float32\[2, 3\], got float32\[3, 2\]',
        ),
        (
            np.zeros((2, 3), np.float64),
            r'buffer "fc.weight" is float32\[2, 3\], got float64\[2, 3\]',
        ),
    ],
)
def test_load_state_dict_checks_shape_and_dtype_before_writing_anything(store, bad, message):
    rng = np.random.default_rng(9)
    state = random_state(rng)
    state["fc.weight"] = bad
    with pytest.raises(StoreError, match=message):
        store.load_state_dict(state)
    assert not store["fc.bias"].any()
