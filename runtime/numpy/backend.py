"""The NumPy backend: runs exec programs on the CPU.

Loading binds every launch once. A kernel that names a launcher (the `_out`
kernels of runtime/registry_numpy.py) is bound by that function of
runtime/numpy/kernels/ to the launch's arrays: each step is then a closure that
writes its results into the output buffers with NumPy's `out=`, with nothing
looked up, checked or allocated per step. Any other kernel is its op's
reference (`runtime.reference.reference_for(spec.op)`): it is called with the input arrays and the
launch's scalar params, and each result is copied into its output buffer with
`np.copyto`; its first call checks the results' shapes and dtypes against the
buffers. A reference function builds its whole result before the copy, so it is
safe under any alias; a bound kernel is safe where an output is the input that
the launch's alias policy pairs it with, so a launch whose outputs overlap
anything else (hand-written exec IR) runs the reference, as does a launch whose
arrays the kernel does not take (it raises `Unsupported`). `NumpyBackend(
reference=True)` runs every launch on the reference (for debugging and for
checking the bound kernels against it).

Buffers are allocated once in `load`: inputs get fixed arrays owned by the
Executable, params and state come from the BufferStore, tmp buffers with an
offset are views into one `np.uint8` arena of the program's `arena_size`
(others get their own array), const buffers are read-only arrays. Kernels share
one pool of work arrays (`Scratch`, one per shape and dtype). BLAS threads are
NumPy's (the user's OPENBLAS_NUM_THREADS/OMP_NUM_THREADS or threadpoolctl
setting, else one per core): the backend never changes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, cast

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.dialects.flags import ALIAS_POLICIES
from aicfc.dialects.roles import EXTERNAL_ROLES
from aicfc.runtime import registry
from aicfc.runtime.backend import Backend, Executable
from aicfc.runtime.collectives import Communicator
from aicfc.runtime.errors import ExecError, StoreError
from aicfc.runtime.numpy.kernels.common import Kernel, Scratch, Step, Unsupported
from aicfc.runtime.plan import BufferSpec, CollectiveStep, CopyStep, ExecPlan, LaunchStep, PlanStep
from aicfc.runtime.reference import RefFn, reference_for
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.store import STORED_ROLES, BufferStore

KERNELS_PACKAGE = "aicfc.runtime.numpy.kernels"
"""Where the modules named by a NumPy `KernelSpec.launcher` live."""


class NumpyBackend(Backend):
    """The CPU runtime (always available).

    reference: run every launch on its op's reference function, whatever kernel the
               program names (slower; the results the bound kernels must match).
    communicator: a host communicator (runtime/collectives.py: ThreadGroup's for ranks
               simulated in one process, FileCommunicator's for processes) that the
               programs' `exec.all_reduce`s run over; None refuses such programs.
    """

    name = "numpy"
    kernel_family = "numpy"

    def __init__(self, reference: bool = False, communicator: Communicator | None = None):
        self.reference = reference
        if communicator is not None and communicator.kind != "host":
            raise ValueError(
                f"the numpy backend needs a host communicator, got {communicator!r} "
                f"({communicator.kind})"
            )
        self.communicator = communicator

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.zeros(shape, dtype)

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    def write(self, dest: np.ndarray, source: np.ndarray) -> None:
        np.copyto(dest, source)

    def load(self, program: ex.ProgramOp | ExecPlan, store: BufferStore) -> NumpyExecutable:
        if store.backend.name != self.name:
            raise StoreError(f"a {store.backend.name} store cannot back a numpy program")
        plan = program if isinstance(program, ExecPlan) else ExecPlan.from_program(program)
        return NumpyExecutable(self, plan, store)


def _out_of_memory(what: str, shape: tuple[int, ...], dtype: np.dtype) -> ExecError:
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    return ExecError(f"{what} ({dtype}{list(shape)}, {nbytes} bytes) does not fit in host memory")


def _zeros(what: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """np.zeros, or an ExecError naming the buffer when the host cannot hold it."""
    try:
        return np.zeros(shape, dtype)
    except MemoryError:
        raise _out_of_memory(what, shape, dtype) from None


def _check_tmp_written_before_read(plan: ExecPlan) -> None:
    """Every tmp buffer is written before it is read (by a step or as an output).

    A tmp holds nothing at the start of a step: read first, it would give zeros,
    or after memory planning the bytes of another buffer (hand-written exec IR).
    """
    tmp = {b.slot for b in plan.buffers if b.role == "tmp" and b.nbytes}
    written: set[int] = set()

    def check(slot: int, reader: str) -> None:
        if slot in tmp and slot not in written:
            raise ExecError(
                f"@{plan.name}: tmp buffer {plan.buffers[slot].name} is read by {reader} before "
                "anything writes it (its contents would be undefined)"
            )

    for step in plan.steps:
        at = f" at {step.location}" if step.location else ""
        what = f'kernel "{step.kernel}"' if isinstance(step, LaunchStep) else _step_name(step)
        for slot in step.reads():
            check(slot, f"{what}{at}")
        written.update(step.writes())
    for name, slot in plan.outputs:
        check(slot, f'exec.output "{name}"')


def _step_name(step: CopyStep | CollectiveStep) -> str:
    return "the exec.copy" if isinstance(step, CopyStep) else f'exec.all_reduce "{step.reduce}"'


def _check_results(where: str, kernel: str, results: Sequence[Any], outs: list[np.ndarray]) -> None:
    """ExecError unless `results` has one array of each output buffer's shape and dtype.

    A result never changes dtype on its way into its buffer: a mismatch (hand-written
    exec IR) would cast silently or fail inside NumPy.
    """
    if len(results) < len(outs):
        raise ExecError(
            f'{where}: kernel "{kernel}" returned {len(results)} results '
            f"for {len(outs)} output buffers"
        )
    for k, (out, res) in enumerate(zip(outs, results, strict=False)):
        if np.shape(res) != out.shape or np.result_type(res) != out.dtype:
            raise ExecError(
                f'{where}: kernel "{kernel}" result #{k} is '
                f"{np.result_type(res)}{list(np.shape(res))}, its buffer is "
                f"{out.dtype}{list(out.shape)}"
            )


def reference_of(spec: KernelSpec) -> RefFn:
    """The reference function of a kernel's op (the one place the backend looks it up)."""
    return reference_for(spec.op)


@cache
def resolve_kernel(launcher: str) -> Kernel:
    """The function that `launcher` ("<module>:<function>") names in KERNELS_PACKAGE.

    Raises ExecError naming the reference when the module or function is missing.
    """
    try:
        found = registry.resolve_launcher(KERNELS_PACKAGE, launcher)
    except LookupError as e:
        raise ExecError(str(e)) from None
    return cast(Kernel, found)


def _only_policy_aliases(
    alias: str | None, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]
) -> bool:
    """True when no output overlaps another output or an input, except an output that is
    the very array of the input its alias policy pairs it with."""
    pairs = ALIAS_POLICIES[alias].pairs if alias in ALIAS_POLICIES else ()
    for k, out in enumerate(outs):
        if any(np.may_share_memory(out, other) for other in outs[:k]):
            return False
        for j, x in enumerate(ins):
            if np.may_share_memory(out, x) and not ((k, j) in pairs and _same_storage(out, x)):
                return False
    return True


