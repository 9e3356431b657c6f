"""fp16 dynamic loss scaling (aicfc-loss-scale) with torch.amp.GradScaler's semantics, on the
NumPy backend: the scale is state (`amp.scale`, init 2^16; `amp.growth_tracker`), found-inf
is computed inside the step, an overflowing step leaves every param and optimizer state
bit-identical and halves the scale, 2,000 good steps in a row double it, and all-zero
gradients leave the params finite (Adam's eps is added in fp32)."""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim


def tiny(loss: str = "mse", optimizer: optim.Optimizer | None = None) -> aicfc.Program:
    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))
    return aicfc.compile(
        model,
        loss=loss,
        optimizer=optimizer or optim.Adam(lr=1e-3),
        backend="numpy",
        precision="fp16",
        cache_dir=False,
    )


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 2)).astype(np.float32)
    return x, (0.5 * rng.standard_normal((4, 2))).astype(np.float32)


def test_the_scale_starts_at_2_16_and_is_state() -> None:
    prog = tiny()
    state = prog.state_dict()
    assert float(state["amp.scale"]) == 65536.0 and float(state["amp.growth_tracker"]) == 0.0
    x, y = data()
    prog.step(x, y)
    ir = prog.mlir("exec")
    for kernel in ("numpy.unscale_grad", "numpy.amp_select", "numpy.update_scale"):
        assert kernel in ir


def test_an_injected_inf_skips_the_update_and_halves_the_scale() -> None:
    prog = tiny()
    x, y = data()
    for _ in range(3):
        prog.step(x, y)
    before = prog.state_dict()
    tracker = float(before["amp.growth_tracker"])
    assert tracker > 0  # good steps were counted, so the reset below is visible
    bad = x.copy()
    bad[1, 0] = np.inf
    with np.errstate(invalid="ignore"):  # inf - inf in the forward: NaN, as on the GPU
        prog.step(bad, y)
    after = prog.state_dict()
    for name, value in before.items():
        if not name.startswith("amp."):
            assert after[name].tobytes() == value.tobytes(), f"{name} changed on a skipped step"
    assert float(after["amp.scale"]) == float(before["amp.scale"]) / 2
    assert float(after["amp.growth_tracker"]) == 0.0
    # the next good step updates again
    prog.step(x, y)
    assert not np.array_equal(prog.state_dict()["0.weight"], before["0.weight"])


def test_2000_good_steps_double_the_scale() -> None:
    prog = tiny(optimizer=optim.SGD(lr=1e-3))
    x, y = data(1)
    # a scale no gradient of this model overflows in fp16 with (2^10 * |dW| << 65504)
    prog.load_state_dict({"amp.scale": np.float32(1024.0)}, strict=False)
    for _ in range(1999):
        prog.step(x, y)
    state = prog.state_dict()
    # 1,999 consecutive good steps (an overflow would have reset the tracker)
    assert float(state["amp.growth_tracker"]) == 1999.0
    assert float(state["amp.scale"]) == 1024.0
    prog.step(x, y)
    state = prog.state_dict()
    assert float(state["amp.scale"]) == 2048.0
    assert float(state["amp.growth_tracker"]) == 0.0


def test_all_zero_gradients_leave_params_finite() -> None:
    prog = tiny()
    # zero params and Adam state; the scale and the hyperparameters (eps) keep their values
    keep = ("amp.", "optim.")
    zeros = {k: np.zeros_like(v) for k, v in prog.state_dict().items() if not k.startswith(keep)}
    prog.load_state_dict(zeros, strict=False)
    x = np.zeros((4, 2), np.float32)
    for _ in range(5):
        assert prog.step(x, np.zeros((4, 2), np.float32)) == 0.0
    state = prog.state_dict()
    for name, value in state.items():
        assert np.isfinite(value).all(), name
    assert float(state["0.weight.step"]) == 5.0  # zero gradients are finite: not skipped
    assert float(state["amp.growth_tracker"]) == 5.0
    np.testing.assert_array_equal(state["0.weight"], 0.0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fp16_checkpoints_load_elsewhere_without_the_scale(precision: str) -> None:
    prog = tiny()
    x, y = data()
    prog.step(x, y)
    other = aicfc.compile(
        nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)),
        loss="mse",
        backend="numpy",
        precision=precision,
        cache_dir=False,
    )
    keys = other.load_state_dict(prog.state_dict(), strict=False)
    assert sorted(keys.unexpected_keys) == ["amp.growth_tracker", "amp.scale"]
    assert keys.missing_keys == []
    np.testing.assert_array_equal(other.state_dict()["0.weight"], prog.state_dict()["0.weight"])


@pytest.mark.parametrize(
    ("scale", "tracker", "found"),
    [(65536.0, 0.0, 0.0), (65536.0, 7.0, 1.0), (65536.0, 1999.0, 0.0), (3e38, 1999.0, 0.0),
     (1.0, 1999.0, 1.0)],
)  # fmt: skip
def test_update_scale_is_torchs_amp_update_scale(scale: float, tracker: float, found: float):
    """The reference against torch._amp_update_scale_ (CPU): the 3e38 case keeps its scale
    where doubling it would overflow to inf (which would then skip every later step)."""
    import torch

    from aicfc.dialects import autodiff as ad
    from aicfc.runtime import reference

    s, t = torch.tensor([scale]), torch.tensor([tracker], dtype=torch.int32)
    torch._amp_update_scale_(s, t, torch.tensor([found]), 2.0, 0.5, 2000)
    ins = [np.asarray(v, np.float32) for v in (scale, tracker, found)]
    got_s, got_t = reference.REFERENCE[ad.UpdateScaleOp](*ins, growth_interval=2000)
    assert (float(got_s), float(got_t)) == (float(s[0]), float(t[0]))
