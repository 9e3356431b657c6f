"""The runtime interface that the NumPy and CuPy backends implement.

A backend executes an `exec.program` (architecture §4-§5, docs/design.md#fixed-device-buffers):

    backend = aicfc.backends.get_backend("numpy")   # or "cupy", or "auto"
    store = backend.create_store()              # params and state, by name
    step = backend.load(train_program, store)   # buffers allocated once, here
    predict = backend.load(predict_program, store)   # sees the same parameter arrays
    loss = step.run({"x": x, "y": y})["loss"]   # copy inputs in, launch, copy outputs out

- `Backend` allocates arrays and loads a program (an `ExecPlan`,
  runtime/plan.py) against a `BufferStore` (runtime/store.py) into an
  `Executable`.
- `Executable.run` checks each input (name, shape, dtype), copies it into the
  program's fixed input buffer, runs every step in order and returns the named
  outputs as fresh NumPy copies. Params and state are updated in place where
  the IR aliases them (after `aicfc-fold-inplace`) or by `exec.copy`.

Errors are `ExecError` subclasses (runtime/errors.py) whose message names the
buffer, input or kernel at fault. This module imports no backend: the concrete
ones are runtime/numpy/ and runtime/cuda/, found by name in aicfc/backends.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.runtime import registry
from aicfc.runtime.collectives import Communicator
from aicfc.runtime.errors import ExecError, InputError
from aicfc.runtime.plan import BufferSpec, ExecPlan, LaunchStep, PlanStep
from aicfc.runtime.store import Array, BufferStore


class Backend(ABC):
    """A runtime: allocates arrays and loads exec programs into Executables.

    name:          the backend's name ("numpy", "cupy"; runtime/backend_names.py BACKENDS).
    kernel_family: the kernel family whose kernels it launches ("numpy", "cuda"):
                   programs lowered with `aicfc-lower-exec{backend=<name>}` use them.
    """

    name: ClassVar[str]
    kernel_family: ClassVar[str]
    takes_device_arrays: ClassVar[bool] = False
    """Whether `Executable.run` accepts arrays already on the device as inputs."""
    communicator: Communicator | None = None
    """What the `exec.communicator`s of the programs it loads bind to (data parallelism;
    runtime/collectives.py), or None: such a program is then refused at load."""

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run here (no CuPy, no GPU), or None if it can."""
        return None

    @abstractmethod
    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Array:
        """A new zero-filled array of this backend."""

    @abstractmethod
    def to_numpy(self, array: Array) -> np.ndarray:
        """A NumPy copy of a backend array (never a view of it)."""

    @abstractmethod
    def write(self, dest: Array, source: np.ndarray) -> None:
        """Copy host data into an existing backend array, in place (same shape and dtype)."""

    @abstractmethod
    def load(self, program: ex.ProgramOp | ExecPlan, store: BufferStore) -> Executable:
        """Allocate the program's buffers once and return its Executable.

        Params and state come from `store` (created zero-filled when missing,
        checked when present). Raises ExecError naming the buffer or kernel at fault.
        """

    def create_store(self) -> BufferStore:
        """An empty BufferStore of this backend."""
        return BufferStore(self)

    def lower_exec_options(self) -> dict[str, object]:
        """The options of `aicfc-lower-exec` that describe this backend's device.

        For CUDA: arch, tf32 (allowed), tensor_core, cublaslt (usable here),
        autotune_cache and device (the cache's device key). The API passes them
        to the pipeline, so the exec IR names the kernels this backend runs.
        Empty for the CPU (every NumPy kernel runs anywhere).
        """
        return {}

    def synchronize(self) -> None:  # noqa: B027 (a no-op unless the backend queues work)
        """Wait until queued device work is done (a no-op on the CPU)."""


