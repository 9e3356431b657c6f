"""CUDA graph capture and the host <-> device copies that a captured step contains.

Rules this module enforces (docs/design.md#capture-rules; what CuPy 14 does during capture):

- Capture once, on the backend's dedicated stream, with `begin_capture()` /
  `end_capture()`, under a private memory pool that is kept with the graph and
  never freed: an allocation during capture keeps its address in the graph
  while a shared pool would hand the block to later arrays (cupy#8318). Every
  buffer is allocated before capture, so the pool should stay empty; capture
  fails if it does not.
- No CuPy routine that allocates or calls cuBLAS runs inside the captured
  region (CuPy raises NotImplementedError for cuBLAS while a stream captures):
  the body is only RawKernel launches, cuBLASLt calls through nvmath's bindings
  on our own handle, and `cudaMemcpyAsync`.
- Inputs enter the graph through `cudaMemcpyAsync` from pinned host buffers
  (`ndarray.set()` is refused during capture); each replay re-reads those
  buffers, so `run()` only writes the user's arrays into them. Outputs leave
  the same way, into pinned host buffers that `run()` copies into new arrays.
- Parallel branches (`issue_schedule`): the launches may be issued on a few
  forked streams with event record/wait, following a runtime/schedule.py
  Schedule. Stream capture turns those cross-stream waits into graph edges,
  so the graph has exactly the schedule's dependencies. Every forked stream
  first waits for a fork event recorded on the capturing stream (that is how
  it joins the capture), and the capturing stream waits for each forked
  stream's last launch before capture ends (an unjoined stream fails it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicfc.runtime.cuda.abi import CudaKernelError
from aicfc.runtime.schedule import Schedule


class PinnedBuffer:
    """A page-locked host array of a fixed shape and dtype (the staging side of a copy)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        import cupy

        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
        self.memory = cupy.cuda.alloc_pinned_memory(nbytes)
        count = int(np.prod(shape, dtype=np.int64))
        self.array = np.frombuffer(self.memory, dtype=dtype, count=count).reshape(shape)
        self.ptr = int(self.memory.ptr)
        self.nbytes = count * np.dtype(dtype).itemsize


def copy_to_device(dst: Any, src: PinnedBuffer, stream: Any) -> None:
    """Enqueue dst <- src (pinned host) on `stream` (capturable)."""
    import cupy

    rt = cupy.cuda.runtime
    rt.memcpyAsync(int(dst.data.ptr), src.ptr, src.nbytes, rt.memcpyHostToDevice, stream.ptr)


def copy_to_host(dst: PinnedBuffer, src: Any, stream: Any) -> None:
    """Enqueue dst (pinned host) <- src on `stream` (capturable)."""
    import cupy

    rt = cupy.cuda.runtime
    rt.memcpyAsync(dst.ptr, int(src.data.ptr), dst.nbytes, rt.memcpyDeviceToHost, stream.ptr)


def copy_on_device(dst: Any, src: Any, stream: Any) -> None:
    """Enqueue dst <- src, both device buffers of one size (capturable)."""
    import cupy

    rt = cupy.cuda.runtime
    rt.memcpyAsync(
        int(dst.data.ptr), int(src.data.ptr), int(src.nbytes), rt.memcpyDeviceToDevice, stream.ptr
    )


@dataclass
class CapturedGraph:
    """A captured CUDA graph with the private pool it was captured under (kept alive)."""

    graph: Any
    pool: Any

    def launch(self, stream: Any) -> None:
        self.graph.launch(stream=stream)


def capture(body: Callable[[Any], None], stream: Any, what: str) -> CapturedGraph:
    """Record `body(stream)` into a CUDA graph on `stream` (nothing runs while capturing).

    Raises CudaKernelError naming `what` when the capture fails or when the body
    allocated device memory (it must only launch into preallocated buffers).
    """
    import cupy

    pool = cupy.cuda.MemoryPool()
    with cupy.cuda.using_allocator(pool.malloc), stream:
        stream.begin_capture()
        try:
            body(stream)
        except BaseException:
            with contextlib.suppress(Exception):  # the capture is already invalid
                stream.end_capture()
            raise
        try:
            graph = stream.end_capture()
        except Exception as e:
            raise CudaKernelError(f"{what}: CUDA graph capture failed: {e}") from None
    if pool.used_bytes():
        raise CudaKernelError(
            f"{what}: {pool.used_bytes()} bytes were allocated during capture; every buffer must "
            "exist before capture"
        )
    return CapturedGraph(graph, pool)


def issue_schedule(
    plan: Schedule,
    nodes: Sequence[Callable[[Any], None]],
    origin: Any,
    branches: Sequence[Any],
    events: Sequence[Any],
    fork: Any,
) -> None:
    """Enqueue `nodes` (each takes the stream to issue on) as `plan` says.

    origin:   the capturing stream (stream 0 of the schedule); work enqueued on it
              before this call comes first, work after it comes last.
    branches: the forked streams (stream k of the schedule is branches[k - 1]).
    events:   one event per node (used where `plan` records one); fork: one more.
    Streams need `wait_event(event)`, events `record(stream)` (CuPy's API).
    """
    if plan.branched:
        fork.record(origin)
    streams = [origin, *branches]
    for item in plan.issues:
        stream = streams[item.stream]
        if item.fork:
            stream.wait_event(fork)
        for d in item.waits:
            stream.wait_event(events[d])
        nodes[item.node](stream)
        if item.record:
            events[item.node].record(stream)
    for t in plan.joins:
        origin.wait_event(events[t])
