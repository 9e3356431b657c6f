"""The fused MLP train step (kernels/mlp_fused.cu, cuda.mlp_train_step_f32) on the GPU.

aicfc-fuse-train-step makes the whole step one launch where every width and the batch
are at most 256; the program then runs one persistent kernel (grid barriers between
its phases) inside the captured CUDA graph. Each case trains the same model on the
same fresh random batches on the cupy backend and on the NumPy backend (the unfused
program, the reference) for 5 steps, and compares every parameter and optimizer state
and each step's loss by the norm-wise relative error, stated tolerance 1e-4 (fp32:
the products sum in another order; Adam's update is the reference's rounding). The
small config of tools/bench_train_step.py (batch 128, 784-256-256-10), the ragged
shapes (widths 10, 100, 255, 256; batches 1, 7, 128, 256), replayed graphs fed with
device batches, and the selection boundary: a width or batch of 257 runs the
per-layer kernels, against the same reference.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.optim import lr_scheduler
from gpu.gpu_support import gpu, rel_err, with_fused_step

pytestmark = gpu

FUSED = "cuda.mlp_train_step_f32"
TOL = 1e-4
STEPS = 5


def mlp(widths: tuple[int, ...], act: type[nn.Module] = nn.ReLU) -> nn.Module:
    rng = np.random.default_rng(sum(widths))
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        lin = nn.Linear(a, b)
        bound = 1.0 / np.sqrt(a)
        lin.load_state_dict(
            {
                "weight": rng.uniform(-bound, bound, (b, a)).astype(np.float32),
                "bias": rng.uniform(-bound, bound, b).astype(np.float32),
            }
        )
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def batches(batch: int, widths: tuple[int, ...], steps: int = STEPS):
    rng = np.random.default_rng(batch + len(widths))
    for _ in range(steps):
        x = rng.standard_normal((batch, widths[0])).astype(np.float32)
        yield x, rng.integers(0, widths[-1], batch)


def compare(gpu_prog, cpu_prog, gpu_losses, cpu_losses) -> None:
    assert rel_err(np.array(gpu_losses), np.array(cpu_losses)) <= TOL
    want, got = cpu_prog.state_dict(), gpu_prog.state_dict()
    assert want.keys() == got.keys()
    for name in want:
        assert rel_err(got[name], want[name]) <= TOL, name


def train(batch, widths, act=nn.ReLU, optimizer=None, device_batches=False, schedule=None):
    make_opt = optimizer or (lambda: optim.Adam(lr=1e-3))
    kw = {"lr_scheduler": schedule()} if schedule else {}
    gpu_prog = with_fused_step(
        aicfc.compile(mlp(widths, act), optimizer=make_opt(), backend="cupy", **kw)
    )
    kw = {"lr_scheduler": schedule()} if schedule else {}
    cpu_prog = aicfc.compile(mlp(widths, act), optimizer=make_opt(), backend="numpy", **kw)
    gpu_losses, cpu_losses = [], []
    for x, y in batches(batch, widths):
        if device_batches:
            import cupy

            loss = gpu_prog.step(cupy.asarray(x), cupy.asarray(y.astype(np.int32)), sync=False)
            gpu_losses.append(float(loss))
        else:
            gpu_losses.append(gpu_prog.step(x, y))
        cpu_losses.append(cpu_prog.step(x, y))
    compare(gpu_prog, cpu_prog, gpu_losses, cpu_losses)
    return gpu_prog


def test_small_config_runs_as_one_fused_kernel_and_matches_numpy():
    prog = train(128, (784, 256, 256, 10))
    assert prog.executable().kernels == (FUSED,)


def test_small_config_replayed_with_device_batches_matches_numpy():
    prog = train(128, (784, 256, 256, 10), device_batches=True)
    assert prog.executable().kernels == (FUSED,)


@pytest.mark.parametrize(
    ("batch", "widths", "act"),
    [
        (1, (10, 256, 10), nn.ReLU),
        (7, (100, 255, 256, 10), nn.ReLU),
        (128, (255, 100, 10), nn.GELU),
        (256, (784, 256, 256, 10), nn.ReLU),
        (7, (10, 100, 255, 256, 100, 10), nn.SiLU),
    ],
    ids=[
        "1x10-256-10",
        "7x100-255-256-10",
        "128x255-100-10-gelu",
        "256x784-256-256-10",
        "7x6-layers-silu",
    ],
)
def test_ragged_shapes_match_numpy(batch, widths, act):
    prog = train(batch, widths, act)
    assert prog.executable().kernels == (FUSED,)


def test_adamw_with_weight_decay_and_an_lr_schedule_match_numpy():
    """The hyperparameters are device state read at every replay: a schedule's new lr
    reaches the fused kernel as it reaches the per-layer ones."""
    prog = train(
        64,
        (32, 64, 10),
        optimizer=lambda: optim.AdamW(lr=3e-3, weight_decay=0.1),
        schedule=lambda: lr_scheduler.StepLR(step_size=2, gamma=0.5),
    )
    assert prog.executable().kernels == ("cuda.lr_schedule", FUSED)


@pytest.mark.parametrize(
    ("batch", "widths"),
    [(128, (784, 257, 256, 10)), (257, (784, 256, 10))],
    ids=["width-257", "batch-257"],
)
def test_past_256_the_per_layer_kernels_run_and_match_numpy(batch, widths):
    prog = train(batch, widths)
    kernels = prog.executable().kernels
    assert FUSED not in kernels and len(kernels) > 5
