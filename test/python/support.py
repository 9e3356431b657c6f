"""Helpers shared by the CPU test modules: `from support import exec_programs, rel_err, ...`.

pyproject.toml puts test/python on sys.path (`pythonpath`), so this module imports
the same way from every folder and in any test order (the test modules themselves
are loaded with `--import-mode=importlib`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType

from aicfc.dialects import exec as ex
from aicfc.dialects.roles import arg_name, arg_role
from aicfc.execute import find_program, run_pipeline
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import numpy_dtype


@pytest.fixture(autouse=True, scope="module")
def single_threaded_blas() -> Iterator[None]:
    """One BLAS thread (NumPy's and, where it is loaded, torch's) for each test module that
    imports this fixture (a conftest.py: each module below it). The GEMMs of these tests
    are tiny, and on a loaded 2-core machine OpenBLAS's spinning worker threads made each
    training step 10-20x slower."""
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch else None
    with threadpool_limits(limits=1, user_api="blas"):
        if torch:
            torch.set_num_threads(1)
        yield
        if torch:
            torch.set_num_threads(previous)


def _exec_module(text: str, fold: bool, plan: bool, alignment: int | None) -> Any:
    passes = ["aicfc-lower-exec"]
    if fold:
        passes.append("aicfc-fold-inplace")
    if plan:
        passes.append(
            f"aicfc-plan-memory{{alignment={alignment}}}" if alignment else "aicfc-plan-memory"
        )
    module = run_pipeline(parse_module(text), ",".join(passes))
    module.verify()
    return module


def exec_programs(
    text: str, fold: bool = True, plan: bool = True, alignment: int | None = None
) -> dict[str, ex.ProgramOp]:
    """Every exec.program, by name, of graph-level `text` after aicfc-lower-exec, then
    aicfc-fold-inplace (fold) and aicfc-plan-memory{alignment} (plan), verified."""
    module = _exec_module(text, fold, plan, alignment)
    return {p.sym_name.data: p for p in module.walk() if isinstance(p, ex.ProgramOp)}


def exec_program(
    text: str, fold: bool = True, plan: bool = True, alignment: int | None = None
) -> ex.ProgramOp:
    """The only exec.program of `text` lowered as by `exec_programs`."""
    return find_program(_exec_module(text, fold, plan, alignment))


def random_args(fn: func.FuncOp, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard normal values for every argument of `fn`, in order, in its dtypes."""
    args = []
    for t in fn.function_type.inputs.data:
        assert isinstance(t, TensorType)
        args.append(rng.standard_normal(t.get_shape()).astype(numpy_dtype(t.element_type)))
    return args


def random_values(
    fn: func.FuncOp,
    rng: np.random.Generator,
    classes: int = 3,
    roles: tuple[str, ...] = ("input", "param", "state"),
) -> dict[str, np.ndarray]:
    """Fresh random values for the arguments of `fn` whose aicfc.role is in `roles` (an
    argument without a role is an input), by aicfc.name (`arg{i}` where it has none):
    integers (labels, dropout offsets) uniform in [0, classes), Adam's step counters
    (`*.step`) whole numbers in [1, 20), second moments (`*.exp_avg_sq`) in [0.1, 1.1)
    (they are positive), everything else standard normal."""
    values = {}
    for i, arg in enumerate(fn.body.blocks.first.args):  # type: ignore[union-attr]
        if (arg_role(arg) or "input") not in roles:
            continue
        name = arg_name(arg) or f"arg{i}"
        t = arg.type
        assert isinstance(t, TensorType)
        shape, dtype = tuple(t.get_shape()), numpy_dtype(t.element_type)
        if np.issubdtype(dtype, np.integer):
            values[name] = rng.integers(0, classes, size=shape).astype(dtype)
        elif name.endswith(".step"):
            values[name] = np.asarray(rng.integers(1, 20), dtype)
        elif name.endswith(".exp_avg_sq"):
            values[name] = (rng.random(shape) + 0.1).astype(dtype)
        else:
            values[name] = rng.standard_normal(shape).astype(dtype)
    return values


def rel_err(got: Any, want: Any) -> float:
    """max|got - want| / max|want| in float64 (0 for empty arrays; shapes must match)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if not want.size:
        return 0.0
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
