"""Layout kernels: reshape, transpose, broadcast_to as one copy from a view.

The view of the input (reshaped, permuted or broadcast) is made once, at load: the
buffers never move, so each step is a single `np.copyto` into the result.
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

        def step() -> None:
            np.copyto(y, view)

        return step

    return kernel


reshape = _copy_of_view(lambda x, params: x.reshape(ints(params, "shape")))
transpose = _copy_of_view(lambda x, params: x.transpose(ints(params, "perm")))
broadcast_to = _copy_of_view(lambda x, params: np.broadcast_to(x, ints(params, "shape")))
