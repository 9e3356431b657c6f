"""The NumPy reference: what every graph and autodiff op means.

This module is the living definition of each op (JAX keeps `lax_reference`
for the same reason). Every backend kernel and every pass is checked against
it. Each function takes the op's operands as arrays, in operand order, and
its scalar parameters (`AicfcOp.kernel_params()`) as keywords, and returns a
tuple with one array per result (optional results included: callers keep as
many as the op has). `REFERENCE` maps each op class to its function, as xDSL's
interpreter keys its implementations by class (`@impl(math.ExpOp)`); the kernel
registry names ops by string (plain data), so `reference_for` turns a kernel's op
name into its function, once, when a program loads.

Arithmetic runs in the operands' dtype, as the kernels do; the gradient checks
run the same functions in float64. The low-precision storage dtypes (float16, and
bfloat16 through ml_dtypes, the NumPy dtype JAX uses) are storage only, as on the GPU:
every function of `REFERENCE` reads them as float32, computes in float32 and rounds
its float results back to the operands' low dtype, to nearest even, once
(`fp32_inside`; the module's functions themselves, called directly, compute in the
operands' dtype: go through REFERENCE for the meaning of an op on bf16/f16).
`graph.cast` is the one op that changes a dtype (`cast`), besides the wide results
of products and reductions (dialects/wide_results.py): with out_dtype = "f32" they are
the float32 sums of the bf16/f16 operands' values, not rounded.

The optimizer steps, learning-rate schedules, gradient clipping and accumulation and
dynamic loss scaling are in runtime/reference_optim.py; REFERENCE here keys them too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import ml_dtypes
import numpy as np
from scipy.special import erf, expit
from xdsl.context import Context
from xdsl.ir import Operation

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.activation_table import FACTS as ACTIVATION_ROWS
from aicfc.dialects.activation_table import Saved
from aicfc.dialects.graph import ACTIVATIONS, Activation
from aicfc.dialects.wide_results import OUT_DTYPE_PARAM, narrow_results, wide_results
from aicfc.runtime.reference_optim import (
    accumulate_grad,
    accumulation_step,
    adam_step,
    amp_select,
    clip_grad_norm,
    lr_schedule,
    sgd_step,
    unscale_grad,
    update_scale,
)

Array = np.ndarray
RefFn = Callable[..., tuple[Array, ...]]

LOW_PRECISION: frozenset[np.dtype] = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})
"""Storage dtypes whose arithmetic runs in float32 (see the module docstring)."""

ELEMENT_DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}
"""The NumPy dtype of each builtin element type's name (as MLIR prints it)."""

_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


def _op(x: Array, transpose: bool) -> Array:
    """x, or x with its last two dims swapped (a batch of transposed matrices)."""
    return np.swapaxes(x, -1, -2) if transpose else x


# --- constants and matrix products ------------------------------------------


def matmul(
    a: Array, b: Array, *, transpose_a: bool = False, transpose_b: bool = False
) -> tuple[Array]:
    """op(A) @ op(B) over the last two dims, batch dims broadcast (torch.matmul)."""
    return (np.matmul(_op(a, transpose_a), _op(b, transpose_b)),)


def _activate(z: Array, act: str) -> Array:
    """act(z) by the reference of the activation's op (its row of the activation table)."""
    a = Activation(act)
    return z if a == Activation.NONE else REFERENCE[ACTIVATIONS[a].forward](z)[0]


