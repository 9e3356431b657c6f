"""The CuPy backend: an exec program as CUDA kernels, the whole step one CUDA graph.

Seed 000 is the specification; runtime/backend.py is the interface.

- Buffers are allocated once, at load: params and state in the BufferStore
  (shared with every program loaded against it), inputs as fixed device arrays
  fed from pinned host buffers, planned tmp buffers as views into one arena.
  In-place execution needs nothing more: an output that `aicfc-fold-inplace`
  made the same exec buffer as an input is the same slot, hence the same array
  and device pointer (seed 000 §7, §10.1).
- Each launch is bound at load (runtime/cuda_launch.py, runtime/cublaslt.py):
  module compiled and ABI-checked, scalars converted to their C types, grid
  fixed, cuBLASLt planned, workspaces zeroed. Consecutive Adam launches become
  one multi-tensor launch.
- `graph=True` (the default): the first `run()` executes the step eagerly (it
  is the warm-up, and a real step), then the step is captured once on the
  backend's dedicated stream, input copies and output copies included; every
  later `run()` writes the inputs into the pinned buffers, replays the graph
  and copies the outputs into new NumPy arrays. Params and state are never
  copied in (mode train of seed 000 §8.2): they accumulate in their fixed
  buffers, and `load_state_dict` writes into those buffers, so a checkpoint
  load needs no new capture. A program without state (predict) is the
  inference mode with the same mechanism. `graph=False` is the eager mode: one
  launch at a time, for debugging; `sync_each_launch=True` additionally waits
  after each launch so that a CUDA error names the kernel that raised it.
- GEMM launches are selected again at load (runtime/selector.py) with the
  device's real capability: its architecture, whether TF32 is allowed
  (`tf32=True`; off by default so results stay strict fp32), whether
  nvmath-python's cuBLASLt is importable, and the autotune cache
  (`autotune_cache=path`, runtime/autotune.py). Other launches keep the kernel
  that aicfc-lower-exec chose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.runtime import cublaslt as cublaslt_mod
from aicfc.runtime import registry
from aicfc.runtime.backend import (
    Backend,
    BufferSpec,
    BufferStore,
    CopyStep,
    ExecError,
    ExecPlan,
    Executable,
    LaunchStep,
    StoreError,
)
from aicfc.runtime.capture import (
    CapturedGraph,
    PinnedBuffer,
    capture,
    copy_on_device,
    copy_to_device,
    copy_to_host,
)
from aicfc.runtime.cuda_abi import CallbackLaunch, CudaKernelError, Launch, describe
from aicfc.runtime.cuda_launch import group_steps, launch_adam_group, launches_for
from aicfc.runtime.selector import AutotuneCache, NoKernelError, Problem, select

RESELECT_OPS = frozenset({"graph.gemm_epilogue", "graph.matmul"})
"""Ops whose kernel the backend chooses again at load, with the device's capability."""

DTYPE_NAMES = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "bool": "i1",
    "int32": "i32",
    "int64": "i64",
}


def dtype_name(dtype: np.dtype) -> str:
    """The registry's dtype name ("f32") of a NumPy dtype."""
    return DTYPE_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


