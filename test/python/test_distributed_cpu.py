"""The launcher and the data-parallel API on the CPU: processes, files, a rank that dies.

`python -m aicfc.distributed --nproc 2 distributed_worker.py` runs two NumPy ranks that
meet through a FileCommunicator in the launcher's rendezvous directory:

- they train like one process at twice the batch (to fp32 rounding, as the in-process
  simulation of test_data_parallel_cpu.py), although each rank initialised its model
  with another seed: the broadcast from rank 0 makes them start equal;
- only rank 0 writes the checkpoint, atomically;
- a rank that exits with an error makes the launcher name it and exit 1, while the
  other rank either times out at its next collective naming the dead rank, or (when
  its timeout is longer than the grace) is terminated by the launcher: nobody hangs.
Plus the API's own checks: the environment, the shards, the backend/communicator match.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aicfc
from aicfc import distributed, nn
from aicfc.distributed import DataParallel, DistributedError, World
from aicfc.distributed.launch import rank_env
from aicfc.runtime.collectives import ThreadGroup

WORKER = Path(__file__).with_name("distributed_worker.py")


def launch(cwd: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aicfc.distributed", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def worker(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=240, cwd=cwd
    )


def test_two_processes_equal_one_at_twice_the_batch_and_rank_0_checkpoints(tmp_path: Path) -> None:
    two = launch(
        tmp_path, "--nproc", "2", str(WORKER), "--steps", "20", "--shard", "8", "--out", "two.npz"
    )
    assert two.returncode == 0, two.stderr[-3000:]
    one = worker(tmp_path, "--single", "--steps", "20", "--shard", "16", "--out", "one.npz")
    assert one.returncode == 0, one.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.npz", "two.npz"]  # no temp file
    got, want = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    assert sorted(got.files) == sorted(want.files)
    for name in want.files:
        err = np.abs(got[name] - want[name]).max() / max(np.abs(want[name]).max(), 1e-30)
        assert err < 5e-6, (name, err)
    assert float(got["0.weight.step"]) == 20.0


def test_a_rank_that_dies_is_named_and_the_other_times_out(tmp_path: Path) -> None:
    r = launch(
        tmp_path, "--nproc", "2", "--timeout", "3", "--grace", "60", str(WORKER),
        "--steps", "20", "--die-rank", "1", "--die-step", "4",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-3000:]
    assert "aicfc-launch: error: rank 1 exited with code 3; stopping the other ranks" in r.stderr
    assert "aicfc-launch: error: rank 1 of 2 exited with code 3" in r.stderr
    # rank 0 gave up at its next all-reduce on its own, naming rank 1:
    assert "rank 1 (all_reduce #" in r.stderr and "did not write" in r.stderr, r.stderr[-3000:]
    assert "terminating rank" not in r.stderr


def test_a_rank_still_waiting_after_the_grace_is_terminated(tmp_path: Path) -> None:
    r = launch(
        tmp_path, "--nproc", "2", "--timeout", "600", "--grace", "1", str(WORKER),
        "--steps", "20", "--die-rank", "0", "--die-step", "2",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-3000:]
    assert "terminating rank 1 (still running 1 s after rank 0 failed)" in r.stderr
    assert "aicfc-launch: error: rank 0 of 2 exited with code 3" in r.stderr


def test_launcher_usage_errors_exit_1(tmp_path: Path) -> None:
    r = launch(tmp_path, "--nproc", "0", str(WORKER))
    assert r.returncode == 1 and "--nproc must be at least 1, got 0" in r.stderr
    r = launch(tmp_path, "--nproc", "2", "missing.py")
    assert r.returncode == 1 and "no script 'missing.py'" in r.stderr
    assert "Traceback" not in r.stderr


def test_rank_env_is_torchruns() -> None:
    env = rank_env({"NCCL_NVLS_ENABLE": "1"}, 1, 4, "/tmp/rdv", 9.0)
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")} == {
        "RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
    }
    assert env["AICFC_RENDEZVOUS"] == "/tmp/rdv" and env["AICFC_TIMEOUT"] == "9.0"
    assert env["NCCL_NVLS_ENABLE"] == "1"  # the user's setting wins
    assert rank_env({}, 0, 1, "/r", 1.0)["NCCL_NVLS_ENABLE"] == "0"


def test_world_from_env_names_what_is_missing() -> None:
    with pytest.raises(
        DistributedError, match=r"RANK, WORLD_SIZE, LOCAL_RANK, AICFC_RENDEZVOUS.* is not set"
    ):
        World.from_env({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    with pytest.raises(DistributedError, match="need 0 <= RANK < WORLD_SIZE"):
        World.from_env(
            {"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "AICFC_RENDEZVOUS": "/r"}
        )
    w = World.from_env(
        {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "AICFC_RENDEZVOUS": "/r"}
    )
    assert (w.rank, w.world_size, w.local_rank, w.rendezvous) == (1, 2, 1, "/r")


def test_shard_takes_this_ranks_rows() -> None:
    x, y = np.arange(12).reshape(6, 2), np.arange(6)
    xs, ys = distributed.shard(x, y, rank=2, world_size=3)
    np.testing.assert_array_equal(xs, [[8, 9], [10, 11]])
    np.testing.assert_array_equal(ys, [4, 5])
    with pytest.raises(ValueError, match="a batch of 6 rows does not split into 4 equal shards"):
        distributed.shard(x, rank=0, world_size=4)


def test_compile_data_parallel_without_a_launcher_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "AICFC_RENDEZVOUS"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(DistributedError, match="aicfc-launch"):
        aicfc.compile(nn.Sequential(nn.Linear(4, 2)), backend="numpy", data_parallel=True)


def test_data_parallel_program_with_thread_communicators_broadcasts_and_shows_the_stage() -> None:
    """Two Programs (ranks as threads) made from models with different weights: after
    compile they hold rank 0's, and the train step has the data-parallel stage."""
    import threading

    group = ThreadGroup(2, timeout=30)
    progs: list[aicfc.Program] = [None, None]  # type: ignore[list-item]

    def make(rank: int) -> None:
        model = nn.Sequential(
            nn.Linear(4, 8, rng=np.random.default_rng(rank)), nn.ReLU(), nn.Linear(8, 3)
        )
        dp = DataParallel(group.communicators[rank], bucket_mb=1.0)
        progs[rank] = aicfc.compile(model, backend="numpy", data_parallel=dp)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p0, p1 = progs
    for name, value in p0.state_dict().items():
        np.testing.assert_array_equal(p1.state_dict()[name], value, err_msg=name)
    assert (
        "data-parallel" in p0.stages
        and p0.stages.index("data-parallel") == p0.stages.index("exec") + 1
    )
    assert distributed.save_checkpoint(p1, os.devnull) is None  # rank 1 writes nothing
    with pytest.raises(
        ValueError, match="a host communicator runs on the numpy backend, not 'cupy'"
    ):
        aicfc.compile(
            nn.Sequential(nn.Linear(4, 2)),
            backend="cupy",
            data_parallel=DataParallel(group.communicators[0]),
        )
