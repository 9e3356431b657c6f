"""The transformer ops' VJP rules against float64 central finite differences.

The harness is test_gradcheck.py's (loss = sum_k sum(out_k * R_k) with fixed random R_k,
or the op's own scalar loss; aicfc-expand-backward, then the interpreter on the NumPy
reference; ||grad - fd|| <= 1e-6 ||fd|| + 1e-8 with step 1e-6). Inputs are fresh draws
of a seeded generator (never zeros). Covered: embedding with repeated ids, layer norm
with and without its affine parameters, the fused add + layer norm, batched products
with broadcast batch dims (and the Linear on [B, T, D], plain and as a gemm_epilogue),
attention causal and not, with and without dropout, unfused (the chain of plain ops)
and fused (graph.scaled_dot_product_attention, built directly and formed by aicfc-fuse),
a pre-LN attention block (layer norm, qkv Linear, split, heads, attention, residual),
split, concat, causal_mask, scale, cross-entropy over [B, T, V] and the second-order
rules of embedding_grad and the rank-3 cross_entropy_grad.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.ir import SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.graph import Activation
from aicfc.passes.aicfc_fuse import AicfcFusePass
from gradcheck_support import (
    Case,
    Emit,
    build,
    compare_with_differences,
    expand,
    gradcheck,
    normal,
    offset,
)

R = np.random.default_rng(2024)


def ids(*shape: int, high: int, repeat: bool = True) -> np.ndarray:
    """Integer ids in [0, high) with at least one id repeated (when asked)."""
    out = R.integers(0, high, size=shape).astype(np.int32)
    if repeat and out.size > 1:
        out.reshape(-1)[-1] = out.reshape(-1)[0]
    return out


# ----------------------------------------------------------------------------
# embedding, layer norm, scale, masks, split / concat, cross-entropy
# ----------------------------------------------------------------------------


def _layer_norm(weight: bool, bias: bool) -> Case:
    ins = [normal(R, 2, 3, 5)]
    ins += [normal(R, 5)] if weight else []
    ins += [normal(R, 5)] if bias else []

    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        w = a[1] if weight else None
        b = a[2] if bias else None
        return [e(g.LayerNormOp(a[0], w, b, eps=1e-5))]

    return Case(ins, fwd, list(range(len(ins))))


def _add_layer_norm(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
    s, y, _, _ = e.all(g.AddLayerNormOp(a[0], a[1], a[2], a[3], eps=1e-5))
    return [s, y]  # both the residual sum and the normalised value reach the loss


CASES: dict[str, Case] = {
    "embedding_repeated_ids": Case(
        [ids(2, 5, high=4), normal(R, 4, 3)],
        lambda e, a: [e(g.EmbeddingOp(a[0], a[1]))],
        [1],
    ),
    "embedding_every_row_used_twice": Case(
        [np.array([[0, 1, 2], [2, 1, 0]], dtype=np.int32), normal(R, 3, 2)],
        lambda e, a: [e(g.EmbeddingOp(a[0], a[1]))],
        [1],
    ),
    "layer_norm_affine": _layer_norm(True, True),
    "layer_norm_weight_only": _layer_norm(True, False),
    "layer_norm_plain": _layer_norm(False, False),
    "add_layer_norm": Case(
        [normal(R, 2, 3, 4), normal(R, 2, 3, 4), normal(R, 4), normal(R, 4)],
        _add_layer_norm,
        [0, 1, 2, 3],
    ),
    "add_layer_norm_plain_y_only": Case(
        [normal(R, 3, 4), normal(R, 3, 4)],
        lambda e, a: [e.all(g.AddLayerNormOp(a[0], a[1], eps=1e-5))[1]],
        [0, 1],
    ),
    "scale": Case([normal(R, 2, 3, 4)], lambda e, a: [e(g.ScaleOp(a[0], -0.375))], [0]),
    "causal_mask_square": Case(
        [normal(R, 2, 4, 4)], lambda e, a: [e(g.CausalMaskOp(a[0], 0.0))], [0]
    ),
    "causal_mask_then_softmax": Case(
        [normal(R, 1, 2, 3, 5)],
        lambda e, a: [e(g.SoftmaxOp(e(g.CausalMaskOp(a[0])), -1))],
        [0],
    ),
    "split_all_used": Case(
        [normal(R, 2, 3, 9)],
        lambda e, a: list(e.all(g.SplitOp(a[0], 2, [3, 2, 4]))),
        [0],
    ),
    "split_one_unused": Case(
        [normal(R, 2, 6)],
        lambda e, a: [e.all(g.SplitOp(a[0], -1, [2, 4]))[1]],
        [0],
    ),
    "concat": Case(
        [normal(R, 2, 3), normal(R, 4, 3), normal(R, 1, 3)],
        lambda e, a: [e(g.ConcatOp([a[0], a[1], a[2]], 0))],
        [0, 1, 2],
    ),
    "softmax_rank4_last_axis": Case(
        [normal(R, 1, 2, 3, 4)], lambda e, a: [e(g.SoftmaxOp(a[0], -1))], [0]
    ),
    "heads_split_and_merge": Case(
        [normal(R, 2, 3, 4)],
        lambda e, a: [
            e(
                g.ReshapeOp(
                    e(g.TransposeOp(e(g.ReshapeOp(a[0], [2, 3, 2, 2])), [0, 2, 1, 3])), [2, 12]
                )
            )
        ],
        [0],
    ),
    "cross_entropy_btv": Case(
        [normal(R, 2, 3, 5), ids(2, 3, high=5)],
        lambda e, a: [e(g.CrossEntropyOp(a[0], a[1]))],
        [0],
        scalar_loss=True,
    ),
    "embedding_grad_second_order": Case(
        [normal(R, 2, 3, 4), ids(2, 3, high=5)],
        lambda e, a: [e(ad.EmbeddingGradOp(a[0], a[1], 5))],
        [0],
    ),
    "cross_entropy_grad_btv_second_order": Case(
        [normal(R, 2, 3, 4), ids(2, 3, high=4), np.asarray(0.7)],
        lambda e, a: [e(ad.CrossEntropyGradOp(a[0], a[1], a[2]))],
        [0, 2],
    ),
    "epilogue_grad_relu_rank3": Case(
        [normal(R, 2, 3, 4), R.choice([-1.0, 1.0], (2, 3, 4)) * R.uniform(0.1, 1, (2, 3, 4))],
        lambda e, a: list(e.all(ad.EpilogueGradOp(a[0], a[1], Activation.RELU))),
        [0],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transformer_op(name: str) -> None:
    gradcheck(CASES[name])


# ----------------------------------------------------------------------------
# batched products
# ----------------------------------------------------------------------------

# (lhs shape, rhs shape) before the transposes: batch dims broadcast as torch.matmul
BATCH_SHAPES = [
    ((2, 3, 4), (4, 5)),  # a Linear on [B, T, D]: the weight's gradient from folded rows
    ((3, 4), (2, 4, 5)),  # a matrix lhs under a batched rhs
    ((2, 1, 3, 4), (3, 4, 5)),  # batch dims [2, 1] and [3] broadcast to [2, 3]
    ((1, 2, 3, 4), (1, 2, 4, 5)),  # equal batch dims (attention's q k^T shape)
]


def _batched(lhs: tuple[int, ...], rhs: tuple[int, ...], ta: bool, tb: bool) -> Case:
    def t(s: tuple[int, ...], flag: bool) -> tuple[int, ...]:
        return (*s[:-2], s[-1], s[-2]) if flag else s

    a, b = normal(R, *t(lhs, ta)), normal(R, *t(rhs, tb))
    return Case([a, b], lambda e, x: [e(g.MatmulOp(x[0], x[1], ta, tb))], [0, 1])


@pytest.mark.parametrize(
    "lhs,rhs,ta,tb",
    [
        (a, b, ta, tb)
        for a, b in BATCH_SHAPES
        for ta, tb in itertools.product([False, True], repeat=2)
    ],
)
def test_batched_matmul(lhs: tuple[int, ...], rhs: tuple[int, ...], ta: bool, tb: bool) -> None:
    gradcheck(_batched(lhs, rhs, ta, tb))


@pytest.mark.parametrize("act", ["none", "gelu", "relu"])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_epilogue_on_btd(act: str, tb: bool) -> None:
    """A fused Linear on [B, T, D] (leading dims folded), with bias and activation."""
    rng = np.random.default_rng(31)
    x = rng.standard_normal((2, 3, 4))
    w = rng.standard_normal((5, 4) if tb else (4, 5))
    bias = rng.standard_normal(5)
    if act == "relu":  # keep Z away from the kink
        z = np.matmul(x, w.T if tb else w) + bias
        bias = bias + np.where(np.abs(z) < 0.05, 0.2, 0.0).max(axis=(0, 1))

    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        op = g.GemmEpilogueOp(a[0], a[1], a[2], Activation(act), transpose_b=tb)
        return [e(op)]

    gradcheck(Case([x, w, bias], fwd, [0, 1, 2]))


# ----------------------------------------------------------------------------
# attention: unfused chain, fused op, fused by aicfc-fuse
# ----------------------------------------------------------------------------

ATTENTION = [
    # (B, H, T, S, d, causal, dropout_p)
    (1, 2, 4, 4, 3, True, 0.0),
    (1, 2, 4, 4, 3, False, 0.0),
    (2, 1, 3, 5, 2, False, 0.0),
    (1, 2, 5, 5, 2, True, 0.3),
    (1, 1, 4, 3, 3, False, 0.25),
]
ATTENTION_IDS = [
    f"B{b}H{h}T{t}S{s}d{d}{'_causal' if c else ''}{f'_p{p}' if p else ''}"
    for b, h, t, s, d, c, p in ATTENTION
]


def _attention_inputs(b: int, h: int, t: int, s: int, d: int, p: float) -> list[np.ndarray]:
    rng = np.random.default_rng(100 + t + s + d)
    ins = [rng.standard_normal((b, h, t, d)), rng.standard_normal((b, h, s, d))]
    ins.append(rng.standard_normal((b, h, s, d)))
    return ins + ([offset(5)] if p else [])


def _chain(causal: bool, p: float, d: int):
    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        s = e(g.ScaleOp(e(g.MatmulOp(a[0], a[1], transpose_b=True)), 1.0 / math.sqrt(d)))
        if causal:
            s = e(g.CausalMaskOp(s))
        prob = e(g.SoftmaxOp(s, -1))
        if p:
            prob = e(g.DropoutOp(prob, a[3], p, 9))
        return [e(g.MatmulOp(prob, a[2]))]

    return fwd


def _fused(causal: bool, p: float):
    def fwd(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
        off = a[3] if p else None
        return [e(g.ScaledDotProductAttentionOp(a[0], a[1], a[2], off, causal, None, p, 9))]

    return fwd


@pytest.mark.parametrize("b,h,t,s,d,causal,p", ATTENTION, ids=ATTENTION_IDS)
def test_attention_unfused(b, h, t, s, d, causal, p) -> None:
    gradcheck(Case(_attention_inputs(b, h, t, s, d, p), _chain(causal, p, d), [0, 1, 2]))


@pytest.mark.parametrize("b,h,t,s,d,causal,p", ATTENTION, ids=ATTENTION_IDS)
def test_attention_fused_op(b, h, t, s, d, causal, p) -> None:
    gradcheck(Case(_attention_inputs(b, h, t, s, d, p), _fused(causal, p), [0, 1, 2]))


@pytest.mark.parametrize("b,h,t,s,d,causal,p", ATTENTION, ids=ATTENTION_IDS)
def test_attention_fused_and_unfused_references_agree(b, h, t, s, d, causal, p) -> None:
    """The fused op's forward is the chain's, bit for bit (one reference composes the other)."""
    from aicfc.runtime.reference import REFERENCE

    ins = _attention_inputs(b, h, t, s, d, p)
    q, k, v = ins[:3]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    if causal:
        scores = np.where(np.tril(np.ones((t, s), bool)), scores, -np.inf)
    prob = np.exp(scores - scores.max(-1, keepdims=True))
    lse = np.log(np.exp(scores - scores.max(-1, keepdims=True)).sum(-1)) + scores.max(-1)
    prob = prob / prob.sum(-1, keepdims=True)
    if p:
        prob = REFERENCE[g.DropoutOp](prob, ins[3], p=p, seed=9)[0]
    fn = REFERENCE[g.ScaledDotProductAttentionOp]
    params = {"scale": 1.0 / math.sqrt(d), "causal": causal, "dropout_p": p, "seed": 9}
    out, got_lse = fn(*ins, **params)
    np.testing.assert_allclose(out, np.matmul(prob, v), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_lse, lse, rtol=1e-12)


@pytest.mark.parametrize("b,h,t,s,d,causal,p", ATTENTION, ids=ATTENTION_IDS)
def test_attention_fused_by_aicfc_fuse(b, h, t, s, d, causal, p) -> None:
    """The chain fused by aicfc-fuse before the expansion (the pipeline's order): the
    backward is the fused op's, and its gradients still match finite differences."""
    case = Case(_attention_inputs(b, h, t, s, d, p), _chain(causal, p, d), [0, 1, 2])
    module = build(case, np.random.default_rng(0))
    AicfcFusePass().apply(Context(), module)
    module.verify()
    kinds = {type(op) for op in module.walk()}
    assert g.ScaledDotProductAttentionOp in kinds and g.SoftmaxOp not in kinds, kinds
    fn = expand(module)
    assert any(isinstance(op, ad.ScaledDotProductAttentionGradOp) for op in fn.walk())
    compare_with_differences(case, fn)


def _block(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
    """A pre-LN block's attention half on [B, T, D] = [1, 3, 4], 2 heads: x + attn(ln(x))."""
    y = e(g.LayerNormOp(a[0], a[1], a[2]))
    qkv = e(g.BiasAddOp(e(g.MatmulOp(y, a[3], transpose_b=True)), a[4]))
    heads = []
    for part in e.all(g.SplitOp(qkv, 2, [4, 4, 4])):
        heads.append(e(g.TransposeOp(e(g.ReshapeOp(part, [1, 3, 2, 2])), [0, 2, 1, 3])))
    o = e(g.ScaledDotProductAttentionOp(heads[0], heads[1], heads[2], causal=True))
    merged = e(g.ReshapeOp(e(g.TransposeOp(o, [0, 2, 1, 3])), [1, 3, 4]))
    return [e(g.AddOp(a[0], merged))]


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused_by_aicfc_fuse"])
def test_attention_block(fuse: bool) -> None:
    """ln -> qkv Linear -> split -> heads -> attention -> merge -> residual, every parameter."""
    rng = np.random.default_rng(41)
    ins = [rng.standard_normal((1, 3, 4)), 1 + 0.1 * rng.standard_normal(4)]
    ins += [rng.standard_normal(4), rng.standard_normal((12, 4)), rng.standard_normal(12)]
    gradcheck(Case(ins, _block, [0, 1, 2, 3, 4]), fuse=fuse)


def test_gradient_through_lse_is_refused() -> None:
    """The lse result is saved for the backward only: a loss that reads it is refused
    with the reason, before any IR changes."""
    from aicfc.dialects.diagnostics import OpError

    ins = _attention_inputs(1, 1, 3, 3, 2, 0.0)
    case = Case(ins, lambda e, a: [e.all(g.ScaledDotProductAttentionOp(*a))[1]], [0])
    with pytest.raises(OpError, match="lse result is the row log-sum-exp saved"):
        expand(build(case, np.random.default_rng(0)))


def test_gradient_through_layer_norm_statistics_is_refused() -> None:
    from aicfc.dialects.diagnostics import OpError

    case = Case([normal(R, 3, 4)], lambda e, a: [e.all(g.LayerNormOp(a[0]))[2]], [0])
    with pytest.raises(OpError, match="mean and rstd results are statistics saved"):
        expand(build(case, np.random.default_rng(0)))
