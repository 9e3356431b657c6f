"""Layer normalisation: layer_norm, add_layer_norm, layer_norm_grad and add_layer_norm_grad,
into their outputs.

Each follows runtime/reference.py's `layer_norm` and `layer_norm_grad` step by step:
`np.mean` unwrapped as the row sum (`np.add.reduce`) divided by the count as an intp
(in float64, rounded once to the dtype, as np.mean divides), `** 2` as `np.square`
(what NumPy runs for a power of 2), the statistics written straight into the mean and
rstd outputs (as [..., 1] views), the centred rows and the gradient's terms in work
arrays, so the results are bitwise the reference's and a step allocates nothing.
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
    is_float,
    like,
    param,
    same_layout,
)


def _affine(ins: Arrays, first: int, x: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The optional weight and bias operands from index `first` (a bias needs a weight)."""
    weight = ins[first] if len(ins) > first else None
    bias = ins[first + 1] if len(ins) > first + 1 else None
    for a, what in ((weight, "the weight"), (bias, "the bias")):
        if a is not None:
            same_layout(a, x.shape[-1:], x.dtype, what)
    return weight, bias


def _statistics(x: np.ndarray, outs: Arrays) -> tuple[np.ndarray, np.ndarray]:
    """The mean and rstd outputs [...] as [..., 1] views (keepdims, as the reference)."""
    for k, what in ((0, "the mean"), (1, "the rstd")):
        same_layout(outs[k], x.shape[:-1], x.dtype, what)
    return outs[0][..., None], outs[1][..., None]


def _normalize(
    x: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    y: np.ndarray,
    mean: np.ndarray,
    rstd: np.ndarray,
    eps: float,
    scratch: Scratch,
) -> Step:
    """y = (x - mean) rstd * weight + bias, mean and rstd [..., 1] (the reference's order)."""
    is_float(x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise Unsupported(f"an input {list(x.shape)} (expected [..., D], D > 0)")
    like(y, x, "the result")
    centred = scratch(x.shape, x.dtype)
    count = np.intp(x.shape[-1])
    e = x.dtype.type(eps)

    def step() -> None:
        np.add.reduce(x, axis=-1, keepdims=True, out=mean)  # np.mean: sum / count
        np.divide(mean, count, out=mean, casting="unsafe")
        np.subtract(x, mean, out=centred)
        np.square(centred, out=y)  # y as work space until the end
        np.add.reduce(y, axis=-1, keepdims=True, out=rstd)
        np.divide(rstd, count, out=rstd, casting="unsafe")  # var
        np.add(rstd, e, out=rstd)
        np.sqrt(rstd, out=rstd)
        np.divide(1.0, rstd, out=rstd)
        np.multiply(centred, rstd, out=y)
        if weight is not None:
            np.multiply(y, weight, out=y)
        if bias is not None:
            np.add(y, bias, out=y)

    return step


def layer_norm(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(y, mean, rstd) of x [..., D] with an optional weight and bias [D]."""
    expect(ins, (1, 2, 3), "inputs")
    expect(outs, 3, "outputs")
    x = ins[0]
    weight, bias = _affine(ins, 1, x)
    mean, rstd = _statistics(x, outs[1:])
    eps = float(param(params, "eps"))  # type: ignore[arg-type]
    return _normalize(x, weight, bias, outs[0], mean, rstd, eps, scratch)


def add_layer_norm(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(sum, y, mean, rstd): sum = x + residual, then layer_norm(sum)."""
    expect(ins, (2, 3, 4), "inputs")
    expect(outs, 4, "outputs")
    x, residual, total = ins[0], ins[1], outs[0]
    is_float(x)
    like(residual, x, "the residual")
    like(total, x, "the sum")
    weight, bias = _affine(ins, 2, x)
    mean, rstd = _statistics(x, outs[2:])
    eps = float(param(params, "eps"))  # type: ignore[arg-type]
    normalize = _normalize(total, weight, bias, outs[1], mean, rstd, eps, scratch)

    def step() -> None:
        np.add(x, residual, out=total)
        normalize()

    return step


def layer_norm_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(dx[, dweight[, dbias]]) from dy, x [..., D], mean, rstd [...] and the weight [D]:
    xhat = (x - mean) rstd, g = dy weight, dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)),
    dweight = sum_rows(dy xhat), dbias = sum_rows(dy)."""
    expect(ins, (4, 5), "inputs")
    expect(outs, (1, 2, 3) if len(ins) == 5 else 1, "outputs")
    dy, x, mean_in, rstd_in = ins[:4]
    is_float(dy)
    if dy.ndim < 1 or dy.shape[-1] == 0:
        raise Unsupported(f"a gradient {list(dy.shape)} (expected [..., D], D > 0)")
    like(x, dy, "the input")
    for a, what in ((mean_in, "the mean"), (rstd_in, "the rstd")):
        same_layout(a, dy.shape[:-1], dy.dtype, what)
    weight = ins[4] if len(ins) == 5 else None
    if weight is not None:
        same_layout(weight, dy.shape[-1:], dy.dtype, "the weight")
    like(outs[0], dy, "the input gradient")
    for k in range(1, len(outs)):
        same_layout(outs[k], dy.shape[-1:], dy.dtype, f"result #{k}")
    dx = outs[0]
    dw = outs[1] if len(outs) > 1 else None
    db = outs[2] if len(outs) > 2 else None
    mean, rstd = mean_in[..., None], rstd_in[..., None]
    xhat = scratch(dy.shape, dy.dtype, 0)
    g = scratch(dy.shape, dy.dtype, 1) if weight is not None else dy
    t = scratch(dy.shape, dy.dtype, 2)
    row_g = scratch((*dy.shape[:-1], 1), dy.dtype, 3)  # distinct indices: D may be 1
    row_gx = scratch((*dy.shape[:-1], 1), dy.dtype, 4)
    count = np.intp(dy.shape[-1])
    rows = tuple(range(dy.ndim - 1))

    def step() -> None:
        np.subtract(x, mean, out=xhat)
        np.multiply(xhat, rstd, out=xhat)
        if weight is not None:
            np.multiply(dy, weight, out=g)
        np.add.reduce(g, axis=-1, keepdims=True, out=row_g)  # np.mean(g): sum / count
        np.divide(row_g, count, out=row_g, casting="unsafe")
        np.multiply(g, xhat, out=t)
        np.add.reduce(t, axis=-1, keepdims=True, out=row_gx)
        np.divide(row_gx, count, out=row_gx, casting="unsafe")
        if dw is not None:  # t is free again; dy is read before dx is written
            np.multiply(dy, xhat, out=t)
            np.add.reduce(t, axis=rows, out=dw)
        if db is not None:
            np.add.reduce(dy, axis=rows, out=db)
        np.subtract(g, row_g, out=t)
        np.multiply(xhat, row_gx, out=xhat)
        np.subtract(t, xhat, out=t)
        np.multiply(rstd, t, out=dx)

    return step


def add_layer_norm_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """layer_norm_grad of (dy, x, mean, rstd[, weight]) with residual_grad (the second
    operand, like dy) added to dx: one np.add of the two, as graph.add."""
    expect(ins, (5, 6), "inputs")
    residual = ins[1]
    normalize = layer_norm_grad((ins[0], *ins[2:]), outs, params, scratch)
    like(residual, ins[0], "the residual gradient")
    dx = outs[0]

    def step() -> None:
        normalize()
        np.add(residual, dx, out=dx)

    return step
