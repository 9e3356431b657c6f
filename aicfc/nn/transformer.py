"""The layers of a decoder-only transformer, as IR builders (torch.nn's and nanoGPT's names).

    Embedding(V, D)                      ids [..] i32 -> [.., D]          graph.embedding
    LayerNorm(D)                         [.., D] -> [.., D]               graph.layer_norm
    CausalSelfAttention(D, H, T_max)     [N, T, D] -> [N, T, D]           (chain below)
    MLP(D)                               [.., D] -> [.., D]               c_fc, GELU, c_proj
    TransformerBlock(D, H, T_max)        [N, T, D] -> [N, T, D]           pre-LN residual block

CausalSelfAttention emits the unfused chain of nanoGPT's `CausalSelfAttention.forward`
(Karpathy, nanoGPT model.py), which `aicfc-fuse` turns into one
`graph.scaled_dot_product_attention`:

    c_attn (Linear D -> 3D) -> graph.split (q, k, v) -> reshape [N, T, H, d] ->
    transpose [0, 2, 1, 3] -> matmul(q, k, transpose_b) -> scale 1/sqrt(d) ->
    causal_mask -> softmax(axis=-1) -> dropout -> matmul(., v) -> transpose -> reshape ->
    c_proj (Linear D -> D) -> dropout

Parameter names map 1:1 to nanoGPT's (`attn.c_attn.weight`, `mlp.c_fc.bias`, `ln_1.weight`),
so a nanoGPT state dict loads by name. Each layer's own initialisation is torch's
default (Embedding N(0, 1), LayerNorm ones and zeros, Linear U(+-1/sqrt(in))); the GPT
(aicfc.models.gpt) re-initialises them as nanoGPT does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from aicfc.dialects import graph
from aicfc.dialects.tensors import shape_of
from aicfc.nn.modules import (
    GELU,
    Dropout,
    EmitContext,
    InputSpec,
    Linear,
    Module,
    Parameter,
    ShapeError,
    default_rng,
)

IDS_DTYPE = np.dtype(np.int32)
"""Token ids are i32 in the IR (as cross-entropy labels: aicfc.builder.LABEL_DTYPE)."""


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _positive(where: str, **values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v <= 0:
            raise ValueError(f"{where}: {name} must be a positive integer, got {v!r}")


class Embedding(Module):
    """out[..., :] = weight[ids[...], :] with weight [num_embeddings, embedding_dim]
    (torch.nn.Embedding, torch.nn.functional.embedding).

    Input: integer ids of any shape, each in [0, num_embeddings) (a Program checks host
    inputs and says which range); output: float [*ids.shape, embedding_dim]. Initialised
    N(0, 1) as torch.nn.Embedding.reset_parameters. Emits `graph.embedding %ids, %weight`;
    its gradient is a deterministic scatter-add into the rows (autodiff.embedding_grad).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        _positive("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        rng = rng if rng is not None else default_rng()
        w = rng.standard_normal((self.num_embeddings, self.embedding_dim))
        self.weight = Parameter(w.astype(dtype))

    def input_spec(self) -> InputSpec:
        return InputSpec(dtype=IDS_DTYPE, high=self.num_embeddings)

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return (*shape, self.embedding_dim)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        return ctx.add(graph.EmbeddingOp(x, ctx.param(_join(prefix, "weight"))))

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim (torch.nn.LayerNorm).

    The variance is biased (divided by D), as torch.nn.functional.layer_norm. Input and
    output [..., D] with D = normalized_shape (an int, or a 1-tuple: only the last dim is
    normalised). weight [D] starts at ones and bias [D] at zeros; `elementwise_affine=False`
    drops both, `bias=False` only the bias (torch >= 2.1 and nanoGPT's LayerNorm).
    Emits `graph.layer_norm` (its mean and 1/std are results the backward reads).
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype: Any = np.float32,
    ):
        super().__init__()
        dims = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        if len(dims) != 1:
            raise ValueError(
                f"LayerNorm: only the last dim is normalised, got normalized_shape {dims!r} "
                "(give one int)"
            )
        _positive("LayerNorm", normalized_shape=dims[0])
        if not (math.isfinite(eps) and eps > 0):
            raise ValueError(f"LayerNorm: eps must be > 0 and finite, got {eps!r}")
        self.normalized_shape = (int(dims[0]),)
        self.eps = float(eps)
        self.elementwise_affine = elementwise_affine
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype))

    def input_features(self) -> int | None:
        return self.normalized_shape[0]

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        d = self.normalized_shape[0]
        if len(shape) < 1 or shape[-1] != d:
            raise ShapeError(f"{self!r} takes [..., {d}] inputs, got {list(shape)}")
        return tuple(shape)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        w = ctx.param(_join(prefix, "weight")) if self.weight is not None else None
        b = ctx.param(_join(prefix, "bias")) if self.bias is not None else None
        op = graph.LayerNormOp(x, w, b, eps=self.eps)
        ctx.builder.insert(op)
        return op.result

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps:g}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


