"""Data parallelism on the CPU: N simulated replicas equal one process at N times the batch.

The loss is a mean over the batch, so the mean of N shards' gradients is the gradient
of the whole batch: N replicas with batch B each (aicfc-data-parallel's mean
all-reduce, runtime/numpy/replicas.py) must train exactly like one program with batch
N*B, up to fp32 rounding (the sums run in another order), and every replica must hold
the same bits. Without the all-reduce they must not (the control that shows the
comparison can fail).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from aicfc import nn, optim
from aicfc.builder import build_train_step, initial_values
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.passes.pipelines import run_steps, train_pipeline, with_data_parallel
from aicfc.runtime.collectives import CollectiveError, ThreadGroup, reduce_arrays
from aicfc.runtime.errors import ExecError
from aicfc.runtime.numpy.backend import NumpyBackend
from aicfc.runtime.numpy.replicas import Replicas
from distributed_worker import CLASSES, IN, make_model
from support import rel_err

STEPS = 20
SHARD = 8
TOL = 5e-6
"""max|replicas - single| / max|single| over every param after 20 Adam steps: fp32
rounding of gradients summed in another order, through Adam's normalisation (measured
3.2e-7 for N = 2 and 3.1e-7 for N = 4 here)."""


def model(seed: int = 0) -> nn.Module:
    """12-32-32-5 with ReLU and GELU: the model the launched ranks train too."""
    return make_model(seed)


def program(
    m: nn.Module, opt: optim.Optimizer, batch: int, world: int | None, bucket_mb: float = 25.0
) -> ex.ProgramOp:
    steps = train_pipeline("numpy")
    if world is not None:
        steps = with_data_parallel(steps, world, bucket_mb)
    module = ModuleOp([build_train_step(m, "cross_entropy", opt, (batch, IN), np.float32)])
    run_steps(make_context(), module, steps)
    return next(op for op in module.ops if isinstance(op, ex.ProgramOp))


def batches(n: int, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (
            rng.standard_normal((n, IN)).astype(np.float32),
            rng.integers(0, CLASSES, n).astype(np.int32),
        )
        for _ in range(STEPS)
    ]


def train_single(m: nn.Module, opt: optim.Optimizer, data: list) -> tuple[dict, list[float]]:
    backend = NumpyBackend()
    store = backend.create_store()
    exe = backend.load(program(m, opt, len(data[0][1]), None), store)
    store.load_state_dict(initial_values(m, opt))
    losses = [float(exe.run({"x": x, "y": y})["loss"]) for x, y in data]
    return store.state_dict(), losses


def shards(x: np.ndarray, y: np.ndarray, world: int) -> list[dict[str, np.ndarray]]:
    return [
        {"x": x[r * SHARD : (r + 1) * SHARD], "y": y[r * SHARD : (r + 1) * SHARD]}
        for r in range(world)
    ]


@pytest.mark.parametrize("bucket_mb", [25.0, 0.004], ids=["one_bucket", "several_buckets"])
@pytest.mark.parametrize("world", [2, 4])
def test_replicas_equal_one_process_at_world_times_the_batch(world: int, bucket_mb: float) -> None:
    m, opt = model(), optim.Adam(lr=1e-2)
    data = batches(world * SHARD)
    want, want_losses = train_single(m, opt, data)
    prog = program(m, opt, SHARD, world, bucket_mb)
    reduces = [o for o in prog.graph().block.ops if isinstance(o, ex.AllReduceOp)]
    # 0.004 MiB = 4194 bytes: the last layer's bias and weight, the middle bias and weight
    # (4884 bytes) close the first bucket; the first layer's two tensors make the second.
    want_sizes = [6] if bucket_mb == 25.0 else [4, 2]
    assert [len(r.tensors) for r in reduces] == want_sizes
    replicas = Replicas(prog, world, state=initial_values(m, opt))
    losses = []
    for x, y in data:
        outs = replicas.run(shards(x, y, world))
        losses.append(float(np.mean([o["loss"] for o in outs], dtype=np.float64)))
    got = replicas.state_dicts()
    for r in range(1, world):  # the replicas stay identical, bit for bit
        for name in want:
            np.testing.assert_array_equal(got[r][name], got[0][name], err_msg=f"rank {r} {name}")
    for name, value in want.items():
        assert rel_err(got[0][name], value) < TOL, (name, rel_err(got[0][name], value))
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert want["0.weight.step"] == STEPS


def test_without_the_all_reduce_the_replicas_drift() -> None:
    """The control: the same run without aicfc-data-parallel is far from the single run."""
    m, opt, world = model(), optim.Adam(lr=1e-2), 2
    data = batches(world * SHARD)
    want, _ = train_single(m, opt, data)
    replicas = Replicas(program(m, opt, SHARD, None), world, state=initial_values(m, opt))
    for x, y in data:
        replicas.run(shards(x, y, world))
    got = replicas.state_dicts()
    assert rel_err(got[0]["0.weight"], want["0.weight"]) > 100 * TOL
    assert rel_err(got[0]["0.weight"], got[1]["0.weight"]) > 100 * TOL


def test_reduce_arrays_sums_in_rank_order_then_divides() -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(64).astype(np.float32) for _ in range(3)]
    want = ((arrays[0] + arrays[1]) + arrays[2]) / np.float32(3)
    np.testing.assert_array_equal(reduce_arrays(arrays, "mean"), want)
    np.testing.assert_array_equal(reduce_arrays(arrays, "sum"), (arrays[0] + arrays[1]) + arrays[2])
    with pytest.raises(ValueError, match="unknown reduce 'max'"):
        reduce_arrays(arrays, "max")


def test_a_program_with_a_communicator_needs_one_of_its_world_size() -> None:
    m, opt = model(), optim.Adam()
    prog = program(m, opt, SHARD, 2)
    backend = NumpyBackend()
    with pytest.raises(ExecError, match='needs the communicator "world" of 2 ranks'):
        backend.load(prog, backend.create_store())
    with pytest.raises(ExecError, match="declared with world_size 2, the backend's has 3 ranks"):
        Replicas(prog, 3)


def test_a_replica_that_fails_releases_the_others_with_its_error() -> None:
    """Rank 1 gets a shard of the wrong shape: its InputError is raised, and rank 0,
    waiting for it at the first all-reduce, does not hang."""
    m, opt = model(), optim.Adam()
    replicas = Replicas(program(m, opt, SHARD, 2), 2, state=initial_values(m, opt), timeout=30)
    x, y = batches(2 * SHARD)[0]
    bad = shards(x, y, 2)
    bad[1] = {"x": x[:3], "y": y[:3]}
    with pytest.raises(ExecError, match='input "x" expects float32\\[8, 12\\]'):
        replicas.run(bad)


def test_a_rank_that_never_arrives_times_out_naming_it() -> None:
    group = ThreadGroup(2, timeout=0.2)
    with pytest.raises(
        CollectiveError, match=r"rank 0: all_reduce #1: rank 1 did not arrive within 0\.2 s"
    ):
        group.communicators[0].all_reduce(np.zeros(4, np.float32), "mean")
