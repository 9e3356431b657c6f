"""The runtime interface that the NumPy and CuPy backends implement.

A backend executes an `exec.program` (architecture §4-§5, docs/design.md#fixed-device-buffers):

    backend = get_backend("numpy")              # or "cupy", or "auto"
    store = backend.create_store()              # params and state, by name
    step = backend.load(train_program, store)   # buffers allocated once, here
    predict = backend.load(predict_program, store)   # sees the same parameter arrays
    loss = step.run({"x": x, "y": y})["loss"]   # copy inputs in, launch, copy outputs out

- `ExecPlan` is the program read into plain data (buffer slots, launch and
  copy steps, outputs), so a backend never walks xDSL IR while running.
- `BufferStore` owns the param and state buffers by name. Programs loaded
  against one store share them; externals keep fixed buffers for life, so a
  captured CUDA graph stays valid and `load_state_dict` writes into them.
- `Executable.run` checks each input (name, shape, dtype), copies it into the
  program's fixed input buffer, runs every step in order and returns the named
  outputs as fresh NumPy copies. Params and state are updated in place where
  the IR aliases them (after `aicfc-fold-inplace`) or by `exec.copy`.

Errors are `ExecError` subclasses whose message names the buffer, input or
kernel at fault. This module imports no backend: `get_backend` imports
`numpy_backend` or `cupy_backend` on demand.
"""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.dialects.diagnostics import location_of
from aicfc.dialects.params import ParamValue
from aicfc.runtime import registry
from aicfc.runtime.interpreter import InterpreterError, dense_to_numpy, numpy_dtype
from aicfc.runtime.registry import runtime_name

Array = Any
"""A backend array: numpy.ndarray for "numpy", cupy.ndarray for "cupy"."""

STORED_ROLES = ("param", "state")
"""Roles whose buffers live in the BufferStore (inputs belong to each Executable)."""


class ExecError(RuntimeError):
    """A runtime error that names the program, buffer, input or kernel at fault."""


class InputError(ExecError, ValueError):
    """A missing, unknown or mis-shaped input to `Executable.run`."""


class StoreError(ExecError, KeyError):
    """A buffer-store mismatch: shape, dtype or role of a named buffer, or an unknown name."""

    def __str__(self) -> str:
        return str(self.args[0])


class BackendUnavailable(ExecError):
    """The requested backend cannot run here (module, CuPy or GPU missing)."""