def _sequence_shape(m: Module, shape: Sequence[int], d_model: int, block_size: int) -> None:
    """ShapeError unless shape is [N, T, d_model] with 1 <= T <= block_size."""
    if len(shape) != 3 or shape[-1] != d_model:
        raise ShapeError(f"{m!r} takes [N, T, {d_model}] inputs, got {list(shape)}")
    if not 1 <= shape[1] <= block_size:
        raise ShapeError(
            f"{type(m).__name__}: sequence length T={shape[1]} is outside [1, "
            f"block_size={block_size}] (input {list(shape)})"
        )


class CausalSelfAttention(Module):
    """Multi-head causal self-attention with a fused qkv projection (nanoGPT's
    CausalSelfAttention; torch.nn.functional.scaled_dot_product_attention(is_causal=True)).

    x [N, T, D] -> [N, T, D] with T <= block_size. c_attn (Linear D -> 3D) gives q, k, v
    (split in this order along the last dim), each viewed as n_heads heads of size
    d = D / n_heads; softmax(q k^T / sqrt(d) + causal mask) v per head, heads merged back,
    then c_proj (Linear D -> D). `dropout` is applied to the attention probabilities
    (`attn_dropout`) and to the output (`resid_dropout`), in the train step only.

    Raises ValueError at construction when d_model is not divisible by n_heads (both
    numbers in the message); output_shape raises ShapeError for T > block_size.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        block_size: int,
        dropout: float = 0.0,
        bias: bool = True,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        _positive("CausalSelfAttention", d_model=d_model, n_heads=n_heads, block_size=block_size)
        if d_model % n_heads:
            raise ValueError(
                f"CausalSelfAttention: d_model={d_model} is not divisible by n_heads={n_heads} "
                f"(each head takes d_model / n_heads = {d_model / n_heads:g} features)"
            )
        self.d_model, self.n_heads, self.block_size = int(d_model), int(n_heads), int(block_size)
        self.head_dim = self.d_model // self.n_heads
        rng = rng if rng is not None else default_rng()
        self.c_attn = Linear(d_model, 3 * d_model, bias=bias, rng=rng, dtype=dtype)
        self.c_proj = Linear(d_model, d_model, bias=bias, rng=rng, dtype=dtype)
        self.attn_dropout = Dropout(dropout, rng=rng)
        self.resid_dropout = Dropout(dropout, rng=rng)

    def input_features(self) -> int | None:
        return self.d_model

    def input_spec(self) -> InputSpec:
        return InputSpec(sample=(self.block_size, self.d_model))

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        _sequence_shape(self, shape, self.d_model, self.block_size)
        return tuple(shape)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        n, t, d = self.output_shape(shape_of(x.type))
        h, hd = self.n_heads, self.head_dim
        qkv = self.c_attn.emit(ctx, x, _join(prefix, "c_attn"))
        split = graph.SplitOp(qkv, axis=2, sizes=[d, d, d])
        ctx.builder.insert(split)
        q, k, v = (self._heads(ctx, r, (n, t, h, hd)) for r in split.results)
        att = ctx.add(graph.MatmulOp(q, k, transpose_b=True))  # [N, H, T, T]
        att = ctx.add(graph.ScaleOp(att, 1.0 / math.sqrt(hd)))
        att = ctx.add(graph.CausalMaskOp(att))
        att = ctx.add(graph.SoftmaxOp(att, axis=-1))
        att = self.attn_dropout.emit(ctx, att, _join(prefix, "attn_dropout"))
        y = ctx.add(graph.MatmulOp(att, v))  # [N, H, T, d]
        y = ctx.add(graph.TransposeOp(y, [0, 2, 1, 3]))
        y = ctx.add(graph.ReshapeOp(y, [n, t, d]))
        y = self.c_proj.emit(ctx, y, _join(prefix, "c_proj"))
        return self.resid_dropout.emit(ctx, y, _join(prefix, "resid_dropout"))

    @staticmethod
    def _heads(ctx: EmitContext, x: SSAValue, nthd: tuple[int, int, int, int]) -> SSAValue:
        """[N, T, D] -> [N, T, H, d] -> [N, H, T, d]."""
        x = ctx.add(graph.ReshapeOp(x, list(nthd)))
        return ctx.add(graph.TransposeOp(x, [0, 2, 1, 3]))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, block_size={self.block_size}"


class MLP(Module):
    """The transformer's feed-forward block: c_fc (Linear D -> hidden), GELU (exact erf
    form, as nanoGPT's nn.GELU()), c_proj (Linear hidden -> D), dropout (train step only).

    [..., D] -> [..., D]; hidden defaults to 4 D (Vaswani et al. 2017; nanoGPT).
    """

    def __init__(
        self,
        d_model: int,
        hidden: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        hidden = 4 * d_model if hidden is None else hidden
        _positive("MLP", d_model=d_model, hidden=hidden)
        rng = rng if rng is not None else default_rng()
        self.d_model = int(d_model)
        self.c_fc = Linear(d_model, hidden, bias=bias, rng=rng, dtype=dtype)
        self.gelu = GELU()
        self.c_proj = Linear(hidden, d_model, bias=bias, rng=rng, dtype=dtype)
        self.dropout = Dropout(dropout, rng=rng)

    def input_features(self) -> int | None:
        return self.d_model

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return self.c_proj.output_shape(self.c_fc.output_shape(shape))

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        for name in ("c_fc", "gelu", "c_proj", "dropout"):
            x = getattr(self, name).emit(ctx, x, _join(prefix, name))
        return x


class TransformerBlock(Module):
    """A pre-LN transformer block (GPT-2; nanoGPT's Block): x + attn(ln_1(x)), then
    x + mlp(ln_2(x)). [N, T, D] -> [N, T, D] with T <= block_size.

    The residual sums are `graph.add`; `aicfc-fuse` turns each sum feeding the next
    layer norm into `graph.add_layer_norm`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        block_size: int,
        dropout: float = 0.0,
        bias: bool = True,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        rng = rng if rng is not None else default_rng()
        self.ln_1 = LayerNorm(d_model, bias=bias, dtype=dtype)
        self.attn = CausalSelfAttention(d_model, n_heads, block_size, dropout, bias, rng, dtype)
        self.ln_2 = LayerNorm(d_model, bias=bias, dtype=dtype)
        self.mlp = MLP(d_model, dropout=dropout, bias=bias, rng=rng, dtype=dtype)

    def input_features(self) -> int | None:
        return self.attn.d_model

    def input_spec(self) -> InputSpec:
        return self.attn.input_spec()

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return self.attn.output_shape(shape)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        h = self.ln_1.emit(ctx, x, _join(prefix, "ln_1"))
        x = ctx.add(graph.AddOp(x, self.attn.emit(ctx, h, _join(prefix, "attn"))))
        h = self.ln_2.emit(ctx, x, _join(prefix, "ln_2"))
        return ctx.add(graph.AddOp(x, self.mlp.emit(ctx, h, _join(prefix, "mlp"))))


__all__ = [
    "MLP",
    "CausalSelfAttention",
    "Embedding",
    "LayerNorm",
    "TransformerBlock",
]
