"""An exec.program read into plain data, so a backend never walks xDSL IR while running.

    plan = ExecPlan.from_program(program)   # buffers by slot, steps in order, outputs
    plan.inputs()                           # {"x": BufferSpec(...), ...}

`ExecPlan` holds the buffer slots (`BufferSpec`: stable name, role, shape, dtype,
arena offset or constant value), the steps of the `exec.graph` body in program
order (`LaunchStep`, `CopyStep`, `CollectiveStep`, each with its source location
for error messages and the slots it `reads()` and `writes()`), the named outputs
and the communicators the program needs (name, world size). Both backends load a plan;
runtime/schedule.py reads one to find the launches' dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aicfc.dialects import exec as ex
from aicfc.dialects.diagnostics import location_of
from aicfc.dialects.params import ParamValue
from aicfc.runtime.errors import ExecError
from aicfc.runtime.interpreter import InterpreterError, dense_to_numpy, numpy_dtype


@dataclass(frozen=True)
class BufferSpec:
    """One buffer of a program: its slot, stable name, role, shape, dtype.

    offset: bytes into the arena for planned tmp buffers (else None).
    value:  the data of a const buffer, or the initial value of a state that does not start
            at zero (`exec.buffer ... init`; else None).
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
    """exec.launch: kernel name, input slots, output slots, scalar params, source location,
    and the alias policy the launch may run under (its `alias`, dialects.flags.ALIAS_POLICIES)."""

    kernel: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: Mapping[str, ParamValue]
    location: str | None = None
    alias: str | None = None

    def reads(self) -> tuple[int, ...]:
        return self.inputs

    def writes(self) -> tuple[int, ...]:
        return self.outputs


@dataclass(frozen=True)
class CopyStep:
    """exec.copy: dest = source (slots)."""

    source: int
    dest: int
    location: str | None = None

    def reads(self) -> tuple[int, ...]:
        return (self.source,)

    def writes(self) -> tuple[int, ...]:
        return (self.dest,)


@dataclass(frozen=True)
class CollectiveStep:
    """exec.all_reduce: pack `tensors` (slots) into `bucket` (a slot), reduce the bucket
    over the ranks of `communicator` with `reduce` ("sum" or "mean"), unpack. `slices`:
    [start, stop) of each tensor in the bucket, in elements."""

    reduce: str
    communicator: str
    tensors: tuple[int, ...]
    bucket: int
    slices: tuple[tuple[int, int], ...]
    location: str | None = None

    def reads(self) -> tuple[int, ...]:
        return self.tensors

    def writes(self) -> tuple[int, ...]:
        return (*self.tensors, self.bucket)


PlanStep = LaunchStep | CopyStep | CollectiveStep


@dataclass(frozen=True)
class ExecPlan:
    """An exec.program as data: buffers by slot, the steps in order, the outputs."""

    name: str
    buffers: tuple[BufferSpec, ...]
    steps: tuple[PlanStep, ...]
    outputs: tuple[tuple[str, int], ...]
    arena_size: int | None = None
    communicators: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def from_program(program: ex.ProgramOp) -> ExecPlan:
        """Read `program`; raises ExecError for a buffer dtype NumPy cannot hold."""
        pname = program.sym_name.data
        slots: dict[int, int] = {}
        buffers: list[BufferSpec] = []
        steps: list[PlanStep] = []
        outputs: list[tuple[str, int]] = []
        comms: dict[int, tuple[str, int]] = {}

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
                init = dense_to_numpy(op.init) if op.init is not None else None
                add(op.result, op.buffer_name.data, data=init)
            elif isinstance(op, ex.AllocOp):
                hint = op.result.name_hint
                off = op.offset.value.data if op.offset is not None else None
                add(op.result, f"%{hint}" if hint else f"tmp{len(buffers)}", off)
            elif isinstance(op, ex.ConstantOp):
                add(op.result, f"const{len(buffers)}", data=dense_to_numpy(op.value))
            elif isinstance(op, ex.CommunicatorOp):
                comms[id(op.result)] = (op.comm_name.data, op.world_size.value.data)
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
                                s.alias.data if s.alias is not None else None,
                            )
                        )
                    elif isinstance(s, ex.CopyOp):
                        steps.append(
                            CopyStep(slots[id(s.source)], slots[id(s.dest)], location_of(s))
                        )
                    elif isinstance(s, ex.AllReduceOp):
                        steps.append(
                            CollectiveStep(
                                s.reduce_op.value,
                                comms[id(s.communicator)][0],
                                tuple(slots[id(v)] for v in s.tensors),
                                slots[id(s.bucket)],
                                tuple(s.slices()),
                                location_of(s),
                            )
                        )
            elif isinstance(op, ex.OutputOp):
                outputs.append((op.buffer_name.data, slots[id(op.value)]))
        arena = program.arena_size.value.data if program.arena_size is not None else None
        return ExecPlan(
            pname, tuple(buffers), tuple(steps), tuple(outputs), arena, tuple(comms.values())
        )

    def inputs(self) -> dict[str, BufferSpec]:
        return {b.name: b for b in self.buffers if b.role == "input"}