def gemm_epilogue(
    a: Array,
    b: Array,
    bias: Array | None = None,
    *,
    act: str = "none",
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> tuple[Array, Array]:
    """(Y, Z) with Z = op(A) op(B) + bias and Y = act(Z); A [..., M, K], bias of length N."""
    z = np.matmul(_op(a, transpose_a), _op(b, transpose_b))
    if bias is not None:
        z = z + bias
    return _activate(z, act), z


# --- elementwise -------------------------------------------------------------


def cast(x: Array, *, dtype: str) -> tuple[Array]:
    """x converted to `dtype` ("bf16", "f16", "f32", "f64"): NumPy's astype, which
    rounds a narrowing float cast to nearest even (ml_dtypes for bfloat16); past the
    target's range it is inf, as on the GPU (fp16 above 65504: loss scaling relies on it)."""
    with np.errstate(over="ignore"):
        return (x.astype(ELEMENT_DTYPES[dtype]),)


def bias_add(x: Array, bias: Array) -> tuple[Array]:
    return (x + bias,)


def add(a: Array, b: Array) -> tuple[Array]:
    return (a + b,)


def sub(a: Array, b: Array) -> tuple[Array]:
    return (a - b,)


def mul(a: Array, b: Array) -> tuple[Array]:
    return (a * b,)


def scale(x: Array, *, factor: float) -> tuple[Array]:
    return (x * x.dtype.type(factor),)


def relu(x: Array) -> tuple[Array]:
    return (np.maximum(x, 0).astype(x.dtype),)


def gelu(x: Array) -> tuple[Array]:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks and Gimpel 2016)."""
    return ((0.5 * x * (1.0 + erf(x * _SQRT_HALF))).astype(x.dtype),)


def tanh(x: Array) -> tuple[Array]:
    return (np.tanh(x),)


def silu(x: Array) -> tuple[Array]:
    """x * sigmoid(x) (Elfwing et al. 2018; torch.nn.functional.silu)."""
    return ((x * expit(x)).astype(x.dtype),)


# --- dropout: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
# as 1, 2, 3", SC 2011), the generator of kernels/dropout.cu ----------------

_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = np.uint32(0x9E3779B9)
_PHILOX_W1 = np.uint32(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter: Array, key: tuple[int, int]) -> Array:
    """Philox4x32-10 of counters [n, 4] (uint32) under a 2-word key -> [n, 4] uint32."""
    c = [counter[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    with np.errstate(over="ignore"):
        for r in range(10):
            if r:
                k0 = np.uint32(k0 + _PHILOX_W0)
                k1 = np.uint32(k1 + _PHILOX_W1)
            p0 = _PHILOX_M0 * c[0]
            p1 = _PHILOX_M1 * c[2]
            hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK32
            hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK32
            c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
    return np.stack(c, axis=1).astype(np.uint32)


def dropout_keep(n: int, offset: int, p: float, seed: int) -> Array:
    """The keep mask of n elements: element i keeps iff (word >> 8) >= round(p * 2^24).

    word is output (i % 4) of Philox4x32-10 with counter (i // 4 low, high,
    offset low, high) and key (seed low, high); integer comparison keeps the
    CUDA kernel bit-identical.
    """
    q = np.arange((n + 3) // 4, dtype=np.uint64)
    ctr = np.stack(
        [
            q & _MASK32,
            q >> np.uint64(32),
            np.full_like(q, offset & 0xFFFFFFFF),
            np.full_like(q, (offset >> 32) & 0xFFFFFFFF),
        ],
        axis=1,
    )
    words = philox4x32_10(ctr, (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)).reshape(-1)[:n]
    threshold = np.uint32(round(p * (1 << 24)))
    return (words >> np.uint32(8)) >= threshold


def dropout(x: Array, offset: Array, *, p: float, seed: int) -> tuple[Array]:
    keep = dropout_keep(x.size, int(offset), p, seed).reshape(x.shape)
    scale = x.dtype.type(1.0 / (1.0 - p))
    return (np.where(keep, x * scale, x.dtype.type(0)),)


# --- layout ------------------------------------------------------------------


def reshape(x: Array, *, shape: tuple[int, ...]) -> tuple[Array]:
    return (np.reshape(x, shape),)


def transpose(x: Array, *, perm: tuple[int, ...]) -> tuple[Array]:
    return (np.ascontiguousarray(np.transpose(x, perm)),)


def broadcast_to(x: Array, *, shape: tuple[int, ...]) -> tuple[Array]:
    return (np.ascontiguousarray(np.broadcast_to(x, shape)),)


def split(x: Array, *, axis: int, sizes: tuple[int, ...]) -> tuple[Array, ...]:
    """torch.split(x, sizes, dim=axis): consecutive pieces along the axis."""
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(x, cuts, axis=axis))


def concat(*inputs: Array, axis: int) -> tuple[Array]:
    """torch.cat(inputs, dim=axis)."""
    return (np.concatenate(inputs, axis=axis),)


# --- embedding ---------------------------------------------------------------


def _check_ids(ids: Array, rows: int) -> None:
    """Ids must lie in [0, V): a negative one would silently index from the end."""
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= rows):
        raise ValueError(
            f"graph.embedding: ids must be in [0, {rows}) for a table of {rows} rows, got "
            f"values from {int(ids.min())} to {int(ids.max())}"
        )


def embedding(ids: Array, weight: Array) -> tuple[Array]:
    """out[n] = weight[ids[n]] (torch.nn.functional.embedding)."""
    _check_ids(ids, weight.shape[0])
    return (weight[ids],)


def embedding_grad(dy: Array, ids: Array, *, num_embeddings: int) -> tuple[Array]:
    """dweight[v] = the sum of dy[n] over the positions with ids[n] = v, in increasing n
    (np.add.at adds unbuffered, in index order: deterministic)."""
    _check_ids(ids, num_embeddings)
    d = dy.shape[-1]
    dw = np.zeros((num_embeddings, d), dtype=dy.dtype)
    np.add.at(dw, ids.reshape(-1), dy.reshape(-1, d))
    return (dw,)


# --- layer normalisation (torch.nn.functional.layer_norm) --------------------


def layer_norm(
    x: Array, weight: Array | None = None, bias: Array | None = None, *, eps: float
) -> tuple[Array, Array, Array]:
    """(y, mean, rstd) over the last dim: biased variance, rstd = 1 / sqrt(var + eps)."""
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype), mean[..., 0], rstd[..., 0]


def add_layer_norm(
    x: Array,
    residual: Array,
    weight: Array | None = None,
    bias: Array | None = None,
    *,
    eps: float,
) -> tuple[Array, Array, Array, Array]:
    """(sum, y, mean, rstd): sum = x + residual, then layer_norm(sum)."""
    total = x + residual
    return (total, *layer_norm(total, weight, bias, eps=eps))


def layer_norm_grad(
    dy: Array, x: Array, mean: Array, rstd: Array, weight: Array | None = None
) -> tuple[Array, Array, Array]:
    """(dx, dweight, dbias) of layer_norm (torch's backward); the caller keeps the results
    the op has (dweight with a weight, dbias with a bias)."""
    xhat = (x - mean[..., None]) * rstd[..., None]
    g = dy * weight if weight is not None else dy
    dx = rstd[..., None] * (
        g - np.mean(g, axis=-1, keepdims=True) - xhat * np.mean(g * xhat, axis=-1, keepdims=True)
    )
    rows = tuple(range(dy.ndim - 1))
    dw = np.sum(dy * xhat, axis=rows)
    db = np.sum(dy, axis=rows)
    return dx.astype(dy.dtype), dw.astype(dy.dtype), db.astype(dy.dtype)


def add_layer_norm_grad(
    dy: Array,
    residual_grad: Array,
    x: Array,
    mean: Array,
    rstd: Array,
    weight: Array | None = None,
) -> tuple[Array, Array, Array]:
    """layer_norm_grad with residual_grad added to dx (one add of the two, as graph.add)."""
    dx, dw, db = layer_norm_grad(dy, x, mean, rstd, weight)
    return residual_grad + dx, dw, db


# --- attention ---------------------------------------------------------------


def causal_mask(x: Array, *, fill: float = -np.inf) -> tuple[Array]:
    """fill where key j > query i over the last two dims (top-left, torch.tril)."""
    t, s = x.shape[-2:]
    keep = np.tril(np.ones((t, s), dtype=bool))
    return (np.where(keep, x, x.dtype.type(fill)),)


def scaled_dot_product_attention(
    q: Array,
    k: Array,
    v: Array,
    offset: Array | None = None,
    *,
    scale: float,
    causal: bool = False,
    dropout_p: float = 0.0,
    seed: int = 0,
) -> tuple[Array, Array]:
    """(out, lse): the unfused chain's references, composed (so fusion changes no bit):
    scores = scale q k^T, causal mask, softmax over the keys, graph.dropout's mask on the
    flattened [B, H, T, S] probabilities, times v; lse = log(sum_j exp(scores)) of the
    unmasked j, before dropout."""
    s = _attention_scores(q, k, scale=scale, causal=causal)
    (p,) = softmax(s, axis=-1)
    if dropout_p > 0:
        assert offset is not None
        (p,) = dropout(p, offset, p=dropout_p, seed=seed)
    m = np.max(s, axis=-1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(s - m), axis=-1, keepdims=True))
    return np.matmul(p, v), lse[..., 0].astype(q.dtype)


def _attention_scores(q: Array, k: Array, *, scale: float, causal: bool) -> Array:
    """scale q k^T, causal-masked: matmul, scale and causal_mask as above."""
    (s,) = matmul(q, k, transpose_b=True)
    s = s * s.dtype.type(scale)
    if causal:
        (s,) = causal_mask(s)
    return s


def scaled_dot_product_attention_grad(
    dout: Array,
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    lse: Array,
    offset: Array | None = None,
    *,
    scale: float,
    causal: bool = False,
    dropout_p: float = 0.0,
    seed: int = 0,
) -> tuple[Array, Array, Array]:
    """(dq, dk, dv) with the probabilities recomputed from lse (FlashAttention-2's backward):
    P = exp(scores - lse), Pd = P * keep / (1 - p), dv = Pd^T dout, dP = (dout v^T) *
    keep / (1 - p), Delta = rowsum(dout * out), dS = P (dP - Delta), dq = scale dS k,
    dk = scale dS^T q."""
    s = _attention_scores(q, k, scale=scale, causal=causal)
    p = np.exp(s - lse[..., None])
    dp = np.matmul(dout, _op(v, True))
    pd = p
    if dropout_p > 0:
        assert offset is not None
        keep = dropout_keep(p.size, int(offset), dropout_p, seed).reshape(p.shape)
        kept = np.where(keep, p.dtype.type(1.0 / (1.0 - dropout_p)), p.dtype.type(0))
        pd, dp = p * kept, dp * kept
    dv = np.matmul(_op(pd, True), dout)
    delta = np.sum(dout * out, axis=-1, keepdims=True)
    ds = p * (dp - delta)
    sc = q.dtype.type(scale)
    dq = sc * np.matmul(ds, k)
    dk = sc * np.matmul(_op(ds, True), q)
    return dq.astype(q.dtype), dk.astype(q.dtype), dv.astype(q.dtype)


def _split_heads(x: Array, heads: int) -> Array:
    """[N, T, H d] -> [N, H, T, d] (reshape, then transpose [0, 2, 1, 3])."""
    n, t, d = x.shape
    return np.ascontiguousarray(x.reshape(n, t, heads, d // heads).transpose(0, 2, 1, 3))


def _merge_heads(x: Array) -> Array:
    """[N, H, T, d] -> [N, T, H d]: _split_heads's inverse."""
    n, h, t, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(n, t, h * d))


def _packed_heads(qkv: Array, heads: int) -> tuple[Array, Array, Array]:
    """q, k, v [N, H, T, d] of the packed qkv [N, T, 3 H d] (split into thirds, heads)."""
    q, k, v = np.split(qkv, 3, axis=-1)
    return _split_heads(q, heads), _split_heads(k, heads), _split_heads(v, heads)


def packed_qkv_attention(
    qkv: Array,
    offset: Array | None = None,
    *,
    num_heads: int,
    scale: float,
    causal: bool = False,
    dropout_p: float = 0.0,
    seed: int = 0,
) -> tuple[Array, Array]:
    """(out [N, T, D], lse [N, H, T]): scaled_dot_product_attention of the heads of qkv
    [N, T, 3D] (split, reshape, transpose), its output heads merged back."""
    q, k, v = _packed_heads(qkv, num_heads)
    o, lse = scaled_dot_product_attention(
        q, k, v, offset, scale=scale, causal=causal, dropout_p=dropout_p, seed=seed
    )
    return _merge_heads(o), lse


def packed_qkv_attention_grad(
    dout: Array,
    qkv: Array,
    out: Array,
    lse: Array,
    offset: Array | None = None,
    *,
    num_heads: int,
    scale: float,
    causal: bool = False,
    dropout_p: float = 0.0,
    seed: int = 0,
) -> tuple[Array]:
    """(dqkv [N, T, 3D],): scaled_dot_product_attention_grad's dq, dk, dv of the heads,
    each merged to [N, T, D] and concatenated in qkv's order."""
    q, k, v = _packed_heads(qkv, num_heads)
    grads = scaled_dot_product_attention_grad(
        _split_heads(dout, num_heads),
        q,
        k,
        v,
        _split_heads(out, num_heads),
        lse,
        offset,
        scale=scale,
        causal=causal,
        dropout_p=dropout_p,
        seed=seed,
    )
    return (np.concatenate([_merge_heads(x) for x in grads], axis=-1),)


# --- reductions and losses ---------------------------------------------------


def softmax(x: Array, *, axis: int) -> tuple[Array]:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True),)


