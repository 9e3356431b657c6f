"""The training loop inside one captured CUDA graph (docs/design.md#hyperparameters-as-device-state,
docs/design.md#schedules-in-the-graph, docs/design.md#complete-checkpoints).

- A learning rate set through `Program.param_groups` after capture is read by the same
  graph object at its next replay (no re-capture), on every compiled batch shape.
- A schedule, clipping, 3-step accumulation and dropout all run inside the captured
  step: replays equal the NumPy backend within 1e-4 (norm-wise, the CuPy-vs-NumPy
  tolerance of test_cupy_backend_gpu.py) and the counters exactly.
- A checkpoint saved mid-accumulation and loaded into a Program built under another
  manual_seed continues bit-identically to the uninterrupted GPU run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import aicfc
from aicfc import nn, optim
from aicfc.optim import lr_scheduler
from gpu.gpu_support import gpu, rel_err

pytestmark = gpu

IN, HIDDEN, OUT, BATCH = 64, 96, 10, 48


def make_model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    aicfc.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(IN, HIDDEN), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(HIDDEN, OUT))


def batches(n: int, rows: int = BATCH, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((rows, IN)).astype(np.float32), rng.integers(0, OUT, rows))
        for _ in range(n)
    ]


def full(backend: str, seed: int = 0) -> aicfc.Program:
    schedule = lr_scheduler.SequentialLR(
        [
            lr_scheduler.LinearLR(start_factor=0.1, total_iters=3),
            lr_scheduler.CosineAnnealingLR(T_max=10),
        ],
        milestones=[3],
    )
    return aicfc.compile(
        make_model(seed, dropout=0.25),
        optimizer=optim.AdamW(lr=3e-3),
        backend=backend,
        lr_scheduler=schedule,
        clip_grad_norm=0.5,
        accumulate=3,
    )


def flat(params: dict[str, Any]) -> np.ndarray:
    return np.concatenate([params[k].ravel() for k in sorted(params)])


def test_an_lr_set_after_capture_is_read_by_the_same_graph_on_every_batch_shape():
    prog = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.1), backend="cupy")
    shapes = {48: batches(3, 48, seed=2), 20: batches(3, 20, seed=3)}
    graphs = {}
    for rows, data in shapes.items():
        for x, y in data[:2]:
            prog.step(x, y)
        exe = prog.executable()
        assert exe.captured
        graphs[rows] = (exe, dict(exe.graphs))
    prog.param_groups[0]["lr"] = 0.0
    for rows, data in shapes.items():
        before = prog.parameters()
        prog.step(*data[2])
        after = prog.parameters()
        assert all(np.array_equal(before[k], after[k]) for k in before), f"{rows} rows, lr 0"
        exe, captured = graphs[rows]
        assert prog.executable() is exe
        assert exe.graphs.keys() == captured.keys()
        assert all(exe.graphs[k] is captured[k] for k in captured), "no re-capture"
    # The lr back at 0.1 on the same graph: the update equals the NumPy backend's.
    prog.param_groups[0]["lr"] = 0.1
    ref = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.1), backend="numpy")
    ref.load_state_dict(prog.state_dict())
    x, y = batches(1, 48, seed=4)[0]
    prog.step(x, y)
    ref.step(x, y)
    assert rel_err(flat(prog.parameters()), flat(ref.parameters())) < 1e-5
    exe, captured = graphs[48]
    assert all(exe.graphs[k] is captured[k] for k in captured)


def test_schedule_clipping_accumulation_and_dropout_run_inside_the_captured_graph():
    data = batches(12)
    g, n = full("cupy"), full("numpy")
    lg = [g.step(x, y) for x, y in data]
    ln = [n.step(x, y) for x, y in data]
    exe = g.executable()
    assert exe.replays == len(data) - 1 and len(exe.graphs) == 1
    kernels = " ".join(exe.kernels)
    for name in ("lr_schedule", "clip_grad_norm", "accumulation_step", "accumulate_grad"):
        assert name in kernels, f"{name} is a kernel of the captured step"
    assert rel_err(np.array(lg), np.array(ln)) < 1e-4
    assert rel_err(flat(g.parameters()), flat(n.parameters())) < 1e-4
    sg, sn = g.state_dict(), n.state_dict()
    for k in ("lr_scheduler.last_epoch", "grad_accum.micro_step", "rng.offset", "0.weight.step"):
        np.testing.assert_array_equal(sg[k], sn[k])
    assert int(sg["lr_scheduler.last_epoch"]) == 4
    assert abs(g.last_grad_norm - n.last_grad_norm) <= 1e-4 * n.last_grad_norm


def test_a_checkpoint_mid_accumulation_resumes_bit_identically_on_the_gpu(tmp_path):
    data = batches(14, seed=5)
    whole = full("cupy")
    want = [whole.step(x, y) for x, y in data]
    first = full("cupy")
    for x, y in data[:7]:  # 7 % 3 = 1: inside an accumulation window, inside the warm-up
        first.step(x, y)
    path = tmp_path / "ckpt.safetensors"
    first.save(path)
    resumed = full("cupy", seed=77)
    resumed.step(*data[0])  # captured on its own weights before the load
    resumed.load(path)
    got = [resumed.step(x, y) for x, y in data[7:]]
    assert got == want[7:]
    ours, theirs = resumed.state_dict(), whole.state_dict()
    assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)
