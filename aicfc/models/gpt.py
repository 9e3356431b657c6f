"""GPT: a decoder-only transformer language model (GPT-2's architecture, nanoGPT's layout).

    x: token ids [N, T] (int32; T <= block_size)
      -> transformer.wte(x) + transformer.wpe(arange(T))     token + position embeddings
      -> transformer.drop                                    (train step only)
      -> transformer.h.0 ... h.{n_layer-1}                   pre-LN TransformerBlocks
      -> transformer.ln_f                                    final layer norm
      -> lm_head (x @ transformer.wte.weight^T)              logits [N, T, vocab_size]

The module tree and every parameter name equal nanoGPT's (Karpathy, nanoGPT model.py,
`GPT.__init__`): `transformer.wte.weight`, `transformer.wpe.weight`,
`transformer.h.0.ln_1.weight`, `transformer.h.0.attn.c_attn.weight`, ...,
`transformer.ln_f.bias`, and `lm_head.weight`, which is tied to `transformer.wte.weight`
(one parameter; `named_parameters()` lists it once, under its first name, and
`state_dict()` under both, as torch does). A nanoGPT checkpoint's state dict therefore
loads by name.

Initialisation is nanoGPT's (`GPT._init_weights` and the scaled residual projections,
after GPT-2): every Linear weight and Embedding N(0, 0.02), every bias 0, LayerNorm
weight 1 and bias 0, and the residual projections (`attn.c_proj.weight`,
`mlp.c_proj.weight`) N(0, 0.02 / sqrt(2 n_layer)). Values come from a NumPy Generator
(`rng`, or the library one that `aicfc.manual_seed` resets), so they are reproducible but
not bit-equal to torch's draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, i32
from xdsl.ir import SSAValue

from aicfc.dialects import graph
from aicfc.dialects.tensors import shape_of
from aicfc.nn.modules import (
    Dropout,
    EmitContext,
    InputSpec,
    Linear,
    Module,
    Parameter,
    Sequential,
    ShapeError,
    default_rng,
)
from aicfc.nn.transformer import IDS_DTYPE, Embedding, LayerNorm, TransformerBlock

if TYPE_CHECKING:
    from aicfc.program import Program

INIT_STD = 0.02
"""nanoGPT's (and GPT-2's) standard deviation of the initial weights."""


@dataclass(frozen=True)
class GPTConfig:
    """nanoGPT's GPTConfig fields: vocabulary, context length (block_size), layers, heads,
    embedding width (n_embd, divisible by n_head), dropout probability, and whether the
    Linear and LayerNorm layers have biases."""

    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True


class GPTTransformer(Module):
    """The `transformer` container of a GPT (nanoGPT's ModuleDict): wte, wpe, drop, h, ln_f."""

    def __init__(self, config: GPTConfig, rng: np.random.Generator, dtype: Any):
        super().__init__()
        c = config
        self.wte = Embedding(c.vocab_size, c.n_embd, rng=rng, dtype=dtype)
        self.wpe = Embedding(c.block_size, c.n_embd, rng=rng, dtype=dtype)
        self.drop = Dropout(c.dropout, rng=rng)
        self.h = Sequential(
            *(
                TransformerBlock(c.n_embd, c.n_head, c.block_size, c.dropout, c.bias, rng, dtype)
                for _ in range(c.n_layer)
            )
        )
        self.ln_f = LayerNorm(c.n_embd, bias=c.bias, dtype=dtype)


class GPT(Module):
    """A GPT language model: token ids [N, T] -> next-token logits [N, T, vocab_size].

    Train it with `aicfc.compile(model, loss="cross_entropy")` and `step(x, y)` where y
    [N, T] are the next tokens (x shifted by one); `predict(x)` gives the logits. The
    loss is the mean over all N*T positions (torch's F.cross_entropy of the flattened
    logits, as nanoGPT). Raises ValueError at construction for a non-positive size or an
    n_embd not divisible by n_head (the numbers named); `output_shape` (so compile and
    step) raises ShapeError for T > block_size.
    """

    def __init__(
        self,
        config: GPTConfig,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        rng = rng if rng is not None else default_rng()
        self.config = config
        self.transformer = GPTTransformer(config, rng, dtype)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False, rng=rng, dtype=dtype)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying (Press and Wolf 2017)
        self._init_weights(rng)

    def _init_weights(self, rng: np.random.Generator) -> None:
        """nanoGPT's initialisation (see the module docstring), each parameter drawn once."""
        resid_std = INIT_STD / math.sqrt(2 * self.config.n_layer)
        drawn: set[int] = set()  # the tied lm_head.weight is transformer.wte.weight
        for name, m in self.named_modules():
            if isinstance(m, Linear | Embedding) and id(m.weight) not in drawn:
                drawn.add(id(m.weight))
                std = resid_std if name.endswith("c_proj") else INIT_STD
                m.weight.data = _normal(rng, m.weight, std)
            if isinstance(m, Linear) and m.bias is not None:
                m.bias.data = np.zeros_like(m.bias.data)

    def input_spec(self) -> InputSpec:
        return InputSpec(
            dtype=IDS_DTYPE, high=self.config.vocab_size, sample=(self.config.block_size,)
        )

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        c = self.config
        if len(shape) != 2:
            raise ShapeError(f"GPT takes token ids [N, T], got {list(shape)}")
        if not 1 <= shape[1] <= c.block_size:
            raise ShapeError(
                f"GPT: sequence length T={shape[1]} is outside [1, block_size={c.block_size}] "
                f"(input {list(shape)})"
            )
        return (shape[0], shape[1], c.vocab_size)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        n, t, _ = self.output_shape(shape_of(x.type))
        tr = self.transformer
        p = f"{prefix}.transformer" if prefix else "transformer"
        tok = tr.wte.emit(ctx, x, f"{p}.wte")
        positions = TensorType(i32, [t])
        ids = ctx.add(graph.ConstantOp(DenseIntOrFPElementsAttr.from_list(positions, range(t))))
        pos = tr.wpe.emit(ctx, ids, f"{p}.wpe")  # [T, D], the same for every row
        pos = ctx.add(graph.BroadcastToOp(pos, [n, t, self.config.n_embd]))
        h = tr.drop.emit(ctx, ctx.add(graph.AddOp(tok, pos)), f"{p}.drop")
        h = tr.h.emit(ctx, h, f"{p}.h")
        h = tr.ln_f.emit(ctx, h, f"{p}.ln_f")
        return self.lm_head.emit(ctx, h, f"{prefix}.lm_head" if prefix else "lm_head")

    def num_parameters(self, non_embedding: bool = True) -> int:
        """Trainable parameters, the tied head counted once; without the position
        embeddings by default (nanoGPT's get_num_params)."""
        total = sum(p.data.size for p in self.parameters())
        return total - (self.transformer.wpe.weight.data.size if non_embedding else 0)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in vars(self.config).items())