def reduce_sum(x: Array, *, axes: tuple[int, ...], keepdims: bool = False) -> tuple[Array]:
    return (np.asarray(np.sum(x, axis=tuple(axes), keepdims=keepdims), dtype=x.dtype),)


def log_softmax(x: Array) -> Array:
    """Row-wise log softmax x - logsumexp(x), stable for any finite logits."""
    shifted = x - np.max(x, axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def _check_labels(labels: Array, classes: int) -> None:
    """Class labels must lie in [0, C): a negative one would silently index from the end."""
    if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= classes):
        raise ValueError(
            f"labels must be in [0, {classes}) for {classes} classes, got values from "
            f"{int(labels.min())} to {int(labels.max())}"
        )


def _rows(logits: Array, labels: Array) -> tuple[Array, Array]:
    """Logits [..., C] and labels [...] as rows [N, C] and [N] (N: the leading dims)."""
    return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)


def _label_log_softmax(logits: Array, labels: Array) -> Array:
    """log_softmax(logits) [N, C] after checking the labels [N] against C."""
    _check_labels(labels, logits.shape[1])
    return log_softmax(logits)


def _nll(lsm: Array, labels: Array, dtype: np.dtype) -> Array:
    """mean_n(-lsm[n, y_n]): the cross-entropy from the log-softmax."""
    return np.asarray(-np.mean(lsm[np.arange(lsm.shape[0]), labels]), dtype=dtype)


