"""Data-parallel training on the GPU: NCCL inside the captured step (runtime/cuda/nccl.py).

- World size 1, a real NCCL communicator of one rank: the program with
  aicfc-data-parallel captures (the all-reduce is nodes of the step's graph, on the
  branched schedule and on one chain) and trains bit for bit like the program without
  the pass (ncclAvg over one rank returns its input; the bucket copies are exact).
- Two GPUs (skipped, saying so, on a machine with fewer): 2 ranks started by
  `python -m aicfc.distributed` equal one GPU at twice the batch within 1e-5 after 20
  steps; a rank that dies makes the launcher stop the other and name it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from aicfc import nn, optim
from aicfc.builder import build_train_step, initial_values
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.passes.pipelines import run_steps, train_pipeline, with_data_parallel
from gpu.gpu_support import REASON, gpu

pytestmark = gpu

ROOT = Path(__file__).resolve().parents[3]
STEPS = 20
BATCH = 64


def device_count() -> int:
    if REASON is not None:
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


two_gpus = pytest.mark.skipif(
    device_count() < 2,
    reason=f"needs 2 GPUs (a nvidia-h200-x2 machine); this one has {device_count()}",
)


def model() -> nn.Module:
    rng = np.random.default_rng(0)
    return nn.Sequential(
        nn.Linear(64, 256, rng=rng),
        nn.ReLU(),
        nn.Linear(256, 256, rng=rng),
        nn.GELU(),
        nn.Linear(256, 10, rng=rng),
    )


def exec_program(backend: Any, m: nn.Module, opt: optim.Optimizer, world: int | None) -> Any:
    steps = train_pipeline("cupy", True, backend.lower_exec_options())
    if world is not None:
        steps = with_data_parallel(steps, world, bucket_mb=0.1)  # several buckets
    module = ModuleOp([build_train_step(m, "cross_entropy", opt, (BATCH, 64), np.float32)])
    run_steps(make_context(), module, steps)
    return next(op for op in module.ops if isinstance(op, ex.ProgramOp))


@pytest.mark.parametrize("streams", [4, 1], ids=["branched", "one_chain"])
def test_world_size_1_captures_and_equals_the_program_without_the_pass(streams: int) -> None:
    from aicfc.runtime.cuda.backend import CupyBackend
    from aicfc.runtime.cuda.nccl import NcclCommunicator, nccl_module, unique_id
    from aicfc.runtime.errors import BackendUnavailable

    try:
        nccl_module()
    except BackendUnavailable as e:
        pytest.skip(f"needs NCCL: {e}")
    comm = NcclCommunicator(0, 1, unique_id())
    backend = CupyBackend(graph_streams=streams, communicator=comm)
    m, opt = model(), optim.Adam(lr=1e-2)
    init = initial_values(m, opt)
    with_pass = exec_program(backend, m, opt, 1)
    assert sum(isinstance(o, ex.AllReduceOp) for o in with_pass.graph().block.ops) >= 2
    runs = {}
    for label, prog in (("dp", with_pass), ("plain", exec_program(backend, m, opt, None))):
        store = backend.create_store()
        exe = backend.load(prog, store)
        store.load_state_dict(init)
        rng = np.random.default_rng(1)
        losses = []
        for _ in range(STEPS):
            x = rng.standard_normal((BATCH, 64)).astype(np.float32)
            y = rng.integers(0, 10, BATCH).astype(np.int32)
            losses.append(exe.run({"x": x, "y": y})["loss"])
        assert exe.captured and exe.replays == STEPS - 1
        runs[label] = (store.state_dict(), losses, exe)
    dp_state, dp_losses, dp_exe = runs["dp"]
    plain_state, plain_losses, _ = runs["plain"]
    assert "exec.all_reduce" in dp_exe.kernels
    np.testing.assert_array_equal(np.array(dp_losses), np.array(plain_losses))
    for name, value in plain_state.items():
        np.testing.assert_array_equal(dp_state[name], value, err_msg=name)
    assert not np.array_equal(plain_state["0.weight"], init["0.weight"])  # it trained
    comm.close()


def run_launcher(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
    return subprocess.run(
        [sys.executable, "-m", "aicfc.distributed", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env=env,
    )


@two_gpus
def test_two_ranks_equal_one_gpu_at_twice_the_batch(tmp_path: Path) -> None:
    worker = ROOT / "test/python/distributed_worker.py"
    out2 = tmp_path / "two.npz"
    r = run_launcher(
        tmp_path, "--nproc", "2", str(worker), "--backend", "cupy", "--steps", str(STEPS),
        "--shard", "32", "--out", str(out2),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    out1 = tmp_path / "one.npz"
    r = subprocess.run(
        [sys.executable, str(worker), "--backend", "cupy", "--steps", str(STEPS), "--shard", "64",
         "--single", "--out", str(out1)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    two, one = np.load(out2), np.load(out1)
    for name in one.files:
        err = np.abs(two[name] - one[name]).max() / max(np.abs(one[name]).max(), 1e-30)
        assert err < 1e-5, (name, err)


@two_gpus
def test_a_rank_that_dies_stops_the_other_naming_it(tmp_path: Path) -> None:
    worker = ROOT / "test/python/distributed_worker.py"
    r = run_launcher(
        tmp_path, "--nproc", "2", "--grace", "10", str(worker), "--backend", "cupy",
        "--steps", "50", "--shard", "32", "--die-rank", "1", "--die-step", "5",
    )  # fmt: skip
    assert r.returncode != 0
    assert "rank 1" in r.stderr and "exited with code 3" in r.stderr, r.stderr[-4000:]
