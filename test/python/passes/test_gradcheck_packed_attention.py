"""graph.packed_qkv_attention's VJP (autodiff.packed_qkv_attention_grad: the packed dqkv
[N, T, 3D] in one op) against float64 central finite differences, and its forward
against the unfused head layout it stands for.

The harness is test_gradcheck.py's (loss = sum(out * R) with a fixed random R,
aicfc-expand-backward, the interpreter on the NumPy reference, ||grad - fd|| <= 1e-6 ||fd||
+ 1e-8 with step 1e-6). Inputs are fresh draws of a seeded generator. Cases: heads 1 and
3, causal or not, with and without dropout (the offset operand gets no gradient); the op
built directly and formed by aicfc-fuse from a block's split -> heads -> attention ->
merge.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.ir import SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.passes.aicfc_fuse import AicfcFusePass
from aicfc.runtime.reference import REFERENCE
from gradcheck_support import Case, Emit, build, compare_with_differences, expand, gradcheck, offset

PACKED = [
    # (N, T, H, d, causal, dropout_p)
    (1, 4, 1, 3, True, 0.0),
    (2, 3, 3, 2, True, 0.0),
    (1, 5, 3, 2, False, 0.0),
    (1, 5, 3, 2, True, 0.3),
]
IDS = [
    f"N{n}T{t}H{h}d{d}{'_causal' if c else ''}{f'_p{p}' if p else ''}"
    for n, t, h, d, c, p in PACKED
]


def _inputs(n: int, t: int, h: int, d: int, p: float) -> list[np.ndarray]:
    rng = np.random.default_rng(300 + n + t + h + d)
    return [rng.standard_normal((n, t, 3 * h * d))] + ([offset(5)] if p else [])


def _packed(h: int, causal: bool, p: float):
    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        off = a[1] if p else None
        return [e(g.PackedQKVAttentionOp(a[0], h, off, causal, 0.4, p, 9))]

    return fwd


def _layout(t: int, h: int, d: int, causal: bool, p: float):
    """The unfused layout around the fused attention op (what CausalSelfAttention emits)."""

    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        n = a[0].type.get_shape()[0]  # type: ignore[attr-defined]
        heads = [
            e(g.TransposeOp(e(g.ReshapeOp(part, [n, t, h, d])), [0, 2, 1, 3]))
            for part in e.all(g.SplitOp(a[0], 2, [h * d] * 3))
        ]
        off = a[1] if p else None
        o = e(g.ScaledDotProductAttentionOp(*heads, off, causal, 0.4, p, 9))
        return [e(g.ReshapeOp(e(g.TransposeOp(o, [0, 2, 1, 3])), [n, t, h * d]))]

    return fwd


@pytest.mark.parametrize("n,t,h,d,causal,p", PACKED, ids=IDS)
def test_packed_attention_vjp_matches_finite_differences(n, t, h, d, causal, p) -> None:
    gradcheck(Case(_inputs(n, t, h, d, p), _packed(h, causal, p), [0]))


@pytest.mark.parametrize("n,t,h,d,causal,p", PACKED, ids=IDS)
def test_packed_attention_is_the_layout_it_folds(n, t, h, d, causal, p) -> None:
    """The reference of the packed op equals split -> heads -> attention -> merge, computed
    here with NumPy's own split and transposes (not the packed reference's helpers)."""
    ins = _inputs(n, t, h, d, p)
    qkv = ins[0]
    kw = {"scale": 0.4, "causal": causal, "dropout_p": p, "seed": 9}
    q, k, v = (x.reshape(n, t, h, d).transpose(0, 2, 1, 3) for x in np.split(qkv, 3, axis=-1))
    o, lse = REFERENCE[g.ScaledDotProductAttentionOp](q, k, v, *ins[1:], **kw)
    out, got_lse = REFERENCE[g.PackedQKVAttentionOp](*ins, num_heads=h, **kw)
    np.testing.assert_allclose(out, o.transpose(0, 2, 1, 3).reshape(n, t, h * d), rtol=1e-13)
    np.testing.assert_allclose(got_lse, lse, rtol=1e-13)


@pytest.mark.parametrize("n,t,h,d,causal,p", PACKED, ids=IDS)
def test_packed_attention_formed_by_aicfc_fuse(n, t, h, d, causal, p) -> None:
    """The layout folded by aicfc-fuse before the expansion (the pipeline's order): one
    packed gradient op, no split, transpose or concat left, gradients still right."""
    case = Case(_inputs(n, t, h, d, p), _layout(t, h, d, causal, p), [0])
    module = build(case, np.random.default_rng(0))
    AicfcFusePass().apply(Context(), module)
    module.verify()
    kinds = {type(op) for op in module.walk()}
    assert g.PackedQKVAttentionOp in kinds, kinds
    assert not kinds & {g.SplitOp, g.TransposeOp, g.ScaledDotProductAttentionOp}, kinds
    fn = expand(module)
    kinds = {type(op) for op in fn.walk()}
    assert ad.PackedQKVAttentionGradOp in kinds, kinds
    assert not kinds & {g.ConcatOp, g.TransposeOp, ad.ScaledDotProductAttentionGradOp}, kinds
    compare_with_differences(case, fn)
