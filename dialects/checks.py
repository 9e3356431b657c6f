"""Verifier checks shared by a forward op and its backward primitives.

A graph op and the autodiff op that computes its gradient read operands of the same
shapes (cross_entropy and cross_entropy_grad, layer_norm and layer_norm_grad, the
attention op and its gradient), so each check lives here once and both verifiers call
it; every message names the op that called. The shape helpers of all ops are in
dialects/tensors.py.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.tensors import (
    fmt_shape,
    is_int,
    ranked,
    require_float,
    require_nonempty,
    require_same_dtype,
    tensor,
    verify_rng_offset,
)


def verify_class_logits(
    op_name: str, logits: SSAValue, labels: SSAValue
) -> tuple[TensorType[Attribute], TensorType[Attribute]]:
    """Float logits [..., C] (at least one element) and integer labels [...] of the same
    leading shape; returns their types."""
    x = ranked(op_name, "logits", logits)
    y = ranked(op_name, "labels", labels)
    require_float(op_name, "logits", x)
    if len(x.get_shape()) < 1:
        raise VerifyException(
            f"{op_name}: logits must have rank >= 1 ([..., C]), got {fmt_shape(x.get_shape())}"
        )
    require_nonempty(op_name, "logits", x)
    if not is_int(y.element_type):
        raise VerifyException(f"{op_name}: labels must be i32 or i64, got {y.element_type}")
    rows = tuple(x.get_shape()[:-1])
    if tuple(y.get_shape()) != rows:
        raise VerifyException(
            f"{op_name}: labels must have shape {fmt_shape(rows)} (the leading dims of "
            f"logits {fmt_shape(x.get_shape())}), got {fmt_shape(y.get_shape())}"
        )
    return x, y


def verify_ids(op_name: str, ids: SSAValue) -> TensorType[Attribute]:
    """Integer ids (i32 or i64) of any static shape; returns their type."""
    t = ranked(op_name, "ids", ids)
    if not is_int(t.element_type):
        raise VerifyException(f"{op_name}: ids must be integer (i32 or i64), got {t.element_type}")
    return t


def verify_layer_norm(
    op_name: str,
    x: SSAValue,
    weight: SSAValue | None,
    bias: SSAValue | None,
    eps: float | None = None,
) -> tuple[TensorType[Attribute], TensorType[Attribute]]:
    """Check x [..., D] (float, D >= 1), weight and bias [D] of x's dtype, a bias only with
    a weight, eps finite and >= 0; returns (x's type, the statistics' type [...])."""
    t = ranked(op_name, "input", x)
    require_float(op_name, "input", t)
    shape = t.get_shape()
    if not shape or shape[-1] == 0:
        raise VerifyException(
            f"{op_name}: input must have a non-empty last dim to normalise over, got "
            f"{fmt_shape(shape)}"
        )
    d = shape[-1]
    if bias is not None and weight is None:
        raise VerifyException(
            f"{op_name}: a bias needs a weight (torch.nn.LayerNorm has no bias-only form; "
            "pass a weight of ones)"
        )
    for what, v in (("weight", weight), ("bias", bias)):
        if v is None:
            continue
        p = ranked(op_name, what, v)
        require_same_dtype(op_name, [("input", t), (what, p)])
        if tuple(p.get_shape()) != (d,):
            raise VerifyException(
                f"{op_name}: {what} must have shape [{d}] (the last dim of input "
                f"{fmt_shape(shape)}), got {fmt_shape(p.get_shape())}"
            )
    if eps is not None and not (math.isfinite(eps) and eps >= 0):
        raise VerifyException(f"{op_name}: eps must be finite and >= 0, got {eps}")
    return t, tensor(shape[:-1], t.element_type)


def verify_attention(
    op_name: str, q: SSAValue, k: SSAValue, v: SSAValue
) -> tuple[TensorType[Attribute], TensorType[Attribute]]:
    """Check q [B, H, T, d], k and v [B, H, S, d] (float, one dtype); returns (q's type,
    the lse type [B, H, T])."""
    qt, kt, vt = (ranked(op_name, w, x) for w, x in (("q", q), ("k", k), ("v", v)))
    require_float(op_name, "q", qt)
    require_same_dtype(op_name, [("q", qt), ("k", kt), ("v", vt)])
    qs, ks, vs = qt.get_shape(), kt.get_shape(), vt.get_shape()
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        raise VerifyException(
            f"{op_name}: q, k and v must be rank 4 [B, H, T, d], got {fmt_shape(qs)}, "
            f"{fmt_shape(ks)} and {fmt_shape(vs)}"
        )
    if tuple(ks) != tuple(vs) or tuple(ks[:2]) != tuple(qs[:2]) or ks[3] != qs[3]:
        raise VerifyException(
            f"{op_name}: k and v must be [B, H, S, d] = [{qs[0]}, {qs[1]}, S, {qs[3]}] "
            f"(B, H and d of q {fmt_shape(qs)}), got k {fmt_shape(ks)} and v {fmt_shape(vs)}"
        )
    return qt, tensor(qs[:3], qt.element_type)


def verify_attention_properties(
    op_name: str, offset: SSAValue | None, scale: float, p: float, seed_without_p: bool
) -> None:
    """A finite scale, dropout_p in [0, 1), the Philox offset present exactly when p > 0,
    a seed only with dropout."""
    if not math.isfinite(scale):
        raise VerifyException(f"{op_name}: scale must be finite, got {scale}")
    if not 0.0 <= p < 1.0:
        raise VerifyException(f"{op_name}: dropout_p must be in [0, 1), got {p}")
    if (offset is not None) != (p > 0.0):
        raise VerifyException(
            f"{op_name}: the offset operand is needed exactly when dropout_p > 0 (dropout_p = {p})"
        )
    if seed_without_p:
        raise VerifyException(f"{op_name}: a seed without dropout_p has no effect")
    if offset is not None:
        verify_rng_offset(op_name, offset)
