"""Data-parallel training across processes: the environment, the shards, the checkpoints.

Start N processes with the launcher, as `torchrun` does:

    aicfc-launch --nproc 2 train.py --epochs 3        # or: python -m aicfc.distributed ...

and in train.py:

    prog = aicfc.compile(model, optimizer=optim.Adam(), data_parallel=True)
    for x, y in batches:                                 # the same global batches on every rank
        prog.step(*aicfc.distributed.shard(x, y))        # each rank trains on its own rows
    aicfc.distributed.save_checkpoint(prog, "ckpt.npz")  # rank 0 writes, atomically

The launcher sets, for each process, RANK and WORLD_SIZE (its rank and the number of
processes), LOCAL_RANK (its GPU on this host), LOCAL_WORLD_SIZE, and the rendezvous:
AICFC_RENDEZVOUS (a directory the ranks share: the NCCL unique id travels through it,
and the CPU's FileCommunicator meets there) and AICFC_TIMEOUT (seconds a rank waits for
another before it fails naming it). `data_parallel=True` reads them (`World.from_env`);
`DataParallel(communicator=..., bucket_mb=...)` gives the communicator or the bucket
size explicitly (e.g. `ThreadGroup(n).communicators[r]` for ranks as threads).

What a data-parallel Program does (docs/design.md#data-parallel-training): its train
step has the pipeline stage "data-parallel" (aicfc-data-parallel: the gradients' mean
all-reduce, bucketed); at compile time every param and optimizer state is broadcast
from rank 0, so the ranks start equal whatever each initialised; then they stay equal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aicfc.runtime.collectives import DEFAULT_TIMEOUT, Communicator, FileCommunicator, FileStore
from aicfc.runtime.files import atomic_write

if TYPE_CHECKING:
    from aicfc.program import Program
    from aicfc.runtime.backend import Backend
    from aicfc.runtime.store import BufferStore

ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "AICFC_RENDEZVOUS")
"""What `World.from_env` needs (the launcher sets them, and LOCAL_WORLD_SIZE, AICFC_TIMEOUT)."""

NCCL_ID_KEY = "nccl-unique-id"
"""The rendezvous key under which rank 0 publishes the NCCL unique id."""


class DistributedError(RuntimeError):
    """The distributed environment is missing or inconsistent."""


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (the launcher's environment)."""

    rank: int
    world_size: int
    local_rank: int
    rendezvous: str
    timeout: float = DEFAULT_TIMEOUT

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None) -> World:
        """Read RANK, WORLD_SIZE, LOCAL_RANK, AICFC_RENDEZVOUS and AICFC_TIMEOUT.

        Raises DistributedError naming the missing or malformed variable.
        """
        env = os.environ if env is None else env
        missing = [v for v in ENV_VARS if v not in env]
        if missing:
            raise DistributedError(
                f"data_parallel=True reads {', '.join(ENV_VARS)} from the environment, which "
                f"aicfc-launch (python -m aicfc.distributed) sets; {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set"
            )
        try:
            rank, size, local = (int(env[v]) for v in ENV_VARS[:3])
            timeout = float(env.get("AICFC_TIMEOUT", DEFAULT_TIMEOUT))
        except ValueError as e:
            raise DistributedError(
                f"a distributed environment variable is malformed: {e}"
            ) from None
        if size < 1 or not 0 <= rank < size or local < 0:
            raise DistributedError(
                f"RANK={rank} WORLD_SIZE={size} LOCAL_RANK={local}: need 0 <= RANK < WORLD_SIZE"
            )
        return World(rank, size, local, env["AICFC_RENDEZVOUS"], timeout)

    def store(self) -> FileStore:
        return FileStore(self.rendezvous, self.timeout)


@dataclass(frozen=True)
class DataParallel:
    """How a Program trains data-parallel (`aicfc.compile(..., data_parallel=...)`).

    communicator: the rank's communicator; None creates one from the environment
                  (`World.from_env`): NCCL on the cupy backend (device LOCAL_RANK),
                  a FileCommunicator on the numpy backend.
    bucket_mb:    gradient bucket size in MiB (aicfc-data-parallel's option; DDP's 25).
    """

    communicator: Communicator | None = None
    bucket_mb: float = 25.0


