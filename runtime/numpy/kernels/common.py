"""What every NumPy kernel shares: the kernel signature, the scratch pool, small checks.

A NumPy kernel binds one exec launch, once, when the program loads:

    kernel(ins, outs, params, scratch) -> step      # step() runs the launch

`ins` and `outs` are the fixed arrays of the launch's input and output buffers (operand
and result order), `params` its scalar parameters (`kernel_params()`, defaults omitted:
read them with `param`), `scratch` the program's pool of work arrays. The kernel checks
the arrays against each other and raises `Unsupported` (saying what it expected) for
anything it does not take; the backend then runs the op's reference instead. Otherwise
it returns a closure over the arrays that writes the results into `outs` with NumPy's
`out=` arguments: nothing is looked up, checked or allocated while a step runs.

Aliasing: an output may be the very array of an input when the op's alias policy pairs
them (`adam_triplet`: param' is param, ...); every kernel reads such an input, element
by element, before it writes that output. The backend runs the reference for any other
overlap between a launch's outputs and its inputs or each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from aicfc.runtime.registry import PARAM_DEFAULTS

Arrays = Sequence[np.ndarray]
"""The arrays of a launch's input (or output) buffers, in operand (result) order."""

Params = Mapping[str, object]
"""A launch's scalar parameters (`kernel_params()`: properties at their default omitted)."""

Step = Callable[[], None]
"""One bound launch: reads its inputs, writes its outputs."""


class Unsupported(ValueError):
    """A kernel does not take these arrays or params (the backend runs the reference)."""


class Scratch:
    """Work arrays of one loaded program, shared by its kernels.

    Steps run one at a time and no kernel keeps data in a work array between calls,
    so one array per (shape, dtype, index) serves every kernel: `index` tells apart
    the work arrays of one shape that a kernel needs at the same time.
    """

    def __init__(self) -> None:
        self._arrays: dict[tuple[tuple[int, ...], np.dtype, int], np.ndarray] = {}

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, index: int = 0) -> np.ndarray:
        key = (tuple(shape), np.dtype(dtype), index)
        array = self._arrays.get(key)
        if array is None:
            array = self._arrays[key] = np.empty(key[0], key[1])
        return array

    @property
    def nbytes(self) -> int:
        """Bytes held by the work arrays."""
        return sum(a.nbytes for a in self._arrays.values())


Kernel = Callable[[Arrays, Arrays, Params, Scratch], Step]
"""kernel(ins, outs, params, scratch) -> step (see the module docstring)."""


def param(params: Params, key: str, default: object = None) -> object:
    """A launch parameter, with the registry's defaults for omitted ones."""
    if key in params:
        return params[key]
    return PARAM_DEFAULTS.get(key, default)


def ints(params: Params, key: str) -> tuple[int, ...]:
    """A tuple-of-integers parameter (shape, perm, axes); Unsupported if it is not one."""
    value = param(params, key, ())
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
        raise Unsupported(f"parameter {key}={value!r} (expected a tuple of integers)")
    return value


def expect(arrays: Arrays, count: int | tuple[int, ...], what: str) -> None:
    """Unsupported unless there are `count` arrays (or one of the counts in a tuple)."""
    counts = (count,) if isinstance(count, int) else count
    if len(arrays) not in counts:
        raise Unsupported(f"expected {' or '.join(map(str, counts))} {what}, got {len(arrays)}")


def same_layout(array: np.ndarray, shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    """Unsupported unless `array` is `dtype[shape]` (dense row-major, as every buffer is)."""
    if array.shape != tuple(shape) or array.dtype != dtype:
        raise Unsupported(
            f"{what} is {array.dtype}{list(array.shape)}, expected {np.dtype(dtype)}{list(shape)}"
        )


def like(array: np.ndarray, other: np.ndarray, what: str) -> None:
    """Unsupported unless `array` has the shape and dtype of `other`."""
    same_layout(array, other.shape, other.dtype, what)


def is_float(*arrays: np.ndarray) -> None:
    """Unsupported unless every array is float32 or float64 (the dtypes of the kernels)."""
    for a in arrays:
        if a.dtype not in (np.float32, np.float64):
            raise Unsupported(f"dtype {a.dtype} (the fast kernels take float32 and float64)")
