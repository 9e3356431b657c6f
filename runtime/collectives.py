"""Communicators: what an `exec.all_reduce` runs over (docs/design.md#data-parallel-training).

A backend is given one `Communicator` (its rank, the world size) and binds every
`exec.communicator` of a program to it at load. Three kinds:

- `ThreadGroup(n).communicators`: n ranks in ONE process, one thread each (the NumPy
  backend's simulation of data parallelism: `runtime/numpy/replicas.py` runs n replicas
  of a program with them);
- `FileCommunicator`: ranks in separate processes on one host that meet in a shared
  directory (`FileStore`): for the CPU, for tests and as the rendezvous of the NCCL
  unique id;
- the GPU's NCCL communicator (runtime/cuda/nccl.py).

The host communicators reduce in one fixed order, rank 0 first, in the array's dtype,
and divide by the world size for "mean" (`reduce_arrays`), so every rank gets the same
bits and a run is reproducible. A rank that does not arrive within `timeout` seconds
(it died, or hangs) makes the others raise `CollectiveError` naming it, never hang.

This module is the runtime's shared layer: NumPy and the standard library only.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aicfc.runtime.errors import ExecError
from aicfc.runtime.files import atomic_write

REDUCE_OPS = ("sum", "mean")
"""The reductions of exec.all_reduce (dialects/exec.py ReduceOp)."""

DEFAULT_TIMEOUT = 300.0
"""Seconds a rank waits for the others at a collective before it gives up."""


class CollectiveError(ExecError):
    """A collective failed: a rank did not arrive in time (it died or hangs), or the
    ranks disagree about what they reduce."""


def reduce_arrays(arrays: Sequence[np.ndarray], op: str) -> np.ndarray:
    """The elementwise reduction of `arrays` (rank order): a new array of their dtype.

    sum: ((a0 + a1) + a2) + ..., in the dtype; mean: that sum / len(arrays) (one
    rounding more, as a sum followed by a division).
    """
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduce {op!r}; known: {', '.join(REDUCE_OPS)}")
    total = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        np.add(total, a, out=total)
    if op == "mean":
        np.divide(total, total.dtype.type(len(arrays)), out=total)
    return total


class Communicator(ABC):
    """A rank's handle on a group of `world_size` ranks.

    rank:       this process's (or thread's) index, 0 <= rank < world_size.
    world_size: the number of ranks.
    Every rank must call the same collectives in the same order with arrays of the
    same shape and dtype (as NCCL requires).
    """

    rank: int
    world_size: int
    kind: str = "host"
    """"host" (reduces NumPy arrays) or "nccl" (CuPy arrays on a stream)."""

    @abstractmethod
    def all_reduce(self, array: Any, op: str, stream: Any = None) -> None:
        """Replace `array` (in place) by its `op` ("sum" or "mean") over the ranks."""

    @abstractmethod
    def broadcast(self, array: Any, root: int = 0, stream: Any = None) -> None:
        """Replace `array` (in place) by rank `root`'s."""

    def close(self) -> None:  # noqa: B027 (nothing to release by default)
        """Release the communicator (a no-op unless it holds a resource)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size})"


def check_rank(rank: int, world_size: int) -> None:
    """ValueError unless 0 <= rank < world_size and world_size >= 1."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world size {world_size}: need 0 <= rank < world_size")


# ----------------------------------------------------------------------------
# Ranks as threads of one process (the CPU simulation)
# ----------------------------------------------------------------------------


class ThreadGroup:
    """`world_size` ranks in one process; `communicators[r]` is rank r's.

    Each collective meets at a barrier, so the ranks must run on separate threads
    (runtime/numpy/replicas.py does that). A rank that does not arrive within
    `timeout` seconds breaks the barrier: every waiting rank raises CollectiveError
    naming the ranks that were missing.
    """

    def __init__(self, world_size: int, timeout: float = DEFAULT_TIMEOUT):
        check_rank(0, world_size)
        self.world_size = world_size
        self.timeout = timeout
        self._barrier = threading.Barrier(world_size)
        self._slots: list[Any] = [None] * world_size
        self._calls = [0] * world_size
        self.communicators = [ThreadCommunicator(self, r) for r in range(world_size)]

    def _meet(self, rank: int, what: str) -> None:
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            mine = self._calls[rank]
            missing = [r for r in range(self.world_size) if self._calls[r] < mine]
            who = ", ".join(str(r) for r in missing) or "another rank"
            raise CollectiveError(
                f"rank {rank}: {what} #{mine}: rank {who} did not arrive within "
                f"{self.timeout:g} s (it failed or hangs)"
            ) from None

    def abort(self) -> None:
        """Break the barrier (a rank failed): the ranks waiting at it raise at once."""
        self._barrier.abort()

    def exchange(self, rank: int, value: Any, what: str) -> list[Any]:
        """Every rank's `value`, in rank order (two barriers: all deposit, all read)."""
        self._calls[rank] += 1
        self._slots[rank] = value
        self._meet(rank, what)
        values = list(self._slots)
        self._meet(rank, what)
        return values