# ----------------------------------------------------------------------------
# The program as plain data
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BufferSpec:
    """One buffer of a program: its slot, stable name, role, shape, dtype.

    offset: bytes into the arena for planned tmp buffers (else None).
    value:  the data of a const buffer (else None).
    """

    slot: int
    name: str
    role: str
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int | None = None
    value: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def describe(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class LaunchStep:
    """exec.launch: kernel name, input slots, output slots, scalar params, source location."""

    kernel: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: Mapping[str, ParamValue]
    location: str | None = None


@dataclass(frozen=True)
class CopyStep:
    """exec.copy: dest = source (slots)."""

    source: int
    dest: int
    location: str | None = None


@dataclass(frozen=True)
class ExecPlan:
    """An exec.program as data: buffers by slot, the steps in order, the outputs."""

    name: str
    buffers: tuple[BufferSpec, ...]
    steps: tuple[LaunchStep | CopyStep, ...]
    outputs: tuple[tuple[str, int], ...]
    arena_size: int | None = None

    @staticmethod
    def from_program(program: ex.ProgramOp) -> ExecPlan:
        """Read `program`; raises ExecError for a buffer dtype NumPy cannot hold."""
        pname = program.sym_name.data
        slots: dict[int, int] = {}
        buffers: list[BufferSpec] = []
        steps: list[LaunchStep | CopyStep] = []
        outputs: list[tuple[str, int]] = []

        def add(value: Any, name: str, offset: int | None = None, data: Any = None) -> None:
            t = ex.buffer_type(value)
            try:
                dtype = numpy_dtype(t.element_type)
            except InterpreterError:
                raise ExecError(
                    f'@{pname}: buffer "{name}" has element type {t.element_type}, '
                    "which this runtime cannot hold"
                ) from None
            slots[id(value)] = len(buffers)
            buffers.append(
                BufferSpec(
                    len(buffers), name, t.buffer_role.value, t.get_shape(), dtype, offset, data
                )
            )

        for op in program.block.ops:
            if isinstance(op, ex.BufferOp):
                add(op.result, op.buffer_name.data)
            elif isinstance(op, ex.AllocOp):
                hint = op.result.name_hint
                off = op.offset.value.data if op.offset is not None else None
                add(op.result, f"%{hint}" if hint else f"tmp{len(buffers)}", off)
            elif isinstance(op, ex.ConstantOp):
                add(op.result, f"const{len(buffers)}", data=dense_to_numpy(op.value))
            elif isinstance(op, ex.GraphOp):
                for s in op.block.ops:
                    if isinstance(s, ex.LaunchOp):
                        steps.append(
                            LaunchStep(
                                s.kernel_name,
                                tuple(slots[id(v)] for v in s.inputs),
                                tuple(slots[id(v)] for v in s.outputs),
                                s.scalar_params(),
                                location_of(s),
                            )
                        )
                    elif isinstance(s, ex.CopyOp):
                        steps.append(
                            CopyStep(slots[id(s.source)], slots[id(s.dest)], location_of(s))
                        )
            elif isinstance(op, ex.OutputOp):
                outputs.append((op.buffer_name.data, slots[id(op.value)]))
        arena = program.arena_size.value.data if program.arena_size is not None else None
        return ExecPlan(pname, tuple(buffers), tuple(steps), tuple(outputs), arena)

    def inputs(self) -> dict[str, BufferSpec]:
        return {b.name: b for b in self.buffers if b.role == "input"}


# ----------------------------------------------------------------------------
# Backend, store, executable
# ----------------------------------------------------------------------------


class Backend(ABC):
    """A runtime: allocates arrays and loads exec programs into Executables.

    name:           the runtime's name ("numpy", "cupy").
    kernel_backend: the registry backend whose kernels it launches ("numpy",
                    "cuda"): lower with `aicfc-lower-exec{backend=<kernel_backend>}`.
    """

    name: ClassVar[str]
    kernel_backend: ClassVar[str]
    takes_device_arrays: ClassVar[bool] = False
    """Whether `Executable.run` accepts arrays already on the device as inputs."""

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


class BufferStore:
    """The param and state buffers by name, shared by every program loaded against it.

    A buffer keeps its identity for the store's lifetime: loading a program,
    a training step and `load_state_dict` write into it, never rebind it.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self._arrays: dict[str, Array] = {}
        self._specs: dict[str, tuple[tuple[int, ...], np.dtype, str]] = {}

    def declare(self, name: str, shape: tuple[int, ...], dtype: np.dtype, role: str) -> Array:
        """The buffer `name`, created zero-filled if missing.

        Raises StoreError when it exists with another shape, dtype or role.
        """
        if role not in STORED_ROLES:
            raise StoreError(f'buffer "{name}": role {role} is not stored (only param, state)')
        dtype = np.dtype(dtype)
        if name in self._specs:
            have = self._specs[name]
            if have != (tuple(shape), dtype, role):
                raise StoreError(
                    f'buffer "{name}" is a {have[2]} of {have[1]}{list(have[0])} in the store, '
                    f"but the program declares a {role} of {dtype}{list(shape)}"
                )
            return self._arrays[name]
        self._specs[name] = (tuple(shape), dtype, role)
        self._arrays[name] = self.backend.zeros(tuple(shape), dtype)
        return self._arrays[name]

    def __getitem__(self, name: str) -> Array:
        if name not in self._arrays:
            raise StoreError(f'no buffer "{name}" in the store (known: {", ".join(self._arrays)})')
        return self._arrays[name]

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def names(self, *roles: str) -> list[str]:
        """Buffer names in declaration order (only `roles` if given)."""
        return [n for n, s in self._specs.items() if not roles or s[2] in roles]

    def spec(self, name: str) -> tuple[tuple[int, ...], np.dtype, str]:
        """(shape, dtype, role) of buffer `name`."""
        self[name]
        return self._specs[name]

    def state_dict(self, *roles: str) -> dict[str, np.ndarray]:
        """NumPy copies of the buffers by name (all, or only `roles`)."""
        return {n: self.backend.to_numpy(self._arrays[n]) for n in self.names(*roles)}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Write `state` into the existing buffers (never rebinding them).

        Every entry is checked before any is written. strict=True (PyTorch's
        default): a name the store lacks or a store buffer `state` lacks is an
        error; strict=False skips both. Raises StoreError naming the buffer, and
        TypeError when `state` is not a mapping of names to arrays.
        """
        if not isinstance(state, Mapping):
            raise TypeError(
                "load_state_dict: expected a mapping of buffer names to arrays (such as "
                f"state_dict() returns), got {type(state).__name__}"
            )
        unknown = [n for n in state if n not in self._specs]
        missing = [n for n in self._specs if n not in state]
        if strict and (unknown or missing):
            parts = []
            if unknown:
                parts.append(f"unexpected buffers: {', '.join(unknown)}")
            if missing:
                parts.append(f"missing buffers: {', '.join(missing)}")
            raise StoreError("load_state_dict: " + "; ".join(parts))
        checked: list[tuple[str, np.ndarray]] = []
        for name, value in state.items():
            if name not in self._specs:
                continue
            arr = np.asarray(value)
            shape, dtype, _ = self._specs[name]
            if arr.shape != shape or arr.dtype != dtype:
                raise StoreError(
                    f'load_state_dict: buffer "{name}" is {dtype}{list(shape)}, '
                    f"got {arr.dtype}{list(arr.shape)}"
                )
            checked.append((name, arr))
        for name, arr in checked:
            self.backend.write(self._arrays[name], arr)


class Executable(ABC):
    """A loaded program: fixed buffers and the steps that run on them.

    plan:    the program as data (ExecPlan).
    store:   the BufferStore holding its params and state.
    inputs:  the input buffers' specs by name (shape, dtype).
    outputs: the names `run` returns, in program order.
    """

    def __init__(self, plan: ExecPlan, store: BufferStore):
        self.plan = plan
        self.store = store
        self.inputs: dict[str, BufferSpec] = plan.inputs()
        self.outputs: tuple[str, ...] = tuple(n for n, _ in plan.outputs)

    @property
    def name(self) -> str:
        return self.plan.name

    def where(self, step: LaunchStep | CopyStep) -> str:
        """`@program (file:line:col)` of a step, for error messages."""
        return f"@{self.plan.name}" + (f" ({step.location})" if step.location else "")

    def kernel_spec(self, step: LaunchStep) -> registry.KernelSpec:
        """The registry entry of a launch's kernel.

        Raises ExecError (naming the program and the op's location) when the
        kernel is not registered or belongs to another backend's kernel family.
        """
        backend = self.store.backend
        try:
            spec = registry.get(step.kernel)
        except registry.UnknownKernelError:
            where = self.where(step)
            raise ExecError(f'{where}: kernel "{step.kernel}" is not registered') from None
        if spec.backend != backend.kernel_backend:
            raise ExecError(
                f'{self.where(step)}: kernel "{step.kernel}" is a {spec.backend} kernel; lower '
                f"the program with aicfc-lower-exec{{backend={backend.kernel_backend}}} to run it "
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


# ----------------------------------------------------------------------------
# Finding a backend by name
# ----------------------------------------------------------------------------

BACKEND_NAMES = ("numpy", "cupy", "cuda", "auto")
"""Names `get_backend` takes: "cuda" is the cupy runtime (runtime/registry.py KERNEL_FAMILIES)."""

log = logging.getLogger("aicfc")


def _cupy_backend() -> Backend:
    module_name = "aicfc.runtime.cupy_backend"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            raise BackendUnavailable(
                "backend 'cupy' is not part of this installation (aicfc/runtime/cupy_backend.py "
                "is missing)"
            ) from None
        raise BackendUnavailable(
            f"backend 'cupy' needs the module {e.name!r}, which is not installed "
            "(pip install 'aicfc[cuda]')"
        ) from None
    cls: type[Backend] = module.CupyBackend
    reason = cls.unavailable_reason()
    if reason:
        raise BackendUnavailable(f"backend 'cupy' cannot run here: {reason}")
    return cls()


def get_backend(name: str = "auto") -> Backend:
    """The backend called `name`: "numpy", "cupy" (or "cuda", its kernels' name), or
    "auto" (cupy when usable, else numpy; `resolve_backend` also says why).

    Raises BackendUnavailable when "cupy" cannot run here (module, CuPy or GPU
    missing; the message says which) and ValueError for an unknown name.
    """
    return resolve_backend(name)[0]


def resolve_backend(name: str = "auto") -> tuple[Backend, str]:
    """`get_backend(name)` and why it is that backend, e.g. "requested" or, for "auto"
    without a GPU, "auto chose numpy: backend 'cupy' cannot run here: CuPy is not
    installed (pip install 'aicfc[cuda]')". The reason is also logged at INFO level on
    the "aicfc" logger."""
    runtime = runtime_name(name) if name != "auto" else "auto"
    if runtime == "numpy":
        from aicfc.runtime.numpy_backend import NumpyBackend

        return NumpyBackend(), "requested"
    if runtime == "cupy":
        return _cupy_backend(), "requested"
    if runtime == "auto":
        try:
            backend, reason = _cupy_backend(), "auto chose cupy: CuPy sees a usable GPU"
        except BackendUnavailable as e:
            backend, reason = resolve_backend("numpy")[0], f"auto chose numpy: {e}"
        log.info("backend %s", reason)
        return backend, reason
    raise ValueError(
        f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)} "
        "(cupy and cuda name the same GPU backend)"
    )
