"""The CuPy backend: an exec program as CUDA kernels, the whole step one CUDA graph.

Why: docs/design.md#fixed-device-buffers and the sections after it; interface: runtime/backend.py.

- Buffers are allocated once, at load: params and state in the BufferStore
  (shared with every program loaded against it), inputs as fixed device arrays,
  planned tmp buffers as views into one arena. In-place execution needs nothing
  more: an output that `aicfc-fold-inplace` made the same exec buffer as an
  input is the same slot, hence the same array and device pointer
  (docs/design.md#in-place-folding).
- The kernels are the exec IR's: aicfc-lower-exec selected them for this
  device (`lower_exec_options()`: architecture, TF32 allowed, cuBLASLt usable,
  autotune cache), and loading verifies that each one can run here (a cuBLASLt
  launch without nvmath-python is an error naming the kernel, never a silent
  substitute). Each launch is bound at load by its registry entry's launcher
  (runtime/cuda/launch.py, runtime/cuda/launchers/): module compiled and
  ABI-checked, scalars converted to their C types, grid fixed, cuBLASLt
  planned, workspaces zeroed. Consecutive Adam launches become one
  multi-tensor launch.
- `graph=True` (the default): the first `run()` executes the step eagerly (it
  is the warm-up, and a real step), then the step is captured on the
  backend's dedicated stream and every later run replays it. Host (NumPy)
  inputs enter the graph through copies from pinned host buffers, which a
  run fills; device (CuPy) inputs are copied device-to-device into the fixed
  input buffers just before the replay (none at all when the array is the
  fixed buffer itself), ordered after the caller's current stream. One graph
  is captured per combination of host inputs and output mode, so both kinds
  of input replay without a host round trip for the device ones. Where a
  step's device inputs come from the same addresses as the step before (a
  loop over the caller's own device buffers), a graph whose first nodes are
  those copies is captured and replayed instead: the step is one launch
  (runtime/cuda/step_io.py says when; `replay()` always reruns the plain graph
  on the fixed buffers). `run_async`'s outputs are views of preallocated
  blocks, never reused. Params and
  state are never copied in (docs/design.md#inputs-only-replay): they accumulate in
  their fixed buffers, and `load_state_dict` writes into those buffers, so a
  checkpoint load needs no new capture. A program without state (predict) is
  the inference mode with the same mechanism. `graph=False` is the eager mode:
  one launch at a time, for debugging; `sync_each_launch=True` additionally
  waits after each launch so that a CUDA error names the kernel that raised it.
- The captured graph has the step's real dependencies, not a chain: at load,
  runtime/schedule.py finds for each launch the earlier launches it conflicts
  with (read-after-write, write-after-read, write-after-write on buffers;
  in-place outputs are their input's buffer, planned tmp buffers conflict
  where their arena bytes overlap, cuBLASLt launches that share a workspace
  conflict), and the capture issues the launches on up to `graph_streams`
  streams forked from the capturing stream, with an event wherever a launch
  waits for one on another stream. Launches that conflict keep their program
  order, so the graph computes exactly what the sequential step computes
  (the kernels are deterministic: bit-identical results). The eager mode and
  the warm-up step stay sequential on one stream (program order), so they
  are the reference the branched graph is checked against; `graph_streams=1`
  captures the old chain.
- Collectives (data parallelism, docs/design.md#data-parallel-training): an
  `exec.all_reduce` runs on the backend's `communicator` (runtime/cuda/nccl.py) on its
  own communication stream: the stream its schedule node is issued on records an
  event, the communication stream waits for it, packs the gradients into the bucket
  (device copies), calls NCCL, unpacks, and records the event the issuing stream (and
  so the optimizer launches after it) waits for. Captured, that is NCCL's nodes in the
  step's graph with exactly those edges, beside the backward launches that do not
  touch its buffers.
- Outputs a user holds are never overwritten by a later step: `run()` copies
  them to new NumPy arrays (the graph ends with device-to-host copies into
  pinned buffers, then the run waits); `run_async()` returns new CuPy arrays
  copied device-to-device after the replay, without waiting, and makes the
  caller's current stream wait for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.runtime import registry
from aicfc.runtime.backend import Backend, Executable
from aicfc.runtime.collectives import Communicator
from aicfc.runtime.cuda.abi import CallbackLaunch, CudaKernelError, Launch, describe
from aicfc.runtime.cuda.capture import (
    CapturedGraph,
    PinnedBuffer,
    capture,
    copy_on_device,
    copy_to_device,
    copy_to_host,
    issue_schedule,
)
from aicfc.runtime.cuda.context import DeviceContext
from aicfc.runtime.cuda.cublaslt import CublasLt, available
from aicfc.runtime.cuda.launch import group_steps, launches_for
from aicfc.runtime.cuda.launchers.optim import launch_adam_group
from aicfc.runtime.cuda.step_io import InGraphCopies, OutputBlocks, Sources, block_count
from aicfc.runtime.errors import BackendUnavailable, ExecError, InputError, StoreError
from aicfc.runtime.plan import BufferSpec, CollectiveStep, CopyStep, ExecPlan, LaunchStep
from aicfc.runtime.schedule import (
    Access,
    Schedule,
    aliased_regions,
    buffer_regions,
    dependencies,
    direct,
    node_access,
    schedule,
    view_aliases,
)
from aicfc.runtime.selector import Problem, refusal
from aicfc.runtime.store import BufferStore

AUTOTUNE_ENV = "AICFC_AUTOTUNE_CACHE"
DEFAULT_AUTOTUNE_CACHE = Path("aicfc/autotune.json")
"""Where the autotune cache is looked for when none is given, under $XDG_CACHE_HOME
(default ~/.cache; $AICFC_AUTOTUNE_CACHE overrides the whole path): it is consulted
only if the file exists, changes a choice only where it has an entry for that op,
shape bucket and device, and its folder is created by the first tuning run."""

DTYPE_NAMES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "bool": "i1",
    "int32": "i32",
    "int64": "i64",
}


def dtype_name(dtype: np.dtype) -> str:
    """The registry's dtype name ("f32") of a NumPy dtype."""
    return DTYPE_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def default_autotune_cache() -> str:
    """$AICFC_AUTOTUNE_CACHE, else $XDG_CACHE_HOME/aicfc/autotune.json with XDG_CACHE_HOME
    defaulting to ~/.cache (the file may not exist)."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return os.environ.get(AUTOTUNE_ENV) or str(
        (Path(cache_home) / DEFAULT_AUTOTUNE_CACHE).expanduser()
    )


class CupyBackend(Backend):
    """The GPU runtime (CuPy, CUDA graphs). See the module docstring for the options.

    graph:            capture the step once and replay it (False: eager launches).
    tf32:             allow TF32 tensor-core GEMMs (about 1e-3 relative error) in the
                      programs compiled for this backend (a Program's tf32 overrides it).
    autotune_cache:   path of an autotune JSON file (runtime/cuda/autotune.py) that
                      aicfc-lower-exec consults; None looks in the default place
                      (`default_autotune_cache()`), "" disables it. A missing file
                      changes nothing.
    sync_each_launch: in eager mode, wait after every launch (errors name the kernel).
    graph_streams:    streams a captured graph's launches may be spread over
                      (runtime/schedule.py); 1 captures one chain in program order.
    device:           the CUDA device ordinal.
    communicator:     the NCCL communicator (runtime/cuda/nccl.py) that the programs'
                      `exec.all_reduce`s run over; None refuses such programs.
    Raises BackendUnavailable when CuPy or a GPU is missing (as get_backend does), and
    ValueError for a device ordinal this machine does not have, graph_streams < 1 or a
    communicator that is not NCCL's.
    """

    name = "cupy"
    kernel_family = "cuda"
    takes_device_arrays = True

    def __init__(
        self,
        graph: bool = True,
        tf32: bool = False,
        autotune_cache: str | None = None,
        sync_each_launch: bool = False,
        graph_streams: int = 4,
        device: int = 0,
        communicator: Communicator | None = None,
    ):
        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendUnavailable(f"backend 'cupy' cannot run here: {reason}")
        import cupy

        if int(graph_streams) < 1:
            raise ValueError(f"graph_streams must be at least 1, got {graph_streams}")
        if communicator is not None and communicator.kind != "nccl":
            raise ValueError(f"the cupy backend needs an NCCL communicator, got {communicator!r}")
        self.communicator = communicator
        self._comm_stream: Any = None
        count = cupy.cuda.runtime.getDeviceCount()
        if not 0 <= device < count:
            raise ValueError(f"device {device}: this machine has CUDA devices 0 to {count - 1}")
        self.graph = graph
        self.graph_streams = int(graph_streams)
        self._branches: list[Any] = []
        self.tf32 = tf32
        self.sync_each_launch = sync_each_launch
        self.device = cupy.cuda.Device(device)
        self.device.use()
        props = cupy.cuda.runtime.getDeviceProperties(device)
        self.arch = int(props["major"]) * 10 + int(props["minor"])
        self.sm_count = int(props["multiProcessorCount"])
        raw_name = props["name"]
        self.device_name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.autotune_cache = (
            default_autotune_cache() if autotune_cache is None else str(autotune_cache)
        )
        self._nvmath_reason = available()
        self._cublaslt: CublasLt | None = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import cupy
        except Exception:  # ImportError, or CuPy failing to find CUDA
            return "CuPy is not installed (pip install 'aicfc[cuda]')"
        try:
            ok = bool(cupy.cuda.is_available())
        except Exception:
            ok = False
        return None if ok else "CuPy sees no CUDA device"

    # --- arrays --------------------------------------------------------------

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        import cupy

        a = cupy.zeros(shape, dtype)
        cupy.cuda.Stream.null.synchronize()
        return a

    def to_numpy(self, array: Any) -> np.ndarray:
        import cupy

        self.stream.synchronize()
        return np.array(cupy.asnumpy(array), copy=True)

    def write(self, dest: Any, source: np.ndarray) -> None:
        import cupy

        self.stream.synchronize()
        dest.set(np.array(source, dtype=dest.dtype, order="C"))  # keeps 0-d arrays 0-d
        cupy.cuda.Stream.null.synchronize()

    def synchronize(self) -> None:
        self.stream.synchronize()

    def comm_stream(self) -> Any:
        """The stream collectives run on (made once: a capture only records on it)."""
        import cupy

        if self._comm_stream is None:
            self._comm_stream = cupy.cuda.Stream(non_blocking=True)
        return self._comm_stream

    def branch_streams(self, count: int) -> list[Any]:
        """`count` streams to fork from `self.stream` during a capture (made once, reused:
        a capture only records on them)."""
        import cupy

        while len(self._branches) < count:
            self._branches.append(cupy.cuda.Stream(non_blocking=True))
        return self._branches[:count]

    # --- capability and kernels --------------------------------------------------

    @property
    def device_key(self) -> str:
        """The device part of autotune keys: "NVIDIA H200 sm_90"."""
        return f"{self.device_name} sm_{self.arch}"

    def capability(self) -> dict[str, object]:
        """What the selector scores kernels against: the device, and TF32 allowed or not."""
        return {
            "arch": self.arch,
            "tf32": self.tf32,
            "tensor_core": self.arch >= 70,
            "cublaslt": self._nvmath_reason is None,
        }

    def runnable_capability(self) -> dict[str, object]:
        """What this process can launch: `capability()` with TF32 and our mma latency
        kernels wherever the chip has them (a TF32 or mma kernel in the IR is a compile-time
        choice, not something to refuse here)."""
        return {**self.capability(), "tf32": self.arch >= 80, "mma_small": self.arch >= 80}

    def lower_exec_options(self) -> dict[str, object]:
        cache = self.autotune_cache
        return {
            **self.capability(),
            "autotune_cache": cache if cache and Path(cache).is_file() else "",
            "device": self.device_key,
        }

    def cublaslt(self) -> CublasLt:
        if self._nvmath_reason is not None:
            raise CudaKernelError(f"cuBLASLt kernels cannot run: {self._nvmath_reason}")
        if self._cublaslt is None:
            self._cublaslt = CublasLt()
        return self._cublaslt

    def candidates(self) -> tuple[registry.KernelSpec, ...]:
        """The CUDA kernels this process can launch (library ones only with nvmath)."""
        cap = self.runnable_capability()
        return tuple(
            k
            for k in registry.REGISTRY
            if k.family == self.kernel_family and all(cap.get(r) for r in k.constraints.requires)
        )

    def verify(self, spec: registry.KernelSpec, problem: Problem) -> None:
        """Raise CudaKernelError if kernel `spec` (chosen by aicfc-lower-exec) cannot run
        `problem` on this device; the backend never substitutes another kernel."""
        why = refusal(spec, problem, self.runnable_capability())
        if why is not None:
            hint = (
                f" ({self._nvmath_reason})"
                if "cublaslt" in why and self._nvmath_reason is not None
                else ""
            )
            raise CudaKernelError(
                f'kernel "{spec.name}" cannot run {problem.op} {list(problem.input_shapes)} '
                f"on {self.device_key}: {why}{hint}; compile the program for this backend "
                "(aicfc.compile / Program pass its lower_exec_options() to aicfc-lower-exec)"
            )

    def load(self, program: ex.ProgramOp | ExecPlan, store: BufferStore) -> CupyExecutable:
        if store.backend.name != self.name:
            raise StoreError(f"a {store.backend.name} store cannot back a cupy program")
        plan = program if isinstance(program, ExecPlan) else ExecPlan.from_program(program)
        return CupyExecutable(self, plan, store)


DeviceCopies = tuple[tuple[str, Any], ...]
"""(input name, source device array) of each device input copied into its fixed buffer."""

GraphKey = tuple[tuple[str, ...], bool, Sources]
"""(the inputs copied from pinned host buffers, whether outputs are copied to the host, the
device inputs copied inside the graph with their source addresses: () for none)."""


class CupyExecutable(Executable):
    """A program loaded on the GPU: `arrays[slot]` is each buffer's fixed device array.

    context:  the LoadContext the launches were bound with (it keeps their workspaces
              and tables alive).
    kernels:  the registry name of every bound launch, in order (after grouping).
    nodes:    the bound launches by schedule node: one exec step, or one group of
              steps run as one launch (multi-tensor Adam); a node's launches run in
              order on one stream.
    accesses: what each node reads and writes (runtime/schedule.py regions).
    depends:  for each node, the earlier nodes it conflicts with (all of them).
    schedule: how a capture spreads the nodes over the backend's graph_streams.
    views:    result slot -> the slot whose bytes it shares (reshapes that launch nothing).
    replays:  how many times a captured graph has been launched.
    graphs:   the captured graphs by GraphKey (one per input/output mode used, and one
              per repeated set of device-input addresses, runtime/cuda/step_io.py).
    in_graph_copies: the rule that puts device-input copies inside a graph.
    """

    def __init__(self, backend: CupyBackend, plan: ExecPlan, store: BufferStore):
        import cupy

        super().__init__(backend, plan, store)
        self.backend: CupyBackend = backend
        self.context = DeviceContext(backend.sm_count, backend.cublaslt)
        self.arena = cupy.zeros(max(plan.arena_size or 0, 1), dtype=np.uint8)
        self.arrays: list[Any] = [self._allocate(b) for b in plan.buffers]
        # A reshape whose result may share its input's bytes reads them with its own shape
        # and launches nothing (runtime/schedule.py view_aliases says where that is safe).
        self.views = view_aliases(plan, self._is_view)
        for y, x in self.views.items():
            self.arrays[y] = self.arrays[x].reshape(plan.buffers[y].shape)
        self._slots = {
            b.name: b.slot for b in plan.buffers if b.role in ("input", "param", "state")
        }
        self._pinned_in = {n: PinnedBuffer(s.shape, s.dtype) for n, s in self.inputs.items()}
        self._pinned_out = {
            n: PinnedBuffer(plan.buffers[slot].shape, plan.buffers[slot].dtype)
            for n, slot in plan.outputs
        }
        self.nodes: list[list[Launch]] = []
        self.accesses: list[Access] = []
        self._bind()
        self.launches: list[Launch] = [la for node in self.nodes for la in node]
        self.kernels: tuple[str, ...] = tuple(launch.name for launch in self.launches)
        self.depends = dependencies(self.accesses)
        self.schedule: Schedule = schedule(direct(self.depends), backend.graph_streams)
        self._events: list[Any] = []
        # Reused every step (a wait orders after the record made before it, so re-recording
        # is safe): the caller's stream before a step's input copies, the step's end before
        # the caller's stream reads run_async's outputs.
        self._inputs_ready = cupy.cuda.Event(disable_timing=True)
        self._outputs_ready = cupy.cuda.Event(disable_timing=True)
        self.graphs: dict[GraphKey, CapturedGraph] = {}
        self._warm = False
        self._last: GraphKey = (tuple(self.inputs), True, ())
        self.in_graph_copies = InGraphCopies()
        self._output_blocks: dict[str, OutputBlocks] = {}
        self.replays = 0
        cupy.cuda.runtime.deviceSynchronize()

    # --- loading -------------------------------------------------------------

    def _allocate(self, b: BufferSpec) -> Any:
        import cupy

        if b.role in ("param", "state"):
            return self.store.declare(b.name, b.shape, b.dtype, b.role)
        if b.role == "const":
            assert b.value is not None
            return cupy.asarray(np.array(b.value, dtype=b.dtype).reshape(b.shape))
        if b.role == "tmp" and b.offset is not None:
            end = b.offset + b.nbytes
            if end > self.arena.size or b.offset % b.dtype.itemsize:
                raise ExecError(
                    f"@{self.plan.name}: buffer {b.name} at offset {b.offset} ({b.nbytes} bytes) "
                    f"does not fit the arena of {self.arena.size} bytes with {b.dtype} alignment"
                )
            return self.arena[b.offset : end].view(b.dtype).reshape(b.shape)
        return cupy.zeros(b.shape, b.dtype)

    @staticmethod
    def _is_view(step: LaunchStep) -> bool:
        spec = registry.KERNELS_BY_NAME.get(step.kernel)
        return spec is not None and spec.view

    def _problem(self, spec: registry.KernelSpec, step: LaunchStep) -> Problem:
        ins = [self.plan.buffers[i] for i in step.inputs]
        outs = [self.plan.buffers[o] for o in step.outputs]
        return Problem(
            op=spec.op,
            dtype=dtype_name(outs[0].dtype),
            input_shapes=tuple(b.shape for b in ins),
            output_shapes=tuple(b.shape for b in outs),
            input_dtypes=tuple(dtype_name(b.dtype) for b in ins),
            params=step.params,
        )

    def _spec(self, step: LaunchStep) -> registry.KernelSpec:
        where = self.where(step)
        spec = self.kernel_spec(step)
        try:
            self.backend.verify(spec, self._problem(spec, step))
        except CudaKernelError as e:
            raise CudaKernelError(f"{where}: {e}") from None
        return spec

    def _bind(self) -> None:
        """Bind every step group to its launches (`nodes`) and record what each reads and
        writes (`accesses`: its steps' buffers, plus the shared scratch its launches name)."""
        steps = self.plan.steps
        regions = aliased_regions(buffer_regions(self.plan), self.views)
        specs = [self._spec(s) if isinstance(s, LaunchStep) else None for s in steps]
        params: list[Mapping[str, object]] = [
            s.params if isinstance(s, LaunchStep) else {} for s in steps
        ]
        for group in group_steps(specs, params):
            first = steps[group.indices[0]]
            try:
                if isinstance(first, CopyStep):
                    node = [self._copy(first)]
                elif isinstance(first, CollectiveStep):
                    node = [self._all_reduce(first)]
                else:
                    spec = specs[group.indices[0]]
                    assert spec is not None
                    buffers = [
                        ([self.arrays[i] for i in s.inputs], [self.arrays[o] for o in s.outputs])
                        for s in (steps[i] for i in group.indices)
                        if isinstance(s, LaunchStep)
                    ]
                    if len(buffers) > 1:
                        node = launch_adam_group(spec, buffers, first.params, self.context)
                    else:
                        ins, outs = buffers[0]
                        node = launches_for(spec, ins, outs, first.params, self.context)
            except CudaKernelError as e:
                raise CudaKernelError(f"{self.where(first)}: {e}") from None
            self.nodes.append(node)
            scratch = [name for la in node for name in la.scratch]
            self.accesses.append(node_access(self.plan, group.indices, regions, scratch))

    def _all_reduce(self, step: CollectiveStep) -> Launch:
        """The collective as one launch: on the communication stream, between an event
        recorded on the issuing stream and one the issuing stream waits for."""
        import cupy

        comm = self.communicator
        assert comm is not None  # bind_communicator refused the plan otherwise
        bucket = self.arrays[step.bucket]
        tensors = [self.arrays[i] for i in step.tensors]
        views = [bucket[a:b] for a, b in step.slices]
        comm_stream = self.backend.comm_stream()
        ready = cupy.cuda.Event(disable_timing=True)
        done = cupy.cuda.Event(disable_timing=True)
        op = step.reduce

        def issue(stream: Any) -> None:
            ready.record(stream)
            comm_stream.wait_event(ready)
            for view, t in zip(views, tensors, strict=True):
                copy_on_device(view, t, comm_stream)
            comm.all_reduce(bucket, op, comm_stream)
            for view, t in zip(views, tensors, strict=True):
                copy_on_device(t, view, comm_stream)
            done.record(comm_stream)
            stream.wait_event(done)

        return CallbackLaunch(
            name="exec.all_reduce",
            shapes=describe([*tensors, bucket]),
            issue=issue,
            keepalive=[ready, done, views],
        )

    def _copy(self, step: CopyStep) -> Launch:
        src, dst = self.arrays[step.source], self.arrays[step.dest]
        if src.nbytes != dst.nbytes:
            raise CudaKernelError(
                f"exec.copy between buffers of {src.nbytes} and {dst.nbytes} bytes"
            )
        return CallbackLaunch(
            name="exec.copy",
            shapes=describe([src, dst]),
            issue=lambda stream: copy_on_device(dst, src, stream),
        )

    # --- running -------------------------------------------------------------

    def _issue(
        self,
        stream: Any,
        host_inputs: tuple[str, ...],
        host_outputs: bool,
        sync_each: bool,
        branched: bool = False,
        device: DeviceCopies = (),
    ) -> None:
        """Enqueue one step on `stream`: the host input copies, the device input copies
        (`device`: (name, source array) pairs), the launches (in program order, or
        `branched` over forked streams as `self.schedule` says, for a capture), then the
        output copies."""
        for name in host_inputs:
            copy_to_device(self.arrays[self.inputs[name].slot], self._pinned_in[name], stream)
        for name, src in device:
            copy_on_device(self.arrays[self.inputs[name].slot], src, stream)
        if branched:
            nodes = [self._node_issuer(node) for node in self.nodes]
            branches = self.backend.branch_streams(self.schedule.streams - 1)
            fork, events = self._events[0], self._events[1:]
            issue_schedule(self.schedule, nodes, stream, branches, events, fork)
        else:
            for launch in self.launches:
                launch(stream)
                if sync_each:
                    self._wait(launch)
        if host_outputs:
            for name, slot in self.plan.outputs:
                copy_to_host(self._pinned_out[name], self.arrays[slot], stream)

    @staticmethod
    def _node_issuer(node: list[Launch]) -> Any:
        def issue(stream: Any) -> None:
            for launch in node:
                launch(stream)

        return issue

    def _wait(self, launch: Launch | None = None) -> None:
        try:
            self.backend.stream.synchronize()
        except Exception as e:  # CUDA errors surface at the next synchronization
            if launch is not None:
                raise launch.error(e, "run") from None
            raise CudaKernelError(
                f"@{self.plan.name}: a CUDA error surfaced while running its {len(self.launches)} "
                f"launches: {e} (load with CupyBackend(graph=False, sync_each_launch=True) to "
                "name the kernel)"
            ) from None

    def _step(
        self, host_inputs: tuple[str, ...], host_outputs: bool, device: DeviceCopies, own: bool
    ) -> None:
        """One step after `_stage`: the device copies inside a graph where the rule of
        `in_graph_copies` says so (the same source addresses as the step before, or a
        graph that already copies from them; only for the caller's own arrays, `own`),
        else enqueued before the plain graph."""
        plain: GraphKey = (host_inputs, host_outputs, ())
        sources = tuple((name, int(src.data.ptr)) for name, src in device) if own else ()
        inside = self.backend.graph and self._warm and self.in_graph_copies.choose(sources)
        for old in self.in_graph_copies.take_evicted():
            for key in [k for k in self.graphs if k[2] == old]:
                del self.graphs[key]
        if inside:
            self._execute((host_inputs, host_outputs, sources), device)
        else:
            for name, src in device:
                copy_on_device(self.arrays[self.inputs[name].slot], src, self.backend.stream)
            self._execute(plain)
        self._last = plain  # replay() re-reads the fixed input buffers, never a user's array

    def _execute(self, key: GraphKey, device: DeviceCopies = ()) -> None:
        """Run the step of `key` (`device`: the copies of its sources, for a capture)."""
        stream = self.backend.stream
        host_inputs, host_outputs, _ = key
        self._last = key
        if not self.backend.graph:
            self._issue(stream, host_inputs, host_outputs, self.backend.sync_each_launch)
        elif not self._warm:
            self._issue(stream, host_inputs, host_outputs, False)  # the warm-up is a real step
            self._wait()
            self._warm = True
            self.graphs[key] = self._capture(key)
        else:
            if key not in self.graphs:
                self.graphs[key] = self._capture(key, device)
            self.graphs[key].launch(stream)
            self.replays += 1

    def _capture(self, key: GraphKey, device: DeviceCopies = ()) -> CapturedGraph:
        import cupy

        host_inputs, host_outputs, _ = key
        branched = self.schedule.branched
        if branched:
            # Streams and events exist before capture begins (nothing is created inside).
            self.backend.branch_streams(self.schedule.streams - 1)
            while len(self._events) < len(self.nodes) + 1:  # [fork, one per node]
                self._events.append(cupy.cuda.Event(disable_timing=True))
        return capture(
            lambda stream: self._issue(stream, host_inputs, host_outputs, False, branched, device),
            self.backend.stream,
            f"@{self.plan.name}" + (f" ({self.schedule.streams} streams)" if branched else ""),
        )

    @property
    def captured(self) -> bool:
        """True once the step has been captured as a CUDA graph."""
        return bool(self.graphs)

    def _stage(self, inputs: Mapping[str, Any]) -> tuple[tuple[str, ...], DeviceCopies, bool]:
        """Check `inputs`, fill the pinned buffers of the host ones and order the step after
        the caller's stream for the device ones; returns the host inputs' names, the
        device copies to make ((name, source array): none where the source is the fixed
        buffer itself) and whether every source is the caller's own array (not a
        contiguous copy made here, which only this step may read)."""
        import cupy

        as_cupy = {
            n: cupy.asarray(a)
            if hasattr(a, "__cuda_array_interface__") and not isinstance(a, cupy.ndarray)
            else a
            for n, a in inputs.items()
        }
        checked = self.check_inputs(as_cupy)
        host = {n: a for n, a in checked.items() if not isinstance(a, cupy.ndarray)}
        device = {n: a for n, a in checked.items() if isinstance(a, cupy.ndarray)}
        stream = self.backend.stream
        if host:
            stream.synchronize()  # an earlier replay may still read the pinned inputs
            for name, arr in host.items():
                np.copyto(self._pinned_in[name].array, arr)
        if device:
            for name, arr in device.items():
                if arr.device.id != self.backend.device.id:
                    raise InputError(
                        f'@{self.plan.name}: input "{name}" is on GPU {arr.device.id}, the '
                        f"program on GPU {self.backend.device.id}"
                    )
            own = all(a.flags.c_contiguous for a in device.values())
            sources = {
                n: a if a.flags.c_contiguous else cupy.ascontiguousarray(a)
                for n, a in device.items()
            }
            # The caller's work on the inputs (its current stream) comes first.
            self._inputs_ready.record(cupy.cuda.get_current_stream())
            stream.wait_event(self._inputs_ready)
            copies = tuple(
                (name, src)
                for name, src in sources.items()
                if src.data.ptr != self.arrays[self.inputs[name].slot].data.ptr
            )
            return tuple(n for n in self.inputs if n in host), copies, own
        return tuple(n for n in self.inputs if n in host), (), True

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One step; inputs are NumPy or CuPy arrays. Waits, returns new NumPy outputs."""
        host_inputs, device, own = self._stage(inputs)
        self._step(host_inputs, True, device, own)
        self._wait()
        return {name: pinned.array.copy() for name, pinned in self._pinned_out.items()}

    def run_async(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """One step without waiting; returns each output as a new CuPy array.

        The copies are made on the backend's stream after the step, and the
        caller's current stream waits for them, so work queued there reads the
        finished values; a later step never changes them.
        """
        import cupy

        host_inputs, device, own = self._stage(inputs)
        self._step(host_inputs, False, device, own)
        stream = self.backend.stream
        outs: dict[str, Any] = {}
        with stream:
            for name, slot in self.plan.outputs:
                src = self.arrays[slot]
                blocks = self._output_blocks.get(name)
                if blocks is None:  # views of preallocated blocks, never reused
                    count = block_count(int(src.nbytes))
                    blocks = OutputBlocks(src.shape, src.dtype, cupy.empty, count)
                    self._output_blocks[name] = blocks
                outs[name] = blocks.next()
                copy_on_device(outs[name], src, stream)
        self._outputs_ready.record(stream)
        cupy.cuda.get_current_stream().wait_event(self._outputs_ready)
        return outs

    def replay(self, count: int = 1) -> None:
        """Launch the step `count` times on the inputs of the last run, without waiting.

        For benchmarks: the inputs are what the fixed (device) or pinned (host)
        input buffers hold; outputs land in the program's buffers and are not
        returned; call `backend.synchronize()` before reading anything. Needs
        one `run()` or `run_async()` first (it captures).
        """
        if self.backend.graph and not self.graphs:
            raise ExecError(f"@{self.plan.name}: replay() needs one run() first (it captures)")
        for _ in range(count):
            self._execute(self._last)

    def buffer(self, name: str) -> Any:
        slot = self._slots.get(name)
        if slot is None:
            raise ExecError(f'@{self.plan.name}: no external buffer "{name}"')
        return self.arrays[slot]
