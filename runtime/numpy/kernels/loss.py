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


class _SoftmaxCrossEntropy:
    """The shared work of the three cross-entropy kernels for logits [N, C]."""

    def __init__(self, logits: np.ndarray, labels: np.ndarray, scratch: Scratch):
        is_float(logits)
        if logits.ndim != 2 or labels.shape != logits.shape[:1]:
            raise Unsupported(
                f"logits {list(logits.shape)} and labels {list(labels.shape)} "
                "(expected [N, C] and [N])"
            )
        if labels.dtype not in (np.int32, np.int64):
            raise Unsupported(f"labels of dtype {labels.dtype}")
        n, c = logits.shape
        self.logits, self.labels, self.classes, self.rows = logits, labels, c, n
        dtype = logits.dtype
        self.lsm = scratch((n, c), dtype, 2)
        self.row = scratch((n, 1), dtype)
        self.picked = scratch((n,), dtype)
        self.scale = scratch((), dtype)
        self.index = scratch((n,), np.dtype(np.intp))
        self.row_start = np.arange(n, dtype=np.intp) * c

    def log_softmax(self, exp: np.ndarray) -> None:
        """lsm = x - max(x) - log(sum(exp(x - max(x)))), row-wise; `exp`: [N, C] work space."""
        x, lsm, row = self.logits, self.lsm, self.row
        reference._check_labels(self.labels, self.classes)
        np.max(x, axis=1, keepdims=True, out=row)
        np.subtract(x, row, out=lsm)
        np.exp(lsm, out=exp)
        np.sum(exp, axis=1, keepdims=True, out=row)
        np.log(row, out=row)
        np.subtract(lsm, row, out=lsm)
        np.add(self.row_start, self.labels, out=self.index)

    def loss(self, out: np.ndarray) -> None:
        """out = -mean_n(lsm[n, y_n])."""
        np.take(self.lsm.reshape(-1), self.index, out=self.picked)
        np.mean(self.picked, out=out)
        np.negative(out, out=out)

    def grad(self, dloss: np.ndarray, out: np.ndarray) -> None:
        """out = (exp(lsm) - onehot(y)) * (dloss / N)."""
        np.exp(self.lsm, out=out)
        flat = out.reshape(-1)
        np.take(flat, self.index, out=self.picked)
        np.subtract(self.picked, 1, out=self.picked)
        np.put(flat, self.index, self.picked)
        np.divide(dloss, self.rows, out=self.scale)
        np.multiply(out, self.scale, out=out)


def _check_dloss(dloss: np.ndarray, logits: np.ndarray) -> None:
    same_layout(dloss, (), logits.dtype, "the loss gradient")


def cross_entropy(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    ce = _SoftmaxCrossEntropy(ins[0], ins[1], scratch)
    (loss,) = outs
    same_layout(loss, (), ins[0].dtype, "the loss")
    exp = scratch(ins[0].shape, ins[0].dtype, 3)

    def step() -> None:
        ce.log_softmax(exp)
        ce.loss(loss)

    return step


def cross_entropy_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    expect(ins, 3, "inputs")
    expect(outs, 1, "outputs")
    logits, labels, dloss = ins
    ce = _SoftmaxCrossEntropy(logits, labels, scratch)
    _check_dloss(dloss, logits)
    (grad,) = outs
    like(grad, logits, "the logits gradient")

    def step() -> None:
        ce.log_softmax(grad)
        ce.grad(dloss, grad)

    return step


def cross_entropy_with_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(loss, grad_logits[, grad_bias = column sums of grad_logits])."""
    expect(ins, 3, "inputs")
    expect(outs, (2, 3), "outputs")
    logits, labels, dloss = ins
    ce = _SoftmaxCrossEntropy(logits, labels, scratch)
    _check_dloss(dloss, logits)
    loss, grad = outs[0], outs[1]
    same_layout(loss, (), logits.dtype, "the loss")
    like(grad, logits, "the logits gradient")
    if len(outs) == 2:

        def step() -> None:
            ce.log_softmax(grad)
            ce.loss(loss)
            ce.grad(dloss, grad)

        return step
    grad_bias = outs[2]
    same_layout(grad_bias, logits.shape[1:], logits.dtype, "the bias gradient")

    def step_bias() -> None:
        ce.log_softmax(grad)
        ce.loss(loss)
        ce.grad(dloss, grad)
        np.sum(grad, axis=0, out=grad_bias)

    return step_bias


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
