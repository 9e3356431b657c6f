"""Launchers of kernels/dropout.cu: dropout and its gradient (the same kernel: the mask
is recomputed from the seed and the device-side offset, never stored)."""

from __future__ import annotations

from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    grid_1d,
    number,
    numel,
)
from aicfc.runtime.registry import KernelSpec


def launch_dropout(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """x (or dy) [n], the int64 offset [] -> out [n]: a thread per 4 elements."""
    x, offset = ins
    n = numel(outs[0])
    expect_numel(spec, n, x=x)
    expect_numel(spec, 1, offset=offset)
    p = number(spec, params, "p", float)
    if not 0.0 <= p < 1.0:
        raise CudaKernelError(f'kernel "{spec.name}": p = {p} is outside [0, 1)')
    return [
        kernel_launch(
            spec,
            grid_1d(ctx, cdiv(n, 4)),
            (THREADS,),
            [*ins, outs[0]],
            {"p": p, "seed": number(spec, params, "seed", int), "n": n},
        )
    ]