def _nll_grad(lsm: Array, labels: Array, dloss: Array, dtype: np.dtype) -> Array:
    """(softmax - onehot(y)) * dloss / N: its gradient with respect to the logits."""
    n = lsm.shape[0]
    g = np.exp(lsm)
    g[np.arange(n), labels] -= 1
    return (g * (dloss / n)).astype(dtype)


def cross_entropy(logits: Array, labels: Array) -> tuple[Array]:
    """mean over rows of logsumexp(x_n) - x_n[y_n] for logits [..., C], never log(softmax)
    (which underflows to -inf)."""
    x, y = _rows(logits, labels)
    return (_nll(_label_log_softmax(x, y), y, logits.dtype),)


def mse_loss(pred: Array, target: Array) -> tuple[Array]:
    d = pred - target
    return (np.asarray(np.mean(d * d), dtype=pred.dtype),)


# --- backward primitives -----------------------------------------------------


def relu_grad(dy: Array, y: Array) -> tuple[Array]:
    return (np.where(y > 0, dy, dy.dtype.type(0)),)


def gelu_grad(dy: Array, x: Array) -> tuple[Array]:
    cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return ((dy * (cdf + x * pdf)).astype(dy.dtype),)


def tanh_grad(dy: Array, y: Array) -> tuple[Array]:
    return (dy * (1 - y * y),)