class CupyBackend(Backend):
    """The GPU runtime (CuPy, CUDA graphs). See the module docstring for the options.

    graph:            capture the step once and replay it (False: eager launches).
    tf32:             allow TF32 tensor-core GEMMs (about 1e-3 relative error).
    autotune_cache:   path of an autotune JSON file consulted when GEMMs are selected.
    sync_each_launch: in eager mode, wait after every launch (errors name the kernel).
    device:           the CUDA device ordinal.
    Raises BackendUnavailable (through get_backend) when CuPy or a GPU is missing.
    """

    name = "cupy"
    kernel_backend = "cuda"

    def __init__(
        self,
        graph: bool = True,
        tf32: bool = False,
        autotune_cache: str | None = None,
        sync_each_launch: bool = False,
        device: int = 0,
    ):
        import cupy

        self.graph = graph
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
        self.autotune = AutotuneCache(autotune_cache) if autotune_cache else None
        self._nvmath_reason = cublaslt_mod.available()
        self._cublaslt: cublaslt_mod.CublasLt | None = None

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

    # --- capability and selection ----------------------------------------------

    @property
    def device_key(self) -> str:
        """The device part of autotune keys: "NVIDIA H200 sm_90"."""
        return f"{self.device_name} sm_{self.arch}"

    def capability(self) -> dict[str, object]:
        return {
            "arch": self.arch,
            "tf32": self.tf32,
            "tensor_core": self.arch >= 70,
            "nvmath": self._nvmath_reason is None,
        }

    def cublaslt(self) -> cublaslt_mod.CublasLt:
        if self._nvmath_reason is not None:
            raise CudaKernelError(f"cuBLASLt kernels cannot run: {self._nvmath_reason}")
        if self._cublaslt is None:
            self._cublaslt = cublaslt_mod.CublasLt()
        return self._cublaslt

    def candidates(self) -> tuple[registry.KernelSpec, ...]:
        """The CUDA kernels this process can launch (library ones only with nvmath)."""
        return tuple(
            k
            for k in registry.REGISTRY
            if k.backend == "cuda" and ("library" not in k.flags or self._nvmath_reason is None)
        )

    def choose(self, spec: registry.KernelSpec, problem: Problem) -> registry.KernelSpec:
        """The kernel to run `problem`: lower-exec's `spec`, or for GEMMs the load-time choice."""
        if spec.op not in RESELECT_OPS:
            return spec
        try:
            return select(
                problem,
                "cuda",
                self.capability(),
                self.autotune,
                self.device_key,
                registry=self.candidates(),
            ).spec
        except NoKernelError as e:
            raise CudaKernelError(f"{problem.op} {problem.input_shapes}: {e}") from None

    def load(self, program: ex.ProgramOp | ExecPlan, store: BufferStore) -> CupyExecutable:
        if store.backend.name != self.name:
            raise StoreError(f"a {store.backend.name} store cannot back a cupy program")
        plan = program if isinstance(program, ExecPlan) else ExecPlan.from_program(program)
        return CupyExecutable(self, plan, store)


def _where(plan: ExecPlan, step: LaunchStep | CopyStep) -> str:
    return f"@{plan.name}" + (f" ({step.location})" if step.location else "")


