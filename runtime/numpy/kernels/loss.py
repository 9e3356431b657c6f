"""Losses: softmax cross-entropy (with its gradient) and MSE, on preallocated scratch.

Cross-entropy follows the reference step by step (runtime/reference.py
`log_softmax`, `_nll`, `_nll_grad`): the row max, the shifted logits, the row sums
of their exponentials, the log-softmax, then the picked entries' mean and
`(exp(lsm) - onehot(y)) * dloss / N`. Every intermediate lives in a work array (the
log-softmax [N, C], row vectors [N, 1], the flat indices of the labels [N]), so the
results are bitwise the reference's and a step allocates nothing. Labels are
checked on every step, with the reference's message, since they change every step.
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
    like,
    same_layout,
)


def _flat_view(a: np.ndarray, ndim: int) -> np.ndarray:
    """`a` with its leading dims merged into one (rank `ndim`), as a view of its buffer."""
    try:  # copy=False raises where a copy would be needed
        return np.reshape(a, (-1, *a.shape[a.ndim - ndim + 1 :]), copy=False)
    except ValueError:
        raise Unsupported(f"an array {list(a.shape)} that does not flatten in place") from None


def _softmax_cross_entropy(
    logits: np.ndarray,
    labels: np.ndarray,
    scratch: Scratch,
    loss: np.ndarray | None = None,
    grad: np.ndarray | None = None,
    dloss: np.ndarray | None = None,
    grad_bias: np.ndarray | None = None,
) -> Step:
    """The step writing `loss`, `grad` = (exp(lsm) - onehot(y)) * dloss / N and
    `grad_bias` (its column sums), whichever are given, from logits [..., C] and labels
    [...] (the leading dims flattened to rows N, as the reference's `_rows` does: views)."""
    is_float(logits)
    if logits.ndim > 2 and labels.shape == logits.shape[:-1]:
        logits, labels = _flat_view(logits, 2), _flat_view(labels, 1)
        grad = None if grad is None else _flat_view(grad, 2)
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise Unsupported(
            f"logits {list(logits.shape)} and labels {list(labels.shape)} (expected [N, C] and [N])"
        )
    if labels.dtype not in (np.int32, np.int64):
        raise Unsupported(f"labels of dtype {labels.dtype}")
    n, c = logits.shape
    dtype = logits.dtype
    if loss is not None:
        same_layout(loss, (), dtype, "the loss")
    if grad is not None:
        like(grad, logits, "the logits gradient")
        if dloss is None:
            raise Unsupported("a logits gradient without the loss gradient")
        same_layout(dloss, (), dtype, "the loss gradient")
    if grad_bias is not None:
        same_layout(grad_bias, (c,), dtype, "the bias gradient")
    lsm = scratch((n, c), dtype, 2)
    exp = grad if grad is not None else scratch((n, c), dtype, 3)  # work space until grad
    row = scratch((n, 1), dtype)
    picked = scratch((n,), dtype)
    scale = scratch((), dtype)
    index = scratch((n,), np.dtype(np.intp))
    row_start = np.arange(n, dtype=np.intp) * c
    count = np.intp(n)
    lsm_flat = lsm.reshape(-1)
    grad_flat = grad.reshape(-1) if grad is not None else None

    def step() -> None:
        reference._check_labels(labels, c)
        # lsm = x - max(x) - log(sum(exp(x - max(x)))), row by row
        np.maximum.reduce(logits, axis=1, keepdims=True, out=row)  # np.max, unwrapped
        np.subtract(logits, row, out=lsm)
        np.exp(lsm, out=exp)
        np.add.reduce(exp, axis=1, keepdims=True, out=row)  # np.sum, unwrapped
        np.log(row, out=row)
        np.subtract(lsm, row, out=lsm)
        np.add(row_start, labels, out=index)  # flat index of [n, y_n]; in range (checked),
        # so take and put need no bounds check ("clip"; "raise" would buffer the output)
        if loss is not None:  # -mean_n(lsm[n, y_n])
            np.take(lsm_flat, index, out=picked, mode="clip")
            # np.mean, unwrapped: the sum divided by the count as an intp (in float64,
            # rounded once to the result's dtype, as np.mean divides)
            np.add.reduce(picked, out=loss)
            np.divide(loss, count, out=loss, casting="unsafe")
            np.negative(loss, out=loss)
        if grad is not None and grad_flat is not None and dloss is not None:
            # grad = (exp(lsm) - onehot(y)) * dloss / N
            np.exp(lsm, out=grad)
            np.take(grad_flat, index, out=picked, mode="clip")
            np.subtract(picked, 1, out=picked)
            np.put(grad_flat, index, picked, mode="clip")
            np.divide(dloss, n, out=scale)
            np.multiply(grad, scale, out=grad)
        if grad_bias is not None and grad is not None:
            np.add.reduce(grad, axis=0, out=grad_bias)

    return step


def cross_entropy(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    return _softmax_cross_entropy(ins[0], ins[1], scratch, loss=outs[0])


def cross_entropy_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 3, "inputs")
    expect(outs, 1, "outputs")
    return _softmax_cross_entropy(ins[0], ins[1], scratch, grad=outs[0], dloss=ins[2])


def cross_entropy_with_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(loss, grad_logits[, grad_bias = column sums of grad_logits])."""
    expect(ins, 3, "inputs")
    expect(outs, (2, 3), "outputs")
    return _softmax_cross_entropy(
        ins[0],
        ins[1],
        scratch,
        loss=outs[0],
        grad=outs[1],
        dloss=ins[2],
        grad_bias=outs[2] if len(outs) == 3 else None,
    )


# --- mean squared error ------------------------------------------------------------


def mse_loss(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """loss = mean((pred - target)^2)."""
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    pred, target = ins
    is_float(pred)
    like(target, pred, "the target")
    (loss,) = outs
    same_layout(loss, (), pred.dtype, "the loss")
    d = scratch(pred.shape, pred.dtype)

    def step() -> None:
        np.subtract(pred, target, out=d)
        np.multiply(d, d, out=d)
        np.mean(d, out=loss)

    return step


def mse_loss_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """grad = 2 (pred - target) * (dloss / numel)."""
    expect(ins, 3, "inputs")
    expect(outs, 1, "outputs")
    pred, target, dloss = ins
    is_float(pred)
    like(target, pred, "the target")
    same_layout(dloss, (), pred.dtype, "the loss gradient")
    (grad,) = outs
    like(grad, pred, "the gradient")
    scale = scratch((), pred.dtype)
    size = pred.size

    def step() -> None:
        np.subtract(pred, target, out=grad)
        np.multiply(grad, 2, out=grad)
        np.divide(dloss, size, out=scale)
        np.multiply(grad, scale, out=grad)

    return step