def _normal(rng: np.random.Generator, p: Parameter, std: float) -> np.ndarray:
    return (rng.standard_normal(p.shape) * std).astype(p.dtype)


def generate(
    prog: Program,
    block_size: int,
    context: Sequence[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    rng: np.random.Generator | None = None,
) -> list[int]:
    """Sample `max_new_tokens` ids after `context` from a compiled GPT (nanoGPT's generate).

    Every step runs `prog.predict` on ONE input shape [1, block_size], so @predict compiles
    once: the context (its last block_size ids once it is longer) is padded on the right
    with id 0, and the logits are read at the context's last position. Causal attention
    makes that exact: position i sees only positions <= i, so the padding never changes
    them. The next id is drawn from softmax(logits / temperature), restricted to the
    `top_k` largest logits when given. Returns context + the new ids.
    """
    if not context:
        raise ValueError("generate: the context needs at least one id")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"generate: temperature must be > 0, got {temperature!r}")
    rng = rng if rng is not None else np.random.default_rng()
    ids = [int(i) for i in context]
    window = np.zeros((1, block_size), np.int32)
    for _ in range(max_new_tokens):
        recent = ids[-block_size:]
        window[0, : len(recent)] = recent
        window[0, len(recent) :] = 0
        logits = np.asarray(prog.predict(window), np.float64)[0, len(recent) - 1] / temperature
        if top_k is not None and top_k < logits.size:
            logits[logits < np.partition(logits, -top_k)[-top_k]] = -np.inf
        probs = np.exp(logits - logits.max())
        ids.append(int(rng.choice(probs.size, p=probs / probs.sum())))
    return ids


__all__ = ["GPT", "GPTConfig", "GPTTransformer", "generate"]