class CupyExecutable(Executable):
    """A program loaded on the GPU: `arrays[slot]` is each buffer's fixed device array.

    kernels: the registry name of every bound launch, in order (after grouping).
    replays: how many times the captured graph has been launched.
    """

    def __init__(self, backend: CupyBackend, plan: ExecPlan, store: BufferStore):
        import cupy

        super().__init__(plan, store)
        self.backend = backend
        self.sm_count = backend.sm_count
        self.tf32 = backend.tf32
        self._keep: list[Any] = []
        self.arena = cupy.zeros(max(plan.arena_size or 0, 1), dtype=np.uint8)
        self.arrays: list[Any] = [self._allocate(b) for b in plan.buffers]
        self._slots = {
            b.name: b.slot for b in plan.buffers if b.role in ("input", "param", "state")
        }
        self._pinned_in = {n: PinnedBuffer(s.shape, s.dtype) for n, s in self.inputs.items()}
        self._pinned_out = {
            n: PinnedBuffer(plan.buffers[slot].shape, plan.buffers[slot].dtype)
            for n, slot in plan.outputs
        }
        self.launches: list[Launch] = self._bind()
        self.kernels: tuple[str, ...] = tuple(launch.name for launch in self.launches)
        self._graph: CapturedGraph | None = None
        self.replays = 0
        cupy.cuda.runtime.deviceSynchronize()

    # --- LoadContext (runtime/cuda_launch.py) -----------------------------------

    def workspace(self, nbytes: int) -> Any:
        import cupy

        ws = cupy.zeros(max(256, -(-nbytes // 256) * 256), dtype=np.uint8)
        self._keep.append(ws)
        return ws

    def table(self, values: np.ndarray) -> Any:
        import cupy

        t = cupy.asarray(np.ascontiguousarray(values, dtype=np.int64))
        self._keep.append(t)
        return t

    def cublaslt(self) -> Any:
        return self.backend.cublaslt()

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
        where = _where(self.plan, step)
        try:
            spec = registry.get(step.kernel)
        except registry.UnknownKernelError:
            raise ExecError(f'{where}: kernel "{step.kernel}" is not registered') from None
        if spec.backend != CupyBackend.kernel_backend:
            raise ExecError(
                f'{where}: kernel "{step.kernel}" is a {spec.backend} kernel; lower the program '
                "with aicfc-lower-exec{backend=cuda} to run it on the cupy backend"
            )
        return self.backend.choose(spec, self._problem(spec, step))

    def _bind(self) -> list[Launch]:
        steps = self.plan.steps
        specs = [None if isinstance(s, CopyStep) else self._spec(s) for s in steps]
        params: list[Mapping[str, object]] = [
            {} if isinstance(s, CopyStep) else s.params for s in steps
        ]
        launches: list[Launch] = []
        for group in group_steps(specs, params):
            first = steps[group.indices[0]]
            try:
                if isinstance(first, CopyStep):
                    launches.append(self._copy(first))
                    continue
                spec = specs[group.indices[0]]
                assert spec is not None
                buffers = [
                    ([self.arrays[i] for i in s.inputs], [self.arrays[o] for o in s.outputs])
                    for s in (steps[i] for i in group.indices)
                    if isinstance(s, LaunchStep)
                ]
                if len(buffers) > 1:
                    launches.extend(launch_adam_group(spec, buffers, first.params, self))
                else:
                    ins, outs = buffers[0]
                    launches.extend(launches_for(spec, ins, outs, first.params, self))
            except CudaKernelError as e:
                raise CudaKernelError(f"{_where(self.plan, first)}: {e}") from None
        return launches

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

    def _issue(self, stream: Any, sync_each: bool = False) -> None:
        for name, pinned in self._pinned_in.items():
            copy_to_device(self.arrays[self.inputs[name].slot], pinned, stream)
        for launch in self.launches:
            launch(stream)
            if sync_each:
                self._wait(launch)
        for name, slot in self.plan.outputs:
            copy_to_host(self._pinned_out[name], self.arrays[slot], stream)

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

    def _execute(self) -> None:
        stream = self.backend.stream
        if not self.backend.graph:
            self._issue(stream, self.backend.sync_each_launch)
        elif self._graph is None:
            self._issue(stream)  # the warm-up is the first real step, run eagerly
            self._wait()
            self._graph = capture(self._issue, stream, f"@{self.plan.name}")
        else:
            self._graph.launch(stream)
            self.replays += 1

    @property
    def captured(self) -> bool:
        """True once the step has been captured as a CUDA graph."""
        return self._graph is not None

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        checked = self.check_inputs(inputs)
        self.backend.stream.synchronize()  # an earlier replay() may still read the pinned inputs
        for name, arr in checked.items():
            np.copyto(self._pinned_in[name].array, arr)
        self._execute()
        self._wait()
        return {name: pinned.array.copy() for name, pinned in self._pinned_out.items()}

    def replay(self, count: int = 1) -> None:
        """Launch the step `count` times on the inputs of the last `run()`, without waiting.

        For benchmarks: outputs land in the pinned buffers and are not returned;
        call `backend.synchronize()` before reading anything. Needs one `run()` first.
        """
        if self.backend.graph and self._graph is None:
            raise ExecError(f"@{self.plan.name}: replay() needs one run() first (it captures)")
        for _ in range(count):
            self._execute()

    def buffer(self, name: str) -> Any:
        slot = self._slots.get(name)
        if slot is None:
            raise ExecError(f'@{self.plan.name}: no external buffer "{name}"')
        return self.arrays[slot]
