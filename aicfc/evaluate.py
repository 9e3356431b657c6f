"""`Program.evaluate`: the mean loss (and accuracy) over a data set, without an update.

The model's outputs come from `Program.predict` (eval mode: no dropout) in batches of
`batch_size` rows; the last, shorter batch is padded with copies of its first row so
that one compiled @predict serves every batch, and only its real rows count. The loss of
each batch is the NumPy reference's (runtime/reference.py cross_entropy, mse_loss, in
the parameters' dtype), weighted by its rows and added in float64: the mean over all
rows, as F.cross_entropy / F.mse_loss of the whole set gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from aicfc.runtime import reference

if TYPE_CHECKING:
    from aicfc.program import Program


class Evaluation(NamedTuple):
    """loss: the mean loss over the rows; accuracy: the fraction of rows whose largest
    output is the label (cross_entropy; None for mse); rows: how many rows."""

    loss: float
    accuracy: float | None
    rows: int


def evaluate(program: Program, x: Any, y: Any, batch_size: int = 1024) -> Evaluation:
    """See the module docstring; InputError for a bad x or y, ValueError for a bad batch_size."""
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"evaluate: batch_size must be a positive integer, got {batch_size!r}")
    x = x.get() if hasattr(x, "__cuda_array_interface__") else x
    y = y.get() if hasattr(y, "__cuda_array_interface__") else y
    xa = program._check_x(x)
    out_shape = program._output_shape(xa.shape)
    ya = program._check_y(y, out_shape)
    rows = int(xa.shape[0])
    size = min(int(batch_size), rows)
    total, correct = 0.0, 0
    mse = program.loss == "mse"
    for start in range(0, rows, size):
        xb, yb = xa[start : start + size], ya[start : start + size]
        n = len(xb)
        if n < size:  # padded: the compiled batch shape, only the real rows count
            xb = np.concatenate([xb, np.repeat(xb[:1], size - n, axis=0)])
        out = program.predict(xb)[:n]
        if mse:
            total += float(reference.mse_loss(out, yb)[0]) * out.size
        else:
            total += float(reference.cross_entropy(out, yb)[0]) * n
            correct += int(np.sum(out.argmax(axis=1) == yb))
    if mse:
        return Evaluation(total / (rows * int(np.prod(out_shape[1:]))), None, rows)
    return Evaluation(total / rows, correct / rows, rows)
