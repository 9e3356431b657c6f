"""Data parallelism simulated on the CPU: N replicas of one program in one process.

    replicas = Replicas(program, world_size=4, state=initial)   # program after aicfc-data-parallel
    outs = replicas.run([{"x": x[r::4], "y": y[r::4]} for r in range(4)])  # one step, per rank

Each replica is a NumpyExecutable on its own NumpyBackend and BufferStore (its own
copy of the params and optimizer state, as each GPU has), with rank r's communicator
of one `ThreadGroup` (runtime/collectives.py). A step runs the replicas on one thread
each; they meet at every `exec.all_reduce`, which reduces in rank order, so every
replica computes the same bits and the run is reproducible. This is how the pass and
the semantics of data-parallel training are tested without GPUs
(docs/design.md#data-parallel-training).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.runtime.collectives import DEFAULT_TIMEOUT, CollectiveError, ThreadGroup
from aicfc.runtime.errors import ExecError
from aicfc.runtime.numpy.backend import NumpyBackend, NumpyExecutable
from aicfc.runtime.plan import ExecPlan
from aicfc.runtime.store import BufferStore


class Replicas:
    """`world_size` replicas of `program`, each with its own store.

    state:     initial values of the params and state by name, loaded into every
               replica's store (strict: every buffer); None leaves them at zero.
    timeout:   seconds a replica waits for the others at a collective.
    reference: run every launch on the NumPy reference (NumpyBackend(reference=True)).
    Raises ExecError (from loading) as NumpyBackend.load does, e.g. for a program whose
    communicator's world_size is not `world_size`.
    """

    def __init__(
        self,
        program: ex.ProgramOp | ExecPlan,
        world_size: int,
        state: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        reference: bool = False,
    ):
        plan = program if isinstance(program, ExecPlan) else ExecPlan.from_program(program)
        self.group = ThreadGroup(world_size, timeout)
        self.world_size = world_size
        self.backends = [NumpyBackend(reference, c) for c in self.group.communicators]
        self.stores: list[BufferStore] = [b.create_store() for b in self.backends]
        self.executables: list[NumpyExecutable] = [
            b.load(plan, s) for b, s in zip(self.backends, self.stores, strict=True)
        ]
        if state is not None:
            for store in self.stores:
                store.load_state_dict(state)

    def run(self, shards: Sequence[Mapping[str, Any]]) -> list[dict[str, np.ndarray]]:
        """One step of every replica, replica r on `shards[r]`; returns each one's outputs.

        Raises the error of the first replica that failed (a replica waiting for it at a
        collective is released at once, and its CollectiveError is not the one raised),
        ValueError when there is not one shard per replica.
        """
        if len(shards) != self.world_size:
            raise ValueError(
                f"run: {self.world_size} replicas need as many shards, got {len(shards)}"
            )
        results: list[dict[str, np.ndarray] | None] = [None] * self.world_size
        errors: list[BaseException | None] = [None] * self.world_size

        def work(rank: int) -> None:
            try:
                results[rank] = self.executables[rank].run(shards[rank])
            except BaseException as e:  # re-raised on the caller's thread
                errors[rank] = e
                self.group.abort()

        threads = [threading.Thread(target=work, args=(r,)) for r in range(self.world_size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failed = [e for e in errors if e is not None]
        if failed:
            first = next((e for e in failed if not isinstance(e, CollectiveError)), failed[0])
            if isinstance(first, ExecError | ValueError):
                raise first
            raise ExecError(f"a replica failed: {type(first).__name__}: {first}") from first
        return [r for r in results if r is not None]

    def state_dicts(self) -> list[dict[str, np.ndarray]]:
        """Copies of every replica's params and state."""
        return [s.state_dict() for s in self.stores]
