"""Mixed-precision training of the digits MLP on the NumPy backend (issue 13).

The MLP 64-128-128-10 (ReLU, Adam lr 1e-3, batch 64) trains 200 steps on the first 1,400
digits from one init and one batch order three ways: aicfc fp32, aicfc bf16
(precision="bf16": aicfc-autocast, ml_dtypes rounding) and torch with
torch.autocast("cpu", dtype=torch.bfloat16) (the oracle of mixed precision: its linear
layers run in bf16, cross_entropy in fp32). Asserted: every step's loss of the bf16
program within 2 % of the fp32 program's and of torch autocast's, and the test accuracy
on the 397 held-out digits not more than 0.5 percentage points below either. Measured
when written: largest step difference 1.3 % against fp32, 0.5 % against torch;
accuracies equal; with aicfc-fold-casts, bf16 is 2 digits (0.5 points) above both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import aicfc
from aicfc import nn, optim
from test_torch_training_loop import torch_twin

STEPS = 200
BATCH = 64
LOSS_TOL = 0.02
ACC_TOL = 0.005
TRAIN = 1400


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def mlp() -> nn.Sequential:
    aicfc.manual_seed(0)
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)
    )


def batches(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.choice(n, BATCH, replace=False) for _ in range(STEPS)]


def train_aicfc(digits, precision: str) -> tuple[np.ndarray, float, aicfc.Program]:
    x, y = digits
    prog = aicfc.compile(
        mlp(), optimizer=optim.Adam(lr=1e-3), backend="numpy", precision=precision, cache_dir=False
    )
    losses = np.array([prog.step(x[i], y[i]) for i in batches(TRAIN)])
    accuracy = float((prog.predict(x[TRAIN:]).argmax(1) == y[TRAIN:]).mean())
    return losses, accuracy, prog


def train_torch_autocast(digits) -> tuple[np.ndarray, float]:
    x, y = digits
    model = torch_twin(mlp())  # the same init
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for i in batches(TRAIN):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(torch.from_numpy(x[i]))
            loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y[i]))
        assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        accuracy = float((model(torch.from_numpy(x[TRAIN:])).argmax(1).numpy() == y[TRAIN:]).mean())
    return np.array(losses), accuracy


def test_bf16_digits_train_like_fp32_and_torch_autocast(digits) -> None:
    l32, a32, _ = train_aicfc(digits, "fp32")
    l16, a16, prog = train_aicfc(digits, "bf16")
    lt, at = train_torch_autocast(digits)
    assert prog.precision == "bf16"
    assert l32[-1] < 0.3 * l32[0]  # it trained
    # the bf16 program really rounds: its losses are not the fp32 ones
    assert np.abs(l16 - l32).max() > 1e-6
    against_fp32 = np.abs(l16 - l32) / l32
    against_torch = np.abs(l16 - lt) / lt
    assert against_fp32.max() <= LOSS_TOL, f"step {against_fp32.argmax()}: {against_fp32.max():.3%}"
    assert against_torch.max() <= LOSS_TOL, (
        f"step {against_torch.argmax()}: {against_torch.max():.3%}"
    )
    # "reaches the fp32 test accuracy within 0.5 points" (issue 13): not worse by more.
    # With the gradients' casts folded (aicfc-fold-casts: dW and dbias are the unrounded
    # fp32 sums, where torch autocast rounds them to bf16), bf16 scores 2 of the 397 test
    # digits (0.504 points) above both fp32 and torch autocast here.
    assert a32 - a16 <= ACC_TOL, (a16, a32)
    assert at - a16 <= ACC_TOL, (a16, at)
    # the masters stay fp32, and so does Adam's state (the hyperparameters are f64 0-d
    # state, `optim.<g>.<key>`, whatever the precision)
    adam = ("", ".exp_avg", ".exp_avg_sq", ".step")
    names = [p + suffix for p in prog.param_names for suffix in adam]
    state = prog.state_dict()
    assert all(state[n].dtype == np.float32 for n in names), {n: state[n].dtype for n in names}
