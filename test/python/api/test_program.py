"""The Program API: step/predict, state dicts by name, mlir(stage), input errors, shared buffers."""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from support import rel_err

IN, HIDDEN, OUT = 12, 16, 5


def make_model(seed: int = 0) -> nn.Sequential:
    aicfc.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))


def batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, IN)).astype(np.float32), rng.integers(0, OUT, n)


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """relu(x W0^T + b0) W2^T + b2 in float64: the model's meaning, written independently."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    h = np.maximum(x @ p["0.weight"].T + p["0.bias"], 0.0)
    return h @ p["2.weight"].T + p["2.bias"]


@pytest.fixture
def prog():
    return aicfc.compile(make_model(), optimizer=optim.Adam(lr=1e-2), backend="numpy")


# --- predict, parameters --------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 64])
def test_predict_shape_and_values(prog, n):
    x, _ = batch(n, seed=n)
    out = prog.predict(x)
    assert out.shape == (n, OUT) and out.dtype == np.float32
    assert rel_err(out, forward(prog.parameters(), x)) < 1e-5


def test_parameters_start_at_the_model_weights_and_model_keeps_them(prog):
    model_sd = make_model().state_dict()
    assert list(prog.parameters()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for k, v in prog.parameters().items():
        np.testing.assert_array_equal(v, model_sd[k])
    prog.step(*batch(8))
    assert not np.array_equal(prog.parameters()["0.weight"], model_sd["0.weight"])
    np.testing.assert_array_equal(prog.model.state_dict()["0.weight"], model_sd["0.weight"])


def test_step_returns_the_loss_before_the_update(prog):
    x, y = batch(16)
    logits = forward(prog.parameters(), x)
    z = logits - logits.max(axis=1, keepdims=True)
    expected = float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(16), y]))
    loss = prog.step(x, y)
    assert isinstance(loss, float)
    assert abs(loss - expected) <= 1e-5 * expected


# --- state dicts -------------------------------------------------------------------


def test_state_dict_names_follow_torch_and_adam(prog):
    names = list(prog.state_dict())
    assert names[:4] == ["0.weight", "0.weight.exp_avg", "0.weight.exp_avg_sq", "0.weight.step"]
    assert len(names) == 16 + 5
    assert names[16:] == [f"optim.0.{h}" for h in ("lr", "beta1", "beta2", "eps", "weight_decay")]
    sgd = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.1, momentum=0.9), backend="numpy")
    assert list(sgd.state_dict())[:2] == ["0.weight", "0.weight.momentum_buffer"]
    plain = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.1), backend="numpy")
    assert list(plain.state_dict()) == [
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
        "optim.0.lr",
        "optim.0.momentum",
        "optim.0.weight_decay",
    ]
    assert float(plain.state_dict()["optim.0.lr"]) == 0.1


def test_state_dict_round_trip_continues_the_same_trajectory(prog):
    for s in range(3):
        prog.step(*batch(8, seed=s))
    saved = prog.state_dict()
    assert float(saved["0.weight.step"]) == 3.0
    fresh = aicfc.compile(make_model(seed=9), optimizer=optim.Adam(lr=1e-2), backend="numpy")
    fresh.load_state_dict(saved)
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v, saved[k])
    x, y = batch(8, seed=5)
    assert fresh.step(x, y) == prog.step(x, y)
    for k, v in prog.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[k], v, err_msg=k)


def test_state_dict_is_a_copy(prog):
    sd = prog.state_dict()
    sd["0.weight"][:] = 123.0
    assert not np.any(prog.state_dict()["0.weight"] == 123.0)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda sd: sd.pop("2.bias.exp_avg"), ["missing", "2.bias.exp_avg"]),
        (
            lambda sd: sd.__setitem__("fc9.weight", np.zeros(3, np.float32)),
            ["unexpected", "fc9.weight"],
        ),
        (
            lambda sd: sd.__setitem__("0.bias", np.zeros(HIDDEN + 1, np.float32)),
            ["0.bias", "[17]", "[16]"],
        ),
        (
            lambda sd: sd.__setitem__("0.bias", np.zeros(HIDDEN, np.float64)),
            ["0.bias", "float64", "float32"],
        ),
    ],
    ids=["missing", "unexpected", "shape", "dtype"],
)
def test_load_state_dict_errors_name_the_buffer_and_write_nothing(prog, edit, words):
    before = prog.state_dict()
    sd = {k: np.full_like(v, 7) for k, v in before.items()}
    edit(sd)
    with pytest.raises(aicfc.StoreError) as e:
        prog.load_state_dict(sd)
    for w in words:
        assert w in str(e.value)
    for k, v in prog.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_load_state_dict_non_strict_takes_params_only(prog):
    params = {k: np.full_like(v, 0.5) for k, v in prog.parameters().items()}
    prog.load_state_dict(params, strict=False)
    assert np.all(prog.parameters()["2.weight"] == 0.5)
    assert np.all(prog.state_dict()["2.weight.exp_avg"] == 0.0)


# --- input checks ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "words"),
    [
        (np.zeros((8, IN), np.float64), np.zeros(8, np.int64), ['"x"', "float32", "float64"]),
        (
            np.zeros((8, IN + 1), np.float32),
            np.zeros(8, np.int64),
            ['"x"', f"[N, {IN}]", f"[8, {IN + 1}]"],
        ),
        (np.zeros((8,), np.float32), np.zeros(8, np.int64), ['"x"', f"[N, {IN}]", "[8]"]),
        (np.zeros((8, IN), np.float32), np.zeros(8, np.float32), ['"y"', "integer", "float32"]),
        (np.zeros((8, IN), np.float32), np.zeros(7, np.int64), ['"y"', "[8]", "[7]"]),
        (np.zeros((8, IN), np.float32), np.full(8, OUT), ['"y"', f"[0, {OUT})", f"to {OUT}"]),
    ],
    ids=["x-dtype", "x-width", "x-rank", "y-float", "y-length", "y-range"],
)
def test_step_input_errors_name_the_input(prog, x, y, words):
    with pytest.raises(aicfc.InputError) as e:
        prog.step(x, y)
    for w in words:
        assert w in str(e.value)
    assert prog.compiled() == []  # nothing was built for a bad input


def test_predict_input_error_names_x(prog):
    with pytest.raises(aicfc.InputError, match=r'"x".*float32.*float64'):
        prog.predict(np.zeros((3, IN)))


def test_mse_target_must_match_the_output():
    p = aicfc.compile(make_model(), loss="mse", backend="numpy")
    x, _ = batch(4)
    with pytest.raises(aicfc.InputError, match=r'"y".*float32\[4, 5\].*float32\[4, 4\]'):
        p.step(x, np.zeros((4, 4), np.float32))
    assert np.isfinite(p.step(x, np.zeros((4, OUT), np.float32)))


def test_int32_and_int64_labels_give_the_same_step():
    x, y = batch(8)
    a = aicfc.compile(make_model(), backend="numpy")
    b = aicfc.compile(make_model(), backend="numpy")
    assert a.step(x, y.astype(np.int64)) == b.step(x, y.astype(np.int32))
    np.testing.assert_array_equal(a.parameters()["0.weight"], b.parameters()["0.weight"])


# --- lazy compilation, shared buffers --------------------------------------------


def test_smaller_last_batch_compiles_once_more_and_shares_params(prog):
    prog.step(*batch(8))
    w_after_8 = prog.parameters()["0.weight"]
    prog.step(*batch(3, seed=1))
    prog.step(*batch(8, seed=2))
    assert prog.compiled() == [("train_step", (8, IN)), ("train_step", (3, IN))]
    assert not np.array_equal(prog.parameters()["0.weight"], w_after_8)
    assert float(prog.state_dict()["0.weight.step"]) == 3.0  # all three steps hit one counter
    w8 = prog.executable("train_step", 8).buffer("0.weight")
    w3 = prog.executable("train_step", 3).buffer("0.weight")
    wp = prog.executable("predict", 5).buffer("0.weight")
    assert w8 is w3 is wp is prog.store["0.weight"]


def test_load_state_dict_writes_into_the_live_buffers(prog):
    prog.step(*batch(8))
    live = prog.executable("train_step").buffer("2.bias")
    prog.load_state_dict({"2.bias": np.arange(OUT, dtype=np.float32)}, strict=False)
    assert prog.executable("train_step").buffer("2.bias") is live
    np.testing.assert_array_equal(live, np.arange(OUT, dtype=np.float32))


# --- IR by stage -------------------------------------------------------------------

STAGE_MARKERS = {
    "graph": (["autodiff.backward", "graph.matmul", "graph.bias_add"], ["graph.gemm_epilogue"]),
    "fused": (["graph.gemm_epilogue", "autodiff.backward"], ["graph.bias_add", "graph.relu "]),
    "backward": (["autodiff.cross_entropy_grad", "autodiff.relu_grad"], ["autodiff.backward"]),
    "fused-backward": (["autodiff.gemm_epilogue_grad"], ["autodiff.relu_grad"]),
    "canonical": (["autodiff.adam_step"], ["autodiff.backward"]),
    "hoisted": (["autodiff.adam_step"], ["autodiff.backward"]),
    "exec": (["exec.program @train_step", "exec.copy"], ["func.func"]),
    "inplace": (['exec.launch "numpy.adam_step_out"'], ["exec.copy"]),
    "planned": (["exec.program @train_step arena"], ["func.func"]),
}


def test_mlir_every_stage(prog):
    prog.step(*batch(8))
    assert prog.stages == tuple(STAGE_MARKERS)
    for stage, (present, absent) in STAGE_MARKERS.items():
        text = prog.mlir(stage)
        for word in present:
            assert word in text, f"{stage}: {word!r} missing"
        for word in absent:
            assert word not in text, f"{stage}: {word!r} present"
        assert aicfc.print(aicfc.parse(text)) == text  # each stage is valid, printable IR


def test_mlir_errors(prog):
    with pytest.raises(ValueError, match="not compiled yet"):
        prog.mlir("graph")
    with pytest.raises(
        ValueError, match=r"unknown stage 'lowered'; stages: graph, fused, .*planned"
    ):
        prog.mlir("lowered")
    with pytest.raises(ValueError, match="unknown function 'forward'"):
        prog.mlir("graph", function="forward")
    assert "func.func @predict" in prog.mlir("graph", function="predict", batch_size=4)


# --- compile() arguments ------------------------------------------------------------


def test_compile_argument_errors():
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        aicfc.compile(make_model(), loss="hinge", backend="numpy")
    with pytest.raises(TypeError, match=r"aicfc\.optim"):
        aicfc.compile(make_model(), optimizer=object(), backend="numpy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        aicfc.compile(make_model(), backend="tpu")


def test_cupy_backend_without_gpu_is_a_clear_error():
    from aicfc.backends import get_backend
    from aicfc.runtime.errors import BackendUnavailable

    try:
        get_backend("cupy")
    except BackendUnavailable:
        pass
    else:
        pytest.skip("a GPU is usable here; this test covers machines without one")
    with pytest.raises(aicfc.BackendUnavailable, match="cupy"):
        aicfc.compile(make_model(), backend="cupy")


def test_dropout_step_advances_rng_offset_and_predict_ignores_dropout():
    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Dropout(0.5), nn.Linear(HIDDEN, OUT))
    p = aicfc.compile(model, backend="numpy")
    x, y = batch(8)
    params = {k.replace("3.", "2."): v for k, v in p.parameters().items()}
    assert rel_err(p.predict(x), forward(params, x)) < 1e-5  # eval mode: dropout is the identity
    start = int(p.state_dict()["rng.offset"])
    assert start == nn.dropout_offset(model) and start >> 32 == model[2].stream
    p.step(x, y)
    p.step(x, y)
    assert int(p.state_dict()["rng.offset"]) == start + 2
    assert "graph.dropout" in p.mlir("graph") and "graph.dropout" not in p.mlir(
        "graph", function="predict", batch_size=8
    )


def test_dropout_step_loss_uses_the_philox_mask_at_the_current_offset():
    """Step k's loss is the cross-entropy with the mask of (the layer's key, the initial
    rng.offset + k); the key of a layer without a seed is a hash of its name ("2")."""
    from aicfc.runtime.reference import dropout_keep

    aicfc.manual_seed(0)
    drop = nn.Dropout(0.25)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), drop, nn.Linear(HIDDEN, OUT))
    p = aicfc.compile(model, optimizer=optim.SGD(lr=0.0), backend="numpy")  # params stay fixed
    x, y = batch(8)
    w = {k: v.astype(np.float64) for k, v in p.parameters().items()}
    h = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0.0)
    losses = []
    start = nn.dropout_offset(model)
    for offset in (start, start + 1):
        keep = dropout_keep(h.size, offset, 0.25, nn.dropout_key("2")).reshape(h.shape)
        z = (h * keep / 0.75) @ w["3.weight"].T + w["3.bias"]
        z = z - z.max(axis=1, keepdims=True)
        losses.append(float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(8), y])))
    assert losses[0] != losses[1]  # two different masks
    for expected in losses:
        assert abs(p.step(x, y) - expected) <= 1e-5 * expected