def shard(*arrays: Any, rank: int | None = None, world_size: int | None = None) -> Any:
    """This rank's rows of each array: the rank-th of world_size equal slices of dim 0.

    rank/world_size default to the environment's (RANK, WORLD_SIZE). Returns one array
    for one argument, else a tuple. Raises ValueError when a batch does not split into
    equal shards (the mean of the shards' gradients is the batch's only then).
    """
    if rank is None or world_size is None:
        world = World.from_env()
        rank = world.rank if rank is None else rank
        world_size = world.world_size if world_size is None else world_size
    out = []
    for a in arrays:
        n = len(a)
        if n % world_size:
            raise ValueError(
                f"shard: a batch of {n} rows does not split into {world_size} equal shards"
            )
        step = n // world_size
        out.append(a[rank * step : (rank + 1) * step])
    return out[0] if len(out) == 1 else tuple(out)


def communicator_for(backend_name: str, world: World) -> Communicator:
    """The communicator of `world` for a backend: NCCL (unique id from rank 0 through the
    rendezvous) for "cupy", a FileCommunicator for "numpy"."""
    store = world.store()
    if backend_name == "cupy":
        from aicfc.runtime.cuda.nccl import NcclCommunicator, unique_id

        if world.rank == 0:
            uid = unique_id()
            store.set(NCCL_ID_KEY, uid)
        else:
            uid = store.get(NCCL_ID_KEY, who="rank 0 (the NCCL unique id)")
        return NcclCommunicator(world.rank, world.world_size, uid)
    return FileCommunicator(store, world.rank, world.world_size)


def setup_backend(name: str, dp: bool | DataParallel) -> tuple[Backend, str, DataParallel]:
    """The backend `name` ("numpy", "cupy", "auto") with its communicator for `dp`, why
    it is that backend, and the DataParallel with its communicator filled in."""
    from aicfc.backends import resolve_backend
    from aicfc.runtime.backend_names import AUTO, backend_name

    config = dp if isinstance(dp, DataParallel) else DataParallel()
    if config.communicator is not None:
        comm = config.communicator
        options = {"device": getattr(comm, "device", 0)} if comm.kind == "nccl" else {}
        chosen = "cupy" if comm.kind == "nccl" else "numpy"
        if backend_name(name, allow_auto=True) not in (AUTO, chosen):
            raise ValueError(
                f"compile: a {comm.kind} communicator runs on the {chosen} backend, not {name!r}"
            )
        backend, reason = resolve_backend(chosen, **options)
        backend.communicator = comm
        return backend, reason, config
    world = World.from_env()
    chosen = backend_name(name, allow_auto=True)
    if chosen == AUTO:  # decided without creating a backend (that would touch GPU 0)
        from aicfc.backends import backend_class

        try:
            usable = backend_class("cupy").unavailable_reason() is None
        except Exception:
            usable = False
        chosen = "cupy" if usable else "numpy"
    options = {"device": world.local_rank} if chosen == "cupy" else {}
    backend, reason = resolve_backend(chosen, **options)
    backend.communicator = communicator_for(chosen, world)
    return backend, reason, DataParallel(backend.communicator, config.bucket_mb)


def broadcast_store(store: BufferStore, comm: Communicator, backend: Backend) -> None:
    """Every buffer of `store` (params, optimizer state) replaced by rank 0's, in name order."""
    stream = getattr(backend, "stream", None)
    for name in sorted(store.names()):
        comm.broadcast(store[name], 0, stream)
    backend.synchronize()


def save_checkpoint(program: Program, path: str | os.PathLike[str]) -> Path | None:
    """Rank 0 writes `program.state_dict()` to `path` as .npz, atomically (never a
    half-written file; runtime/files.py); other ranks write nothing. Returns the path on
    rank 0, None elsewhere. A Program without data parallelism is rank 0."""
    dp = getattr(program, "data_parallel", None)
    if dp is not None and dp.communicator is not None and dp.communicator.rank != 0:
        return None
    state = program.state_dict()
    with atomic_write(path, "wb") as f:
        np.savez(f, **state)  # type: ignore[arg-type]  # names are not savez options
    return Path(path)


__all__ = [
    "DataParallel",
    "DistributedError",
    "World",
    "broadcast_store",
    "communicator_for",
    "save_checkpoint",
    "setup_backend",
    "shard",
]
