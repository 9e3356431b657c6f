"""Reductions into their preallocated result: reduce_sum.

`np.sum(x, axis=..., out=y)` runs the reduction the reference runs (same axes, same
pairwise summation), writing into the buffer instead of a new array; an integer sum
accumulates in the buffer's dtype, which wraps exactly as the reference's cast does.
"""

from __future__ import annotations

import numpy as np

from aicfc.runtime.numpy.kernels.common import (
    Arrays,
    Params,
    Scratch,
    Step,
    Unsupported,
    expect,
    ints,
    param,
    same_layout,
)


def reduce_sum(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """Y = sum of X over `axes` (keepdims keeps them as 1s)."""
    expect(ins, 1, "inputs")
    expect(outs, 1, "outputs")
    (x,), (y,) = ins, outs
    keepdims = bool(param(params, "keepdims"))
    axes_param = ints(params, "axes")
    axes = tuple(sorted({int(a) % x.ndim for a in axes_param if -x.ndim <= int(a) < x.ndim}))
    if len(axes) != len(set(axes_param)) or x.ndim == 0:
        raise Unsupported(f"axes {list(axes_param)} of a rank-{x.ndim} operand")
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    same_layout(y, shape, x.dtype, "the sum")

    def step() -> None:
        np.sum(x, axis=axes, keepdims=keepdims, out=y)

    return step
