"""Embedding lookup and its gradient, into their outputs.

The lookup is `np.take` of the table's rows into the result; the gradient zeroes its
result and adds the rows of dy with `np.add.at`, in index order, as the reference
(runtime/reference.py `embedding_grad`) does: bitwise the reference's. Ids change
every step, so each step checks them with the reference's message.
"""

from __future__ import annotations

import numpy as np

from aicfc.runtime import reference
from aicfc.runtime.numpy.kernels.common import (
    Arrays,
    Params,
    Scratch,
    Step,
    Unsupported,
    expect,
    is_float,
    param,
    same_layout,
)


def _ids(ids: np.ndarray) -> None:
    if ids.dtype not in (np.int32, np.int64):
        raise Unsupported(f"ids of dtype {ids.dtype}")


def embedding(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """out[n] = weight[ids[n]] for ids [...] and weight [V, D]: out [..., D]."""
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    (ids, weight), (y,) = ins, outs
    _ids(ids)
    is_float(weight)
    if weight.ndim != 2:
        raise Unsupported(f"a table {list(weight.shape)} (expected [V, D])")
    same_layout(y, (*ids.shape, weight.shape[1]), weight.dtype, "the result")
    rows = weight.shape[0]

    def step() -> None:
        reference._check_ids(ids, rows)
        np.take(weight, ids, axis=0, out=y, mode="clip")  # in range (checked)

    return step


def embedding_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """dweight [V, D]: the sum of dy[n] [..., D] over the positions with ids[n] = v."""
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    (dy, ids), (dw,) = ins, outs
    _ids(ids)
    is_float(dy)
    rows = param(params, "num_embeddings")
    if not isinstance(rows, int) or dy.shape[:-1] != ids.shape or dy.ndim < 1:
        raise Unsupported(f"dy {list(dy.shape)}, ids {list(ids.shape)}, {rows!r} rows")
    same_layout(dw, (rows, dy.shape[-1]), dy.dtype, "the table gradient")
    flat_ids, flat_dy = ids.reshape(-1), dy.reshape(-1, dy.shape[-1])  # views of buffers

    def step() -> None:
        reference._check_ids(ids, rows)
        dw.fill(0)
        np.add.at(dw, flat_ids, flat_dy)

    return step