def silu_grad(dy: Array, x: Array) -> tuple[Array]:
    """dy * silu'(x), silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x)."""
    s = expit(x)
    return ((dy * (s * (1 + x * (1 - s)))).astype(dy.dtype),)


def softmax_grad(dy: Array, y: Array, *, axis: int) -> tuple[Array]:
    return (y * (dy - np.sum(dy * y, axis=axis, keepdims=True)),)


def cross_entropy_grad(logits: Array, labels: Array, dloss: Array) -> tuple[Array]:
    x, y = _rows(logits, labels)
    return (_nll_grad(_label_log_softmax(x, y), y, dloss, logits.dtype).reshape(logits.shape),)


def cross_entropy_with_grad(
    logits: Array, labels: Array, dloss: Array
) -> tuple[Array, Array, Array]:
    """(cross_entropy, cross_entropy_grad, the sum of that gradient over the rows) from one
    log-softmax: the fused op of aicfc-fuse; a result the op does not have is dropped
    by the caller."""
    x, y = _rows(logits, labels)
    lsm = _label_log_softmax(x, y)
    grad = _nll_grad(lsm, y, dloss, logits.dtype)
    loss = _nll(lsm, y, logits.dtype)
    return loss, grad.reshape(logits.shape), np.sum(grad, axis=0).astype(grad.dtype)


