"""IR-level helpers: parse, print, run passes and run a function of a module.

    module = aicfc.parse(open("step.mlir").read(), name="step.mlir")
    aicfc.run_pipeline(module, "aicfc-fuse,aicfc-expand-backward")
    out = aicfc.run(module, "train_step", {"x": x, "y": y, "fc.weight": w, ...})

`run` takes graph-level IR (func.func: the train pipeline runs first, on a
copy) or exec IR (exec.program), loads it on a backend with a fresh
BufferStore filled from `inputs`, and returns every named result: the
program outputs ("loss", "output") and the final value of each param and
state. `LoadedFunction` is the same thing kept alive for several steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from aicfc.backends import get_backend
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.ir import parse_module, print_module
from aicfc.passes.pipelines import parse_passes, run_steps, train_pipeline
from aicfc.runtime.backend import Backend, Executable
from aicfc.runtime.errors import InputError
from aicfc.runtime.plan import BufferSpec
from aicfc.runtime.store import STORED_ROLES, BufferStore


def parse(text: str, name: str = "<input>") -> ModuleOp:
    """Parse and verify MLIR text with aicfc's dialects.

    Raises aicfc.ir.IRError whose str() is `name:line:col: error: message`.
    """
    return parse_module(text, name)


def print_ir(module: Any, generic: bool = False) -> str:
    """The textual IR of `module` (custom syntax, or MLIR's generic form), newline-terminated."""
    return print_module(module, generic=generic)


def run_pipeline(
    module: ModuleOp, passes: str | Sequence[ModulePass], ctx: Context | None = None
) -> ModuleOp:
    """Apply `passes` (a `-p` spec such as "aicfc-fuse,cse" or pass objects) to `module`
    in place and return it. Raises ValueError naming an unknown pass."""
    ctx = ctx or make_context()
    for p in parse_passes(passes) if isinstance(passes, str) else passes:
        p.apply(ctx, module)
    return module


def is_graph_level(module: ModuleOp) -> bool:
    """True if `module` holds func.func (graph IR) rather than exec.program."""
    return any(isinstance(op, func.FuncOp) for op in module.walk())


def lower(module: ModuleOp, backend: Backend, inplace: bool = True) -> ModuleOp:
    """A copy of `module` lowered by the train pipeline for `backend` (exec IR is copied as is)."""
    out = module.clone()
    if is_graph_level(out):
        steps = train_pipeline(backend.name, inplace, backend.lower_exec_options())
        run_steps(make_context(), out, steps)
    return out


def find_program(module: ModuleOp, fn: str | None = None) -> ex.ProgramOp:
    """The exec.program `fn` of `module`, or its only one; ValueError lists the names."""
    programs = [op for op in module.walk() if isinstance(op, ex.ProgramOp)]
    names = [p.sym_name.data for p in programs]
    if not programs:
        raise ValueError("the module has no function to run")
    if fn is None:
        if len(programs) != 1:
            raise ValueError(
                f"the module has {len(programs)} functions ({', '.join(names)}); "
                "name the one to run"
            )
        return programs[0]
    for p in programs:
        if p.sym_name.data == fn:
            return p
    raise ValueError(f"no function @{fn} in the module (functions: {', '.join(names)})")


@dataclass
class LoadedFunction:
    """One exec program loaded on a backend with its own BufferStore.

    externals: every input, param and state buffer (name, role, shape, dtype), in order.
    """

    executable: Executable
    store: BufferStore

    @property
    def externals(self) -> list[BufferSpec]:
        return [b for b in self.executable.plan.buffers if b.role in ("input", *STORED_ROLES)]

    @property
    def stored(self) -> list[BufferSpec]:
        """The param and state buffers (their next values are results of the function)."""
        return [b for b in self.externals if b.role in STORED_ROLES]

    @property
    def inputs(self) -> list[BufferSpec]:
        return [b for b in self.externals if b.role == "input"]

    @classmethod
    def load(
        cls,
        module: ModuleOp,
        fn: str | None = None,
        backend: str | Backend = "numpy",
        inplace: bool = True,
    ) -> LoadedFunction:
        be = get_backend(backend) if isinstance(backend, str) else backend
        program = find_program(lower(module, be, inplace), fn)
        store = be.create_store()
        return cls(be.load(program, store), store)

    def set_values(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Write the param/state entries of `values` into the store; return the input entries.

        Raises InputError naming an unknown name, a missing param/state, or a
        shape/dtype mismatch.
        """
        known = {b.name: b for b in self.externals}
        unknown = [n for n in values if n not in known]
        if unknown:
            raise InputError(
                f"unknown input {', '.join(repr(n) for n in unknown)} "
                f"(@{self.executable.name} takes: {', '.join(known)})"
            )
        missing = [b.name for b in self.externals if b.name not in values]
        if missing:
            raise InputError(f"missing input {', '.join(repr(n) for n in missing)}")
        for b in self.externals:
            arr = np.asarray(values[b.name])
            if arr.shape != b.shape or arr.dtype != b.dtype:
                raise InputError(
                    f'input "{b.name}" ({b.role}) expects {b.describe()}, '
                    f"got {arr.dtype}{list(arr.shape)}"
                )
        self.store.load_state_dict({b.name: values[b.name] for b in self.stored})
        return {b.name: np.asarray(values[b.name]) for b in self.inputs}

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One execution on `inputs` (the input-role values); returns the named outputs."""
        return self.executable.run(inputs)

    def results(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`outputs` plus the current value of every param and state, by name."""
        return {**outputs, **self.store.state_dict()}


def run(
    module: ModuleOp | str,
    fn: str | None = None,
    inputs: Mapping[str, Any] | None = None,
    backend: str = "numpy",
    steps: int = 1,
) -> dict[str, np.ndarray]:
    """Run function `fn` of `module` `steps` times on `inputs` (every argument by aicfc.name).

    Graph-level IR goes through the train pipeline first (on a copy). Returns
    the last run's outputs and the final params/state by name. Raises
    InputError naming a missing, unknown or mis-shaped input, ValueError for
    an unknown function, aicfc.ir.IRError for unparsable text.
    """
    if isinstance(module, str):
        module = parse(module)
    loaded = LoadedFunction.load(module, fn, backend)
    feed = loaded.set_values(dict(inputs or {}))
    outputs: dict[str, np.ndarray] = {}
    for _ in range(steps):
        outputs = loaded.run(feed)
    return loaded.results(outputs)
