"""The digits example (examples/train_digits.py) on the GPU against the NumPy backend.

Same data, model, seed and batch order on both backends, 5 epochs of Adam
(lr=1e-3, batch 64; each epoch ends with a batch of 3, a second compiled
program sharing the parameters). Stated tolerances: the per-step loss
trajectory within 1e-3 norm-wise relative error of NumPy's, and the test
accuracy equal within one image of 450.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

import aicfc
from aicfc import optim
from gpu.gpu_support import gpu, rel_err

pytestmark = gpu

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_digits.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(backend: str, epochs: int = 5) -> tuple[list[float], float]:
    ex = example()
    x_train, x_test, y_train, y_test = ex.load_data()
    aicfc.manual_seed(0)
    prog = aicfc.compile(ex.make_model(), optimizer=optim.Adam(lr=1e-3), backend=backend)
    assert prog.backend.name == backend
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(x_train))
        for i in range(0, len(order), 64):
            idx = order[i : i + 64]
            losses.append(prog.step(x_train[idx], y_train[idx]))
    accuracy = float(np.mean(prog.predict(x_test).argmax(axis=1) == y_test))
    return losses, accuracy


def test_digits_on_the_gpu_matches_numpy():
    gpu_losses, gpu_acc = train("cupy")
    cpu_losses, cpu_acc = train("numpy")
    assert len(gpu_losses) == len(cpu_losses) == 5 * 22
    assert rel_err(np.array(gpu_losses), np.array(cpu_losses)) < 1e-3
    assert abs(gpu_acc - cpu_acc) <= 1 / 450
    assert gpu_acc > 0.9