def mse_loss_grad(pred: Array, target: Array, dloss: Array) -> tuple[Array]:
    return ((2 * (pred - target) * (dloss / pred.size)).astype(pred.dtype),)


def dropout_grad(dy: Array, offset: Array, *, p: float, seed: int) -> tuple[Array]:
    return dropout(dy, offset, p=p, seed=seed)


def epilogue_grad(dy: Array, saved: Array, *, act: str) -> tuple[Array, Array]:
    """(dZ, dbias): dZ = act_grad(dY, saved) by the reference of the activation's gradient
    op, dbias = the sum of dZ [..., N] over every leading axis."""
    dz = REFERENCE[ACTIVATIONS[Activation(act)].grad](dy, saved)[0]
    return dz, np.sum(dz, axis=tuple(range(dz.ndim - 1))).astype(dz.dtype)


def gemm_epilogue_grad(
    a: Array,
    b: Array,
    saved: Array,
    *,
    act: str,
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> tuple[Array, Array]:
    """(dZ, dbias) = epilogue_grad(op(A) op(B), saved): the unfused matmul then
    epilogue_grad, so the fused op computes exactly what the two ops compute."""
    (dy,) = matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    return epilogue_grad(dy, saved, act=act)


# --- the fused train step of an MLP (the optimizer steps, the lr schedules, clipping,
# accumulation and loss scaling: runtime/reference_optim.py) ---------------------


def mlp_train_step(
    *operands: Array,
    acts: str,
    bias: tuple[int, ...],
    decoupled_weight_decay: bool = False,
) -> tuple[Array, ...]:
    """The train step of an MLP chain (autodiff.mlp_train_step): the unfused program's ops
    in its order, each by its reference function, so the fused op computes exactly what
    they compute.

    operands: x [M, K0], labels [M], dloss [], lr, beta1, beta2, eps, weight_decay,
    grad_scale, apply, then per layer: weight [N, K], its exp_avg, exp_avg_sq and step,
    and where `bias[l]` the bias [N] with its three. Layer l: h = act_l(h W^T + b), acts
    comma-separated ("relu,none"); the last layer's act is none (its output is the
    logits). Results: the cross-entropy loss, then per layer the next values of its
    parameters and states (operand order).
    """
    x, y, dloss = operands[:3]
    hyper = operands[3:10]
    decoupled = decoupled_weight_decay
    layers: list[tuple[Array, ...]] = []
    at = 10
    for has_bias in bias:
        n = 8 if has_bias else 4
        layers.append(tuple(operands[at : at + n]))
        at += n
    saved: list[Array] = []  # what each layer's activation gradient reads
    inputs = [x]
    names = acts.split(",")
    for layer, act in zip(layers, names, strict=True):
        b = layer[4] if len(layer) == 8 else None
        h, z = gemm_epilogue(inputs[-1], layer[0], b, act=act, transpose_b=True)
        row = ACTIVATION_ROWS.get(act)
        saved.append(z if row is not None and row.saves == Saved.INPUT else h)
        inputs.append(h)
    loss, dz, db = cross_entropy_with_grad(inputs[-1], y, dloss)
    results: list[tuple[Array, ...]] = []
    for li in range(len(layers) - 1, -1, -1):
        layer = layers[li]
        (dw,) = matmul(dz, inputs[li], transpose_a=True)
        new = adam_step(layer[0], dw, *layer[1:4], *hyper, decoupled_weight_decay=decoupled)
        if len(layer) == 8:
            new += adam_step(layer[4], db, *layer[5:8], *hyper, decoupled_weight_decay=decoupled)
        results.append(new)
        if li and names[li - 1] == "none":
            (dz,) = matmul(dz, layer[0])
            db = np.sum(dz, axis=0).astype(dz.dtype)
        elif li:
            dz, db = gemm_epilogue_grad(dz, layer[0], saved[li - 1], act=names[li - 1])
    return (loss, *(a for r in reversed(results) for a in r))


# --- the table: op class -> reference ------------------------------------------


def fp32_inside(
    fn: RefFn, wide_results: tuple[int, ...] = (), narrow_results: tuple[int, ...] = ()
) -> RefFn:
    """`fn` with low-precision operands (LOW_PRECISION) read as float32 and its float32
    results rounded back to the first such operand's dtype: fp32 math inside, low-precision
    storage outside, as the GPU kernels compute. Other dtypes pass through unchanged.

    With the param out_dtype = "f32" (a widened op, dialects/wide_results.py), the results
    at `wide_results` (the op class's OpInfo) stay the unrounded float32 values; with
    out_dtype = "bf16" or "f16" (a narrowed op over float32 operands), the results at
    `narrow_results` are rounded to it (`cast`: to nearest even), as its kernel stores them."""

    @functools.wraps(fn)
    def run(*arrays: Array | None, **params: object) -> tuple[Array, ...]:
        out = params.pop(OUT_DTYPE_PARAM, None)
        keep = wide_results if out == "f32" else ()
        if out in ("bf16", "f16"):
            outs = fn(*arrays, **params)
            return tuple(
                cast(o, dtype=str(out))[0] if i in narrow_results else o for i, o in enumerate(outs)
            )
        low = next((a.dtype for a in arrays if a is not None and a.dtype in LOW_PRECISION), None)
        if low is None:
            return fn(*arrays, **params)
        wide = (a.astype(np.float32) if a is not None and a.dtype == low else a for a in arrays)
        outs = fn(*wide, **params)
        with np.errstate(over="ignore"):  # past fp16's range is inf, as on the GPU
            return tuple(
                o.astype(low)
                if np.result_type(o) == np.float32 and i not in keep
                else np.asarray(o)
                for i, o in enumerate(outs)
            )

    return run


_TABLE: dict[type[Operation], RefFn] = {
    g.MatmulOp: matmul,
    g.GemmEpilogueOp: gemm_epilogue,
    g.BiasAddOp: bias_add,
    g.AddOp: add,
    g.SubOp: sub,
    g.MulOp: mul,
    g.ScaleOp: scale,
    g.ReluOp: relu,
    g.GeluOp: gelu,
    g.TanhOp: tanh,
    g.SiluOp: silu,
    g.DropoutOp: dropout,
    g.ReshapeOp: reshape,
    g.TransposeOp: transpose,
    g.BroadcastToOp: broadcast_to,
    g.SplitOp: split,
    g.ConcatOp: concat,
    g.SoftmaxOp: softmax,
    g.ReduceSumOp: reduce_sum,
    g.CrossEntropyOp: cross_entropy,
    g.MseLossOp: mse_loss,
    g.EmbeddingOp: embedding,
    g.LayerNormOp: layer_norm,
    g.AddLayerNormOp: add_layer_norm,
    g.CausalMaskOp: causal_mask,
    g.ScaledDotProductAttentionOp: scaled_dot_product_attention,
    g.PackedQKVAttentionOp: packed_qkv_attention,
    ad.ReluGradOp: relu_grad,
    ad.GeluGradOp: gelu_grad,
    ad.TanhGradOp: tanh_grad,
    ad.SiluGradOp: silu_grad,
    ad.SoftmaxGradOp: softmax_grad,
    ad.CrossEntropyGradOp: cross_entropy_grad,
    ad.CrossEntropyWithGradOp: cross_entropy_with_grad,
    ad.MseLossGradOp: mse_loss_grad,
    ad.DropoutGradOp: dropout_grad,
    ad.EpilogueGradOp: epilogue_grad,
    ad.GemmEpilogueGradOp: gemm_epilogue_grad,
    ad.EmbeddingGradOp: embedding_grad,
    ad.LayerNormGradOp: layer_norm_grad,
    ad.AddLayerNormGradOp: add_layer_norm_grad,
    ad.ScaledDotProductAttentionGradOp: scaled_dot_product_attention_grad,
    ad.PackedQKVAttentionGradOp: packed_qkv_attention_grad,
    ad.AdamStepOp: adam_step,
    ad.SgdStepOp: sgd_step,
    ad.UnscaleGradOp: unscale_grad,
    ad.AmpSelectOp: amp_select,
    ad.UpdateScaleOp: update_scale,
    ad.MlpTrainStepOp: mlp_train_step,
    ad.LrScheduleOp: lr_schedule,
    ad.ClipGradNormOp: clip_grad_norm,
    ad.AccumulationStepOp: accumulation_step,
    ad.AccumulateGradOp: accumulate_grad,
}

REFERENCE: dict[type[Operation], RefFn] = {
    g.CastOp: cast,
    **{cls: fp32_inside(fn, wide_results(cls), narrow_results(cls)) for cls, fn in _TABLE.items()},
}
"""Reference semantics of every executable op, keyed by op class. graph.constant is data (its
value attribute) and autodiff.backward must be expanded first; neither is here."""

_OPS = Context()
_OPS.load_dialect(g.Graph)
_OPS.load_dialect(ad.Autodiff)


def reference_for(op_name: str) -> RefFn:
    """The reference function of the op named `op_name` (a KernelSpec's `op`), found through
    the dialects' op classes; KeyError naming the op where it has none."""
    cls = _OPS.get_optional_op(op_name)
    fn = REFERENCE.get(cls) if cls is not None else None
    if fn is None:
        raise KeyError(f"op {op_name!r} has no NumPy reference (runtime/reference.py REFERENCE)")
    return fn
