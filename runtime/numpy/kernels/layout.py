"""Layout kernels: reshape, transpose, broadcast_to as one copy from a view.

The view of the input (reshaped, permuted or broadcast) is made once, at load: the
buffers never move, so each step is a single `np.copyto` into the result.
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
    like,
)


def _copy_from(view: np.ndarray, outs: Arrays) -> Step:
    expect(outs, 1, "outputs")
    (y,) = outs
    like(y, view, "the result")

    def step() -> None:
        np.copyto(y, view)

    return step


def reshape(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 1, "inputs")
    (x,) = ins
    try:
        view = x.reshape(ints(params, "shape"))
    except (TypeError, ValueError) as e:
        raise Unsupported(str(e)) from None
    return _copy_from(view, outs)


def transpose(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 1, "inputs")
    (x,) = ins
    try:
        view = x.transpose(ints(params, "perm"))
    except (TypeError, ValueError) as e:
        raise Unsupported(str(e)) from None
    return _copy_from(view, outs)


def broadcast_to(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 1, "inputs")
    (x,) = ins
    try:
        view = np.broadcast_to(x, ints(params, "shape"))
    except (TypeError, ValueError) as e:
        raise Unsupported(str(e)) from None
    return _copy_from(view, outs)
