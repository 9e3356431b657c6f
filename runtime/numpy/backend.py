"""The NumPy backend: runs exec programs on the CPU with the reference kernels.

Every kernel is the reference function of its op (`runtime.reference.reference_for
(spec.op)`, looked up once per launch when the program loads): it is called with the
input arrays and the launch's scalar params, and each result is written into
its output buffer with `np.copyto`. A reference function builds its whole
result before the copy, so an output that is the same buffer as an input (an
alias folded by `aicfc-fold-inplace`) really updates that array in place.
Buffers never change shape or dtype, so neither do a kernel's results: the
first call of each launch checks them against its output buffers, and later
calls only launch and copy.

Buffers are allocated once in `load`: inputs get fixed arrays owned by the
Executable, params and state come from the BufferStore, tmp buffers with an
offset are views into one `np.uint8` arena of the program's `arena_size`
(others get their own array), const buffers are read-only arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.dialects.roles import EXTERNAL_ROLES
from aicfc.runtime.backend import Backend, Executable
from aicfc.runtime.errors import ExecError, StoreError
from aicfc.runtime.plan import BufferSpec, CopyStep, ExecPlan, LaunchStep
from aicfc.runtime.reference import reference_for
from aicfc.runtime.store import STORED_ROLES, BufferStore


class NumpyBackend(Backend):
    """The CPU reference runtime (always available)."""

    name = "numpy"
    kernel_family = "numpy"

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
        if isinstance(step, CopyStep):
            check(step.source, f"the exec.copy{at}")
            written.add(step.dest)
        else:
            for slot in step.inputs:
                check(slot, f'kernel "{step.kernel}"{at}')
            written.update(step.outputs)
    for name, slot in plan.outputs:
        check(slot, f'exec.output "{name}"')


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


class NumpyExecutable(Executable):
    """A program loaded on the CPU: `arrays[slot]` is the fixed array of each buffer."""

    def __init__(self, backend: NumpyBackend, plan: ExecPlan, store: BufferStore):
        super().__init__(backend, plan, store)
        _check_tmp_written_before_read(plan)
        arena_size = plan.arena_size or 0
        self.arena = _zeros(f"@{plan.name}: the arena", (arena_size,), np.dtype(np.uint8))
        self.arrays: list[np.ndarray] = [self._allocate(b) for b in plan.buffers]
        self._steps: list[Callable[[], None]] = [self._compile(s) for s in plan.steps]
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

    def _compile(self, step: LaunchStep | CopyStep) -> Callable[[], None]:
        if isinstance(step, CopyStep):
            src, dst = self.arrays[step.source], self.arrays[step.dest]
            return lambda: np.copyto(dst, src)
        where = self.where(step)
        fn = reference_for(self.kernel_spec(step).op)
        ins = [self.arrays[i] for i in step.inputs]
        outs = [self.arrays[o] for o in step.outputs]
        params = dict(step.params)
        checked = False

        def launch() -> None:
            nonlocal checked
            try:
                results = fn(*ins, **params)
            except Exception as e:
                shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in ins)
                raise ExecError(
                    f'{where}: kernel "{step.kernel}" failed on ({shapes}): {type(e).__name__}: {e}'
                ) from e
            if not checked:
                _check_results(where, step.kernel, results, outs)
                checked = True
            for out, res in zip(outs, results, strict=False):
                np.copyto(out, res)

        return launch

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        for name, arr in self.check_inputs(inputs).items():
            np.copyto(self._input_arrays[name], arr)
        for step in self._steps:
            step()
        return {name: array.copy() for name, array in self._output_arrays}

    def buffer(self, name: str) -> np.ndarray:
        array = self._externals.get(name)
        if array is None:
            raise ExecError(f'@{self.plan.name}: no external buffer "{name}"')
        return array
