"""Run a `func.func` of graph and autodiff ops directly on NumPy arrays.

This is the reference executor for value-semantics IR: differential tests run
a function before and after a pass and compare. Each op is evaluated by
`runtime.reference.REFERENCE[type(op)]`; `graph.constant` yields its value. Every SSA
value stays alive (fine for tests; the exec backends plan buffers instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, SSAValue

from aicfc.dialects.autodiff import BackwardOp
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.roles import NAME_ATTR
from aicfc.runtime.reference import ELEMENT_DTYPES, REFERENCE


class InterpreterError(RuntimeError):
    """An op the interpreter cannot run, or inputs that do not match the function."""


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The NumPy dtype of a builtin element type (f16, bf16, f32, f64, i1, i32, i64;
    bf16 is ml_dtypes.bfloat16)."""
    key = str(element_type)
    if key not in ELEMENT_DTYPES:
        raise InterpreterError(f"element type {element_type} has no NumPy dtype")
    return ELEMENT_DTYPES[key]


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The value of a dense elements attribute as an array of its type's shape and dtype."""
    t = attr.get_type()
    assert isinstance(t, TensorType)
    dtype = numpy_dtype(t.element_type)
    values = np.asarray(attr.get_values(), dtype=dtype)
    shape = tuple(t.get_shape())
    if values.size == 1:  # a splat: dense<1.0> : tensor<4xf32>
        return np.full(shape, values.reshape(()), dtype=dtype)
    return values.reshape(shape)


def find_func(module: builtin.ModuleOp, name: str | None = None) -> func.FuncOp:
    """The function `name` of `module` (or its only function)."""
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    if name is None:
        if len(funcs) != 1:
            raise InterpreterError(
                f"module has {len(funcs)} functions; name one of "
                f"{', '.join(f.sym_name.data for f in funcs)}"
            )
        return funcs[0]
    for f in funcs:
        if f.sym_name.data == name:
            return f
    raise InterpreterError(f"no function @{name} in module")


def _check_arg(fn: func.FuncOp, i: int, value: np.ndarray, t: Attribute) -> np.ndarray:
    assert isinstance(t, TensorType)
    want_shape, want_dtype = tuple(t.get_shape()), numpy_dtype(t.element_type)
    arr = np.asarray(value)
    if arr.shape != want_shape or arr.dtype != want_dtype:
        raise InterpreterError(
            f"@{fn.sym_name.data} argument #{i}: expected {want_dtype}{list(want_shape)}, "
            f"got {arr.dtype}{list(arr.shape)}"
        )
    return arr


def run_func(
    fn: func.FuncOp, args: Sequence[np.ndarray] | Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Evaluate `fn` on `args` (positional, or by `aicfc.name`) and return its results.

    Raises InterpreterError for a wrong argument count, shape or dtype, or an op
    without a reference (e.g. an unexpanded `autodiff.backward`).
    """
    block = fn.body.blocks.first
    assert block is not None
    if isinstance(args, Mapping):
        names = []
        for i, _ in enumerate(block.args):
            attrs = fn.arg_attrs.data[i].data if fn.arg_attrs is not None else {}
            name = attrs.get(NAME_ATTR)
            if name is None or name.data not in args:  # type: ignore[attr-defined]
                raise InterpreterError(f"@{fn.sym_name.data}: no value for argument #{i}")
            names.append(name.data)  # type: ignore[attr-defined]
        args = [args[n] for n in names]
    if len(args) != len(block.args):
        raise InterpreterError(
            f"@{fn.sym_name.data}: expected {len(block.args)} arguments, got {len(args)}"
        )
    env: dict[SSAValue, np.ndarray] = {
        a: _check_arg(fn, i, v, a.type)
        for i, (a, v) in enumerate(zip(block.args, args, strict=True))
    }
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            return [env[v] for v in op.arguments]
        if static_flags(op) & OpFlag.IS_CONSTANT:
            env[op.results[0]] = dense_to_numpy(op.properties["value"])
            continue
        ref = REFERENCE.get(type(op))
        if ref is None or not isinstance(op, AicfcOp):
            raise InterpreterError(
                f"{op.name} has no NumPy reference"
                + (" (run aicfc-expand-backward first)" if isinstance(op, BackwardOp) else "")
            )
        outs = ref(*(env[v] for v in op.operands), **op.kernel_params())
        for r, v in zip(op.results, outs[: len(op.results)], strict=True):
            t = r.type
            assert isinstance(t, TensorType)
            env[r] = np.asarray(v, dtype=numpy_dtype(t.element_type)).reshape(t.get_shape())
    raise InterpreterError(f"@{fn.sym_name.data} has no func.return")
