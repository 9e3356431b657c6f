"""Layout kernels: reshape, transpose, broadcast_to, split as copies from views; concat.

The view of the input (reshaped, permuted, broadcast or a piece of a split) is made
once, at load: the buffers never move, so each step is a single `np.copyto` into the
result (one per piece); concat is `np.concatenate` into the result. Copies: bitwise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aicfc.runtime.numpy.kernels.common import (
    Arrays,
    Kernel,
    Params,
    Scratch,
    Step,
    Unsupported,
    expect,
    ints,
    like,
    param,
    same_layout,
)


def _copy_of_view(view_of: Callable[[np.ndarray, Params], np.ndarray]) -> Kernel:
    """The kernel y = copy of `view_of(x, params)`, the view made at load."""

    def kernel(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
        expect(ins, 1, "inputs")
        expect(outs, 1, "outputs")
        (x,), (y,) = ins, outs
        try:
            view = view_of(x, params)
        except (TypeError, ValueError) as e:
            raise Unsupported(str(e)) from None
        like(y, view, "the result")
        if y.ctypes.data == view.ctypes.data and y.strides == view.strides:
            return lambda: None  # a view group's reshape (aicfc-plan-memory): the same bytes

        def step() -> None:
            np.copyto(y, view)

        return step

    return kernel


reshape = _copy_of_view(lambda x, params: x.reshape(ints(params, "shape")))
transpose = _copy_of_view(lambda x, params: x.transpose(ints(params, "perm")))
broadcast_to = _copy_of_view(lambda x, params: np.broadcast_to(x, ints(params, "shape")))


def split(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """Consecutive pieces of x along `axis` (torch.split), each one copy from a view."""
    expect(ins, 1, "inputs")
    (x,) = ins
    sizes = ints(params, "sizes")
    axis = param(params, "axis")
    if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise Unsupported(f"axis {axis!r} of a rank-{x.ndim} input")
    expect(outs, len(sizes), "outputs")
    if sum(sizes) != x.shape[axis]:
        raise Unsupported(f"sizes {list(sizes)} of an axis of {x.shape[axis]}")
    views = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    for k, (y, view) in enumerate(zip(outs, views, strict=True)):
        like(y, view, f"piece #{k}")
    pairs = list(zip(outs, views, strict=True))

    def step() -> None:
        for y, view in pairs:
            np.copyto(y, view)

    return step


def concat(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """torch.cat(inputs, dim=axis), written into the result."""
    expect(outs, 1, "outputs")
    (y,) = outs
    axis = param(params, "axis")
    if not ins or not isinstance(axis, int) or not -y.ndim <= axis < y.ndim:
        raise Unsupported(f"{len(ins)} inputs, axis {axis!r} of a rank-{y.ndim} result")
    offset = 0
    for k, a in enumerate(ins):  # each input is the result's next slab along the axis
        if a.ndim != y.ndim:
            raise Unsupported(f"input #{k} of rank {a.ndim} for a rank-{y.ndim} result")
        slab = list(y.shape)
        slab[axis] = a.shape[axis]
        same_layout(a, tuple(slab), y.dtype, f"input #{k}")
        offset += a.shape[axis]
    if offset != y.shape[axis]:
        raise Unsupported(f"inputs {offset} long along axis {axis}, the result {y.shape[axis]}")
    arrays = tuple(ins)

    def step() -> None:
        np.concatenate(arrays, axis=axis, out=y)

    return step