class ThreadCommunicator(Communicator):
    """Rank `rank` of a ThreadGroup (host NumPy arrays)."""

    def __init__(self, group: ThreadGroup, rank: int):
        self.group = group
        self.rank = rank
        self.world_size = group.world_size

    def all_reduce(self, array: Any, op: str, stream: Any = None) -> None:
        arrays = self.group.exchange(self.rank, array, "all_reduce")
        _check_same(self.rank, arrays, "all_reduce")
        total = reduce_arrays(arrays, op)  # every rank computes the same bits
        self.group._meet(self.rank, "all_reduce")  # all have read before anyone writes
        np.copyto(array, total)

    def broadcast(self, array: Any, root: int = 0, stream: Any = None) -> None:
        arrays = self.group.exchange(self.rank, array, "broadcast")
        _check_same(self.rank, arrays, "broadcast")
        value = np.array(arrays[root], copy=True)
        self.group._meet(self.rank, "broadcast")
        np.copyto(array, value)


def _check_same(rank: int, arrays: Sequence[np.ndarray], what: str) -> None:
    first = arrays[0]
    for r, a in enumerate(arrays):
        if a.shape != first.shape or a.dtype != first.dtype:
            raise CollectiveError(
                f"rank {rank}: {what}: rank {r} passed {a.dtype}{list(a.shape)}, rank 0 "
                f"{first.dtype}{list(first.shape)} (the ranks run different programs?)"
            )


# ----------------------------------------------------------------------------
# Ranks as processes that meet in a directory
# ----------------------------------------------------------------------------


class FileStore:
    """A key-value store in a directory shared by the ranks of one host (a rendezvous).

    `set` writes a key's bytes atomically (runtime/files.py: a reader sees all or
    nothing); `get` waits until the key exists, up to `timeout` seconds, and raises
    CollectiveError with `who` in the message otherwise.
    """

    def __init__(self, directory: str | os.PathLike[str], timeout: float = DEFAULT_TIMEOUT):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout

    def path(self, key: str) -> Path:
        return self.directory / key

    def set(self, key: str, data: bytes) -> None:
        with atomic_write(self.path(key), "wb") as f:
            f.write(data)

    def get(self, key: str, who: str = "the writer") -> bytes:
        path = self.path(key)
        deadline = time.monotonic() + self.timeout
        delay = 0.0005
        while True:
            try:
                return path.read_bytes()
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise CollectiveError(
                    f"{who} did not write {key!r} in {self.directory} within {self.timeout:g} s "
                    "(it failed or hangs)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)


class FileCommunicator(Communicator):
    """Rank `rank` of `world_size` processes meeting in `store` (host NumPy arrays).

    Collective k writes this rank's array as `c<k>.r<rank>.npy` and reads every rank's
    in rank order; reaching collective k proves every rank has read collective k-2, so
    the rank then deletes its own file of k-2. For CPU runs and tests: every call goes
    through the file system.
    """

    def __init__(self, store: FileStore, rank: int, world_size: int):
        check_rank(rank, world_size)
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self._count = 0

    def _exchange(self, array: np.ndarray, what: str) -> list[np.ndarray]:
        k = self._count
        self._count += 1
        self.store.delete(f"c{k - 2}.r{self.rank}.npy")
        self.store.set(f"c{k}.r{self.rank}.npy", _npy_bytes(array))
        out = []
        for r in range(self.world_size):
            data = self.store.get(f"c{k}.r{r}.npy", who=f"rank {r} ({what} #{k + 1})")
            out.append(_npy_array(data))
        _check_same(self.rank, out, what)
        return out

    def all_reduce(self, array: Any, op: str, stream: Any = None) -> None:
        np.copyto(array, reduce_arrays(self._exchange(array, "all_reduce"), op))

    def broadcast(self, array: Any, root: int = 0, stream: Any = None) -> None:
        np.copyto(array, self._exchange(array, "broadcast")[root])


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def _npy_array(data: bytes) -> np.ndarray:
    import io

    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))
