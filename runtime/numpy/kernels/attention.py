"""Scaled dot-product attention and its gradient, without dropout, into their outputs.

Both follow runtime/reference.py's `scaled_dot_product_attention` and
`scaled_dot_product_attention_grad` step by step: the scores through the same
`np.matmul` of the [B, H, T, Dh] batches (k^T a view), scaled, the causal mask's
-inf written where the reference's `np.where` puts it, the softmax's row max, exp
and row sum, lse = max + log(sum) from that same sum (the reference recomputes
exp(s - max), bitwise the same values), the gradient's probabilities exp(s - lse)
and its products in work arrays of the scores' shape, so the results are bitwise the
reference's and a step allocates nothing. Dropout (an `offset` operand, dropout_p >
0) runs the reference.
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


def _check(q: np.ndarray, k: np.ndarray, v: np.ndarray, params: Params) -> tuple[int, int]:
    """(T, S) of q [..., T, Dh], k and v [..., S, Dh]; Unsupported for dropout."""
    is_float(q)
    if float(param(params, "dropout_p", 0.0)) > 0:  # type: ignore[arg-type]
        raise Unsupported("attention dropout (the reference draws its mask)")
    if q.ndim < 2 or k.shape != v.shape or k.shape[:-2] != q.shape[:-2]:
        raise Unsupported(f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}")
    if k.shape[-1] != q.shape[-1]:
        raise Unsupported(f"q {list(q.shape)} and k {list(k.shape)} differ in head dim")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise Unsupported(f"q, k, v of dtypes {q.dtype}, {k.dtype}, {v.dtype}")
    return q.shape[-2], k.shape[-2]


def _scores(q: np.ndarray, k: np.ndarray, s: np.ndarray, params: Params) -> Step:
    """s = scale q k^T, causal-masked with -inf (the reference's `_attention_scores`)."""
    kt = np.swapaxes(k, -1, -2)
    scale = q.dtype.type(float(param(params, "scale")))  # type: ignore[arg-type]
    t, n = s.shape[-2:]
    masked = ~np.tril(np.ones((t, n), dtype=bool)) if param(params, "causal") else None
    fill = q.dtype.type(-np.inf)

    def step() -> None:
        np.matmul(q, kt, out=s)
        np.multiply(s, scale, out=s)
        if masked is not None:
            np.copyto(s, fill, where=masked)

    return step


def scaled_dot_product_attention(
    ins: Arrays, outs: Arrays, params: Params, scratch: Scratch
) -> Step:
    """(out, lse): softmax(scale q k^T, causal) v and the rows' log-sum-exp [..., T]."""
    expect(ins, 3, "inputs")
    expect(outs, 2, "outputs")
    q, k, v = ins
    t, n = _check(q, k, v, params)
    out, lse = outs
    like(out, q, "the output")
    same_layout(lse, q.shape[:-1], q.dtype, "the lse")
    s = scratch((*q.shape[:-2], t, n), q.dtype, 0)
    p = scratch(s.shape, q.dtype, 1)
    row_max = scratch((*q.shape[:-1], 1), q.dtype, 2)  # distinct indices: shapes may agree
    row_sum = scratch(row_max.shape, q.dtype, 3)
    lse_rows = lse[..., None]
    scores = _scores(q, k, s, params)

    def step() -> None:
        scores()
        np.maximum.reduce(s, axis=-1, keepdims=True, out=row_max)  # np.max, unwrapped
        np.subtract(s, row_max, out=p)
        np.exp(p, out=p)
        np.add.reduce(p, axis=-1, keepdims=True, out=row_sum)  # np.sum, unwrapped
        np.divide(p, row_sum, out=p)
        np.log(row_sum, out=row_sum)
        np.add(row_max, row_sum, out=lse_rows)
        np.matmul(p, v, out=out)

    return step


def scaled_dot_product_attention_grad(
    ins: Arrays, outs: Arrays, params: Params, scratch: Scratch
) -> Step:
    """(dq, dk, dv) with P = exp(scores - lse): dv = P^T dout, dS = P (dout v^T - Delta),
    Delta = rowsum(dout * out), dq = scale dS k, dk = scale dS^T q."""
    expect(ins, 6, "inputs")
    expect(outs, 3, "outputs")
    dout, q, k, v, out, lse = ins
    t, n = _check(q, k, v, params)
    like(dout, q, "the output gradient")
    like(out, q, "the saved output")
    same_layout(lse, q.shape[:-1], q.dtype, "the saved lse")
    dq, dk, dv = outs
    like(dq, q, "dq")
    like(dk, k, "dk")
    like(dv, v, "dv")
    s = scratch((*q.shape[:-2], t, n), q.dtype, 0)
    dp = scratch(s.shape, q.dtype, 1)
    prod = scratch(q.shape, q.dtype, 2)  # distinct indices: [.., T, Dh] may be [.., T, S]
    delta = scratch((*q.shape[:-1], 1), q.dtype, 3)
    lse_rows = lse[..., None]
    vt, st, dst = np.swapaxes(v, -1, -2), np.swapaxes(s, -1, -2), np.swapaxes(dp, -1, -2)
    scale = q.dtype.type(float(param(params, "scale")))  # type: ignore[arg-type]
    scores = _scores(q, k, s, params)

    def step() -> None:
        scores()
        np.subtract(s, lse_rows, out=s)
        np.exp(s, out=s)  # P
        np.matmul(dout, vt, out=dp)
        np.matmul(st, dout, out=dv)
        np.multiply(dout, out, out=prod)
        np.add.reduce(prod, axis=-1, keepdims=True, out=delta)  # np.sum, unwrapped
        np.subtract(dp, delta, out=dp)
        np.multiply(s, dp, out=dp)  # dS
        np.matmul(dp, k, out=dq)
        np.multiply(scale, dq, out=dq)
        np.matmul(dst, q, out=dk)
        np.multiply(scale, dk, out=dk)

    return step
