"""NCCL through CuPy's bindings (`cupy.cuda.nccl`): the GPU's communicator.

One process per GPU (docs/design.md#data-parallel-training). Rank 0 makes a unique id
(`unique_id()`, 128 bytes), the ranks share it at start-up (the launcher's rendezvous,
aicfc/distributed.py) and each builds `NcclCommunicator(rank, world_size, uid)` on its
own device. Collectives are enqueued on the stream given, so an all-reduce issued while
that stream is capturing becomes nodes of the step's CUDA graph (NCCL supports stream
capture since 2.9). "mean" is NCCL's `ncclAvg` (NCCL >= 2.10): with one rank it returns
its input bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicfc.runtime.collectives import Communicator, check_rank
from aicfc.runtime.errors import BackendUnavailable

NCCL_DTYPES = {"float16": 6, "float32": 7, "float64": 8, "int32": 2, "int64": 4}
"""ncclDataType_t of the NumPy dtypes a bucket may have (nccl.h; cupy's NCCL_FLOAT32 = 7)."""

NCCL_OPS = {"sum": 0, "mean": 4}
"""ncclRedOp_t: ncclSum = 0, ncclAvg = 4."""


def nccl_module() -> Any:
    """`cupy.cuda.nccl`; BackendUnavailable saying why when CuPy or NCCL is missing."""
    try:
        from cupy.cuda import nccl
    except Exception as e:  # ImportError, or CuPy failing to load libnccl
        raise BackendUnavailable(
            f"NCCL is not usable: {type(e).__name__}: {e} (install CuPy with NCCL, e.g. "
            "pip install 'aicfc[cuda]', which brings nvidia-nccl-cu13)"
        ) from None
    if not getattr(nccl, "available", True):
        raise BackendUnavailable("NCCL is not usable: CuPy was built without NCCL")
    return nccl


def unique_id() -> bytes:
    """A new NCCL unique id (rank 0 makes it, every rank needs it) as 128 bytes."""
    return bytes(v & 0xFF for v in nccl_module().get_unique_id())


def _nccl_dtype(dtype: np.dtype) -> int:
    name = np.dtype(dtype).name
    if name not in NCCL_DTYPES:
        raise TypeError(f"NCCL cannot reduce {name} buffers (takes {', '.join(NCCL_DTYPES)})")
    return NCCL_DTYPES[name]


class NcclCommunicator(Communicator):
    """Rank `rank` of `world_size` GPUs, one per process, on the current CUDA device.

    uid: the 128 bytes of rank 0's `unique_id()`. Creating it blocks until every rank
    has created its own (ncclCommInitRank); `device` is the CUDA device it was made on.
    Arrays are CuPy arrays on this device; `stream` is a cupy.cuda.Stream (None: the
    current stream).
    """

    kind = "nccl"

    def __init__(self, rank: int, world_size: int, uid: bytes):
        check_rank(rank, world_size)
        if len(uid) != 128:
            raise ValueError(f"an NCCL unique id has 128 bytes, got {len(uid)}")
        nccl = nccl_module()
        import cupy

        self.device = int(cupy.cuda.runtime.getDevice())
        self.rank = rank
        self.world_size = world_size
        try:  # CuPy 14 takes the id as bytes, older releases as a tuple of C chars
            self.comm = nccl.NcclCommunicator(world_size, bytes(uid), rank)
        except TypeError:
            signed = tuple(b - 256 if b > 127 else b for b in uid)
            self.comm = nccl.NcclCommunicator(world_size, signed, rank)

    @staticmethod
    def _stream_ptr(stream: Any) -> int:
        import cupy

        return int((stream if stream is not None else cupy.cuda.get_current_stream()).ptr)

    def all_reduce(self, array: Any, op: str, stream: Any = None) -> None:
        ptr = int(array.data.ptr)
        self.comm.allReduce(
            ptr,
            ptr,
            int(array.size),
            _nccl_dtype(array.dtype),
            NCCL_OPS[op],
            self._stream_ptr(stream),
        )

    def broadcast(self, array: Any, root: int = 0, stream: Any = None) -> None:
        ptr = int(array.data.ptr)
        self.comm.broadcast(
            ptr, ptr, int(array.size), _nccl_dtype(array.dtype), root, self._stream_ptr(stream)
        )

    def close(self) -> None:
        comm, self.comm = getattr(self, "comm", None), None
        if comm is not None:
            comm.destroy()
