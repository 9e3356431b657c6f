"""What every launcher shares: the launcher signature, the LoadContext, and small helpers.

A launcher turns one exec launch into bound CUDA launches:

    launcher(spec, ins, outs, params, ctx) -> list[Launch]

spec is the registry entry (its `abi` names the scalars), `ins`/`outs` the
device arrays of the launch's input and output buffers, `params` its scalar
parameters (`kernel_params()`, defaults omitted: read them with `param`), `ctx`
the `LoadContext`. It checks the buffers against each other (a wrong size would
be read or written out of bounds: the CUDA kernels do not broadcast), computes
the grid and the ABI's scalars, and binds them with `abi.kernel_launch`;
nothing is computed while a step runs.

`ACT_CODES` holds the `act` scalar's C codes, read from the activation table
(dialects/activation_table.py, checked against kernels/common.cuh by a test);
`act_code` is the one place a launcher reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from aicfc.dialects.activation_table import ACTIVATION_FACTS
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.registry import PARAM_DEFAULTS, KernelSpec

THREADS = 256
"""Threads per block of the one-dimensional kernels."""

ACT_CODES = {"none": 0, **{f.name: f.code for f in ACTIVATION_FACTS}}
"""The `act` scalar of the GEMM and epilogue kernels (`AICFC_ACT_*` of kernels/common.cuh)."""


Buffers = list[Any]
"""The device arrays of a launch's input (or output) buffers, in operand (result) order."""

Params = Mapping[str, object]
"""A launch's scalar parameters (`kernel_params()`: properties at their default omitted)."""


class LoadContext(Protocol):
    """What launchers may ask of the backend while a program loads."""

    sm_count: int

    def workspace(self, nbytes: int) -> Any:
        """A zero-filled device buffer of `nbytes` bytes, kept alive with the program."""

    def table(self, values: np.ndarray) -> Any:
        """`values` (int64) uploaded to a device array kept alive with the program."""

    def cublaslt(self) -> Any:
        """The backend's cuBLASLt context (runtime/cuda/cublaslt.py), or raise if unavailable."""


Launcher = Callable[[KernelSpec, Buffers, Buffers, Params, LoadContext], list[Launch]]
"""launcher(spec, ins, outs, params, ctx) -> the bound launches (see the module docstring)."""


def param(params: Params, key: str, default: object = None) -> Any:
    """A launch parameter with the registry's defaults for omitted ones."""
    if key in params:
        return params[key]
    return PARAM_DEFAULTS.get(key, default)


def number(spec: KernelSpec, params: Params, key: str, kind: type[int] | type[float]) -> Any:
    """Parameter `key` (as `param`) converted by `kind`; CudaKernelError naming the kernel
    when it is absent or not a number (hand-written IR without the attribute)."""
    given = param(params, key)
    if isinstance(given, int | float | np.integer | np.floating):  # (bool is an int)
        return kind(given)
    raise CudaKernelError(f'kernel "{spec.name}": parameter {key} = {given!r} is not a number')


def act_code(spec: KernelSpec, act: str) -> int:
    """The C code of activation `act` (the `act` parameter of a launch); CudaKernelError
    naming the kernel for an activation the kernels do not know."""
    if act not in ACT_CODES:
        raise CudaKernelError(f'kernel "{spec.name}": unknown activation {act!r}')
    return ACT_CODES[act]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid_1d(ctx: LoadContext, work: int) -> tuple[int]:
    """Blocks of 256 threads for a grid-stride loop: enough to fill the device, at most one pass."""
    return (max(1, min(cdiv(work, THREADS), ctx.sm_count * 16)),)


def numel(a: Any) -> int:
    return int(np.prod(a.shape, dtype=np.int64))


def matrix_shape(spec: KernelSpec, what: str, a: Any) -> tuple[int, int]:
    """(rows, columns) of a buffer the kernel reads as a matrix; CudaKernelError otherwise."""
    if len(a.shape) != 2:
        raise CudaKernelError(f'kernel "{spec.name}": {what} is {describe([a])}, expected a matrix')
    return int(a.shape[0]), int(a.shape[1])


def rows_shape(spec: KernelSpec, what: str, a: Any) -> tuple[int, int]:
    """(rows, columns) of a buffer that a row kernel reads: its last dim is the row, the
    dims before it fold into the row count ([B, T, V] logits are B T rows of V);
    CudaKernelError for a 0-d buffer."""
    if len(a.shape) < 1:
        raise CudaKernelError(f'kernel "{spec.name}": {what} is {describe([a])}, expected rows')
    c = int(a.shape[-1])
    return (numel(a) // c if c else 0), c


def expect_numel(spec: KernelSpec, n: int, **buffers: Any) -> None:
    """Raise unless each named buffer (None: absent) holds `n` elements.

    A kernel indexes its buffers by the sizes its launcher computes, so a buffer of
    another size (hand-written exec IR) would be read or written out of bounds; the
    CUDA kernels do not broadcast.
    """
    for what, a in buffers.items():
        if a is not None and numel(a) != n:
            raise CudaKernelError(
                f'kernel "{spec.name}": {what} is {describe([a])}, {numel(a)} elements; '
                f"the launch needs {n}"
            )


def expect_operands(spec: KernelSpec, n: int, ins: Sequence[Any], outs: Sequence[Any]) -> None:
    """`expect_numel` of each of these operands and results, named by position."""
    expect_numel(
        spec,
        n,
        **{f"operand #{i}": a for i, a in enumerate(ins)},
        **{f"result #{i}": a for i, a in enumerate(outs)},
    )


def launch_pointwise(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """n elements of result #0, operands #0 and #1 (where present) of n elements too, a
    grid-stride loop; the ABI's only scalar is n."""
    n = numel(outs[0])
    expect_operands(spec, n, ins[:2], outs)
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, *outs], {"n": n})]
