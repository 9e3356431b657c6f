"""Device inputs copied inside the replayed graph, and preallocated outputs, on the GPU
(runtime/cuda/step_io.py, CupyExecutable._step).

A loop over the same device arrays (refilled or not) gets a graph whose first nodes
copy from them; a loop over fresh arrays keeps the copies outside; both train exactly
like host batches (the same kernels on the same values: losses and params equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicfc import nn, optim
from aicfc.program import Program
from gpu.gpu_support import gpu

pytestmark = gpu

IN, HIDDEN, OUT, BATCH = 64, 96, 10, 48


def program() -> Program:
    from aicfc.runtime.cuda.backend import CupyBackend

    rng = np.random.default_rng(3)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))
    model.load_state_dict(
        {
            "0.weight": rng.uniform(-0.1, 0.1, (HIDDEN, IN)).astype(np.float32),
            "0.bias": rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32),
            "2.weight": rng.uniform(-0.1, 0.1, (OUT, HIDDEN)).astype(np.float32),
            "2.bias": rng.uniform(-0.1, 0.1, OUT).astype(np.float32),
        }
    )
    return Program(model, "cross_entropy", optim.Adam(lr=3e-3), CupyBackend())


def batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [
        (
            rng.standard_normal((BATCH, IN)).astype(np.float32),
            rng.integers(0, OUT, BATCH).astype(np.int32),
        )
        for _ in range(n)
    ]


def same_params(a: Program, b: Program) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(np.array_equal(sa[n], sb[n]) for n in sa)


def sources_graphs(p: Program) -> list[Any]:
    return [k for k in p.executable().graphs if k[2]]


def test_refilled_device_buffers_are_copied_inside_the_graph_and_train_like_host_batches():
    import cupy

    data = batches(6)
    ref, dev = program(), program()
    want = [ref.step(x, y) for x, y in data]
    xd, yd = cupy.empty((BATCH, IN), np.float32), cupy.empty(BATCH, np.int32)
    got = []
    for x, y in data:
        xd.set(x)  # the caller's own buffers, refilled each step
        yd.set(y)
        got.append(float(dev.step(xd, yd, sync=False)))
    assert got == want and same_params(ref, dev)
    keys = sources_graphs(dev)
    assert len(keys) == 1 and dict(keys[0][2]) == {"x": xd.data.ptr, "y": yd.data.ptr}
    assert dev.executable().in_graph_copies.captures == 1


def test_fresh_device_arrays_keep_the_copies_outside_the_graph():
    import cupy

    data = batches(5)
    ref, dev = program(), program()
    want = [ref.step(x, y) for x, y in data]
    held = [(cupy.asarray(x), cupy.asarray(y)) for x, y in data]  # all alive: new addresses
    got = [float(dev.step(x, y, sync=False)) for x, y in held]
    assert got == want and same_params(ref, dev)
    assert sources_graphs(dev) == []


def test_alternating_buffers_and_a_replay_after_in_graph_copies():
    import cupy

    data = batches(8)
    ref, dev = program(), program()
    pairs = [(cupy.empty((BATCH, IN), np.float32), cupy.empty(BATCH, np.int32)) for _ in "ab"]
    want, got = [], []
    for k, (x, y) in enumerate(data):
        xd, yd = pairs[0 if k < 3 else k % 2]  # a, a, a, then b, a, b, a, b
        xd.set(x)
        yd.set(y)
        got.append(float(dev.step(xd, yd, sync=False)))
        want.append(ref.step(x, y))
    assert got == want and same_params(ref, dev)
    # replay() reruns the step on what the fixed input buffers hold: the last batch
    exe = dev.executable()
    exe.replay(1)
    ref.step(*data[-1])
    exe.backend.synchronize()
    assert same_params(ref, dev)


def test_async_losses_are_distinct_views_that_later_steps_never_overwrite():
    import cupy

    data = batches(300)  # more than one block of 256 losses
    ref, dev = program(), program()
    xd, yd = cupy.empty((BATCH, IN), np.float32), cupy.empty(BATCH, np.int32)
    held = []
    for x, y in data:
        xd.set(x)
        yd.set(y)
        held.append(dev.step(xd, yd, sync=False))
    want = [ref.step(x, y) for x, y in data]
    assert [float(h) for h in held] == want
    assert len({int(h.data.ptr) for h in held}) == len(held)
