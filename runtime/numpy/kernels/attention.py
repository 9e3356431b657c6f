"""Scaled dot-product attention and its gradient, without dropout, into their outputs.

Both follow runtime/reference.py's `scaled_dot_product_attention` and
`scaled_dot_product_attention_grad` step by step: the scores through the same
`np.matmul` of the [B, H, T, Dh] batches (k^T a view), scaled, the causal mask's
-inf written where the reference's `np.where` puts it, the softmax's row max, exp
and row sum, lse = max + log(sum) from that same sum (the reference recomputes
exp(s - max), bitwise the same values), the gradient's probabilities exp(s - lse)
and its products in work arrays of the scores' shape, so the results are bitwise the
reference's and a step allocates nothing. Dropout (an `offset` operand, dropout_p >
0) runs the reference. The packed forms (graph.packed_qkv_attention and its gradient)
copy the heads into work arrays as the reference does and run the same steps.
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


def _head_views(x: np.ndarray, heads: int) -> np.ndarray:
    """[N, T, H d] -> the [N, H, T, d] view of its heads (no copy)."""
    n, t, w = x.shape
    return x.reshape(n, t, heads, w // heads).transpose(0, 2, 1, 3)


def _packed(qkv: np.ndarray, params: Params) -> tuple[int, tuple[int, int, int, int]]:
    """(H, the heads' shape [N, H, T, d]) of qkv [N, T, 3 H d]; Unsupported otherwise."""
    is_float(qkv)
    heads = int(param(params, "num_heads", 0))  # type: ignore[call-overload]
    if qkv.ndim != 3 or heads < 1 or qkv.shape[2] % (3 * heads):
        raise Unsupported(f"qkv {list(qkv.shape)} with {heads} heads")
    n, t, w = qkv.shape
    return heads, (n, heads, t, w // (3 * heads))


def packed_qkv_attention(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(out [N, T, D], lse [N, H, T]) of qkv [N, T, 3D]: the reference's order, i.e. the
    heads copied out contiguous, scaled_dot_product_attention's step, the heads merged."""
    expect(ins, 1, "inputs")
    expect(outs, 2, "outputs")
    (qkv,) = ins
    heads, shape = _packed(qkv, params)
    out, lse = outs
    same_layout(out, (*qkv.shape[:2], qkv.shape[2] // 3), qkv.dtype, "the output")
    parts = [_head_views(x, heads) for x in np.split(qkv, 3, axis=-1)]
    qkv_h = [scratch(shape, qkv.dtype, 10 + i) for i in range(3)]
    o = scratch(shape, qkv.dtype, 13)
    inner = scaled_dot_product_attention(qkv_h, [o, lse], params, scratch)
    merged = _head_views(out, heads)

    def step() -> None:
        for dst, src in zip(qkv_h, parts, strict=True):
            np.copyto(dst, src)
        inner()
        np.copyto(merged, o)

    return step


def packed_qkv_attention_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """dqkv [N, T, 3D] of (dout, qkv, out, lse): the heads copied out contiguous,
    scaled_dot_product_attention_grad's step, dq, dk, dv copied into their thirds."""
    expect(ins, 4, "inputs")
    expect(outs, 1, "outputs")
    dout, qkv, out, lse = ins
    heads, shape = _packed(qkv, params)
    (dqkv,) = outs
    like(dqkv, qkv, "dqkv")
    width = (*qkv.shape[:2], qkv.shape[2] // 3)
    same_layout(dout, width, qkv.dtype, "the output gradient")
    same_layout(out, width, qkv.dtype, "the saved output")
    sources = [_head_views(x, heads) for x in (*np.split(qkv, 3, axis=-1), dout, out)]
    copies = [scratch(shape, qkv.dtype, 10 + i) for i in range(5)]
    grads = [scratch(shape, qkv.dtype, 15 + i) for i in range(3)]
    q, k, v, g, o = copies
    inner = scaled_dot_product_attention_grad([g, q, k, v, o, lse], grads, params, scratch)
    targets = [_head_views(x, heads) for x in np.split(dqkv, 3, axis=-1)]

    def step() -> None:
        for dst, src in zip(copies, sources, strict=True):
            np.copyto(dst, src)
        inner()
        for dst, src in zip(targets, grads, strict=True):
            np.copyto(dst, src)

    return step