def _same_storage(out: np.ndarray, x: np.ndarray) -> bool:
    """The very array, or (a view group's reshape, aicfc-plan-memory) the same bytes."""
    return out is x or (
        out.ctypes.data == x.ctypes.data and out.nbytes == x.nbytes and out.flags.c_contiguous
    )


class NumpyExecutable(Executable):
    """A program loaded on the CPU: `arrays[slot]` is the fixed array of each buffer.

    steps: the bound closure of each step of the plan, in order (`run` calls them).
    runs:  for each step, what it runs: the launcher of its bound kernel
           ("gemm:matmul"), "reference" (its op's reference function) or "copy".
    """

    backend: NumpyBackend

    def __init__(self, backend: NumpyBackend, plan: ExecPlan, store: BufferStore):
        super().__init__(backend, plan, store)
        _check_tmp_written_before_read(plan)
        arena_size = plan.arena_size or 0
        self.arena = _zeros(f"@{plan.name}: the arena", (arena_size,), np.dtype(np.uint8))
        self.arrays: list[np.ndarray] = [self._allocate(b) for b in plan.buffers]
        self.scratch = Scratch()
        bound = [self._bind(s) for s in plan.steps]
        self.steps: tuple[Step, ...] = tuple(step for step, _ in bound)
        self.runs: tuple[str, ...] = tuple(runs for _, runs in bound)
        self._input_arrays = {n: self.arrays[b.slot] for n, b in self.inputs.items()}
        self._output_arrays = [(n, self.arrays[slot]) for n, slot in plan.outputs]
        self._externals = {
            b.name: self.arrays[b.slot] for b in plan.buffers if b.role in EXTERNAL_ROLES
        }

    def _allocate(self, b: BufferSpec) -> np.ndarray:
        if b.role in STORED_ROLES:
            try:
                return self.store.declare(b.name, b.shape, b.dtype, b.role)
            except MemoryError:
                where = f'@{self.plan.name}: {b.role} "{b.name}"'
                raise _out_of_memory(where, b.shape, b.dtype) from None
        if b.role == "const":
            assert b.value is not None
            value = np.array(b.value, dtype=b.dtype).reshape(b.shape)
            value.setflags(write=False)
            return value
        if b.role == "tmp" and b.offset is not None:
            end = b.offset + b.nbytes
            if end > self.arena.size:
                raise ExecError(
                    f"@{self.plan.name}: buffer {b.name} ends at byte {end}, past the arena of "
                    f"{self.arena.size} bytes"
                )
            return self.arena[b.offset : end].view(b.dtype).reshape(b.shape)
        return _zeros(f"@{self.plan.name}: {b.role} buffer {b.name}", b.shape, b.dtype)

    def _bind(self, step: PlanStep) -> tuple[Step, str]:
        """The closure that runs `step`, and what it runs (see `runs`)."""
        if isinstance(step, CopyStep):
            src, dst = self.arrays[step.source], self.arrays[step.dest]
            return (lambda: np.copyto(dst, src)), "copy"
        if isinstance(step, CollectiveStep):
            return self._all_reduce(step), "all_reduce"
        spec = self.kernel_spec(step)
        ins = [self.arrays[i] for i in step.inputs]
        outs = [self.arrays[o] for o in step.outputs]
        params = dict(step.params)
        if (
            spec.launcher is not None
            and not self.backend.reference
            and _only_policy_aliases(step.alias, ins, outs)
        ):
            try:
                kernel = resolve_kernel(spec.launcher)
            except ExecError as e:
                raise ExecError(f'{self.where(step)}: kernel "{spec.name}": {e}') from None
            try:
                return kernel(ins, outs, params, self.scratch), spec.launcher
            except Unsupported:
                pass
        return self._reference_step(step, spec, ins, outs, params), "reference"

    def _all_reduce(self, step: CollectiveStep) -> Step:
        """Pack the tensors into the bucket, reduce it over the ranks, unpack."""
        comm = self.communicator
        assert comm is not None  # bind_communicator refused the plan otherwise
        bucket = self.arrays[step.bucket]
        tensors = [self.arrays[i] for i in step.tensors]
        views = [
            bucket[a:b].reshape(t.shape) for t, (a, b) in zip(tensors, step.slices, strict=True)
        ]
        pairs = list(zip(views, tensors, strict=True))
        op = step.reduce

        def launch() -> None:
            for view, t in pairs:
                np.copyto(view, t)
            comm.all_reduce(bucket, op)
            for view, t in pairs:
                np.copyto(t, view)

        return launch

    def _reference_step(
        self,
        step: LaunchStep,
        spec: KernelSpec,
        ins: list[np.ndarray],
        outs: list[np.ndarray],
        params: dict[str, Any],
    ) -> Step:
        fn = reference_of(spec)
        where = self.where(step)
        checked = False

        def launch() -> None:
            nonlocal checked
            results = fn(*ins, **params)
            if not checked:
                _check_results(where, step.kernel, results, outs)
                checked = True
            for out, res in zip(outs, results, strict=False):
                np.copyto(out, res)

        return launch

    def _failure(self, index: int, e: Exception) -> ExecError:
        """The ExecError of step `index` failing with `e` (a launch: its kernel and operands)."""
        step = self.plan.steps[index]
        if not isinstance(step, LaunchStep):
            what = _step_name(step).removeprefix("the ")
            return ExecError(f"{self.where(step)}: {what} failed: {type(e).__name__}: {e}")
        shapes = ", ".join(
            f"{self.arrays[i].dtype}{list(self.arrays[i].shape)}" for i in step.inputs
        )
        return ExecError(
            f'{self.where(step)}: kernel "{step.kernel}" failed on ({shapes}): '
            f"{type(e).__name__}: {e}"
        )

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        for name, arr in self.check_inputs(inputs).items():
            np.copyto(self._input_arrays[name], arr)
        index = 0
        try:
            for index, step in enumerate(self.steps):  # noqa: B007 (names a failing step)
                step()
        except ExecError:
            raise
        except Exception as e:
            raise self._failure(index, e) from e
        return {name: array.copy() for name, array in self._output_arrays}

    def buffer(self, name: str) -> np.ndarray:
        array = self._externals.get(name)
        if array is None:
            raise ExecError(f'@{self.plan.name}: no external buffer "{name}"')
        return array