def bind_communicator(plan: ExecPlan, comm: Communicator | None) -> Communicator | None:
    """The communicator the plan's `exec.communicator`s bind to (None if it has none).

    Raises ExecError when the plan needs one and `comm` is None, or when a declared
    world size differs from `comm.world_size`.
    """
    for name, size in plan.communicators:
        if comm is None:
            raise ExecError(
                f'@{plan.name}: needs the communicator "{name}" of {size} ranks (its gradients '
                "are all-reduced) and the backend has none: compile it with "
                "aicfc.compile(..., data_parallel=...) or give the backend a communicator"
            )
        if comm.world_size != size:
            raise ExecError(
                f'@{plan.name}: communicator "{name}" is declared with world_size {size}, '
                f"the backend's has {comm.world_size} ranks"
            )
    return comm if plan.communicators else None


class Executable(ABC):
    """A loaded program: fixed buffers and the steps that run on them.

    backend: the Backend that loaded it.
    plan:    the program as data (ExecPlan).
    store:   the BufferStore holding its params and state.
    communicator: what its collectives run over (None for a program without any).
    inputs:  the input buffers' specs by name (shape, dtype).
    outputs: the names `run` returns, in program order.
    """

    def __init__(self, backend: Backend, plan: ExecPlan, store: BufferStore):
        self.backend = backend
        self.plan = plan
        self.store = store
        self.inputs: dict[str, BufferSpec] = plan.inputs()
        self.outputs: tuple[str, ...] = tuple(n for n, _ in plan.outputs)
        self.communicator = bind_communicator(plan, backend.communicator)

    @property
    def name(self) -> str:
        return self.plan.name

    def where(self, step: PlanStep) -> str:
        """`@program (file:line:col)` of a step, for error messages."""
        return f"@{self.plan.name}" + (f" ({step.location})" if step.location else "")

    def kernel_spec(self, step: LaunchStep) -> registry.KernelSpec:
        """The registry entry of a launch's kernel.

        Raises ExecError (naming the program and the op's location) when the
        kernel is not registered or is of another kernel family than the backend's.
        """
        backend = self.backend
        try:
            spec = registry.get(step.kernel)
        except registry.UnknownKernelError:
            where = self.where(step)
            raise ExecError(f'{where}: kernel "{step.kernel}" is not registered') from None
        if spec.family != backend.kernel_family:
            raise ExecError(
                f'{self.where(step)}: kernel "{step.kernel}" is a {spec.family} kernel; lower '
                f"the program with aicfc-lower-exec{{backend={backend.name}}} to run it "
                f"on the {backend.name} backend"
            )
        return spec

    @abstractmethod
    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One execution: copy `inputs` into the input buffers, run, return outputs.

        inputs: every input by name, each with the declared shape and dtype.
        Returns each named output as a new NumPy array (later runs do not change it).
        Raises InputError for a missing, unknown or mis-shaped input, ExecError
        naming the kernel when a launch fails.
        """

    def run_async(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        """Like `run`, but the outputs stay arrays of the backend and nothing waits.

        Each output is a new array (a later run never changes it). On a GPU
        backend the step is only enqueued: reading an output waits for it. The
        default runs synchronously and returns `run`'s NumPy arrays.
        """
        return dict(self.run(inputs))

    @abstractmethod
    def buffer(self, name: str) -> Array:
        """The fixed array of an external (input, param or state) named `name`."""

    def check_inputs(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """`inputs` checked against the program's input buffers (names, shapes, dtypes).

        Arrays with `shape` and `dtype` (NumPy, or a device array of the backend)
        are returned as they are; anything else goes through `np.asarray`.
        """
        where = f"@{self.plan.name}"
        unknown = [n for n in inputs if n not in self.inputs]
        if unknown:
            raise InputError(
                f"{where}: unknown input {', '.join(repr(n) for n in unknown)} "
                f"(inputs: {', '.join(self.inputs) or 'none'})"
            )
        checked: dict[str, Any] = {}
        for name, spec in self.inputs.items():
            if name not in inputs:
                raise InputError(f'{where}: missing input "{name}" ({spec.describe()})')
            arr = inputs[name]
            if not (hasattr(arr, "shape") and hasattr(arr, "dtype")):
                arr = np.asarray(arr)
            if arr.shape != spec.shape or arr.dtype != spec.dtype:
                raise InputError(
                    f'{where}: input "{name}" expects {spec.describe()}, '
                    f"got {arr.dtype}{list(arr.shape)}"
                )
            checked[name] = arr
        return checked
