"""Random decoder-only transformer train steps (graph IR text) for the differential tests.

A step is a small GPT in the unfused form a model emits: token and position embeddings
(`graph.embedding` of the ids and of a constant arange), `blocks` pre-LN blocks (x +
attn(ln_1(x)), x + mlp(ln_2(x))) whose attention is a fused qkv Linear, a split, heads
by reshape/transpose, q k^T, scale, causal mask (or none), softmax, dropout on the
probabilities (or none), P v, the heads merged and the output projection; an MLP of
Linear, GELU, Linear; a final layer norm; a language-model head tied to the token
embedding; cross-entropy over [B, T, V]; one autodiff.backward with respect to every
param; SGD updates p - 0.1 g (graph ops); the Philox offset advanced when there is
dropout. Drawn: B, T, the
heads and the head size, V, the number of blocks, causal or not, dropout or not, and
whether the layer norms have their affine parameters (and biases).

Ops are built with their constructors (result types inferred, the function verified)
and printed, so the text is what a model's builder would produce.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    ModuleOp,
    TensorType,
    f32,
    f64,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.roles import make_attrs
from aicfc.ir import print_module


@dataclass(frozen=True)
class Config:
    """The drawn shape of one step."""

    batch: int
    block_size: int
    heads: int
    head_size: int
    vocab: int
    blocks: int
    causal: bool
    dropout: float
    affine: bool
    bias: bool
    dtype: str = "f64"

    @property
    def d_model(self) -> int:
        return self.heads * self.head_size


def random_config(rng: random.Random, dtype: str = "f64") -> Config:
    return Config(
        batch=rng.choice([1, 2]),
        block_size=rng.choice([1, 3, 4]),
        heads=rng.choice([1, 2]),
        head_size=rng.choice([1, 2, 3]),
        vocab=rng.choice([3, 5]),
        blocks=rng.choice([1, 2]),
        causal=rng.random() < 0.7,
        dropout=rng.choice([0.0, 0.0, 0.25]),
        affine=rng.random() < 0.8,
        bias=rng.random() < 0.7,
        dtype=dtype,
    )


def _params(c: Config) -> list[tuple[str, tuple[int, ...]]]:
    d = c.d_model
    out = [("transformer.wte.weight", (c.vocab, d)), ("transformer.wpe.weight", (c.block_size, d))]

    def ln(prefix: str) -> None:
        if c.affine:
            out.append((f"{prefix}.weight", (d,)))
            if c.bias:
                out.append((f"{prefix}.bias", (d,)))

    def linear(prefix: str, n_out: int, n_in: int) -> None:
        out.append((f"{prefix}.weight", (n_out, n_in)))
        if c.bias:
            out.append((f"{prefix}.bias", (n_out,)))

    for i in range(c.blocks):
        h = f"transformer.h.{i}"
        ln(f"{h}.ln_1")
        linear(f"{h}.attn.c_attn", 3 * d, d)
        linear(f"{h}.attn.c_proj", d, d)
        ln(f"{h}.ln_2")
        linear(f"{h}.mlp.c_fc", 4 * d, d)
        linear(f"{h}.mlp.c_proj", d, 4 * d)
    ln("transformer.ln_f")
    return out


def transformer_step(c: Config) -> str:
    """The func.func @train_step of `c` as text (inputs "x", "y"; loss output "loss")."""
    el: Attribute = f64 if c.dtype == "f64" else f32
    b, t, d = c.batch, c.block_size, c.d_model
    params = _params(c)
    args: list[tuple[str, str, TensorType[Attribute]]] = [
        ("input", "x", TensorType(i32, [b, t])),
        ("input", "y", TensorType(i32, [b, t])),
        *(("param", n, TensorType(el, list(s))) for n, s in params),
    ]
    if c.dropout:
        args.append(("state", "rng.offset", TensorType(i64, [])))
    block = Block(arg_types=[a[2] for a in args])
    for value, (_, name, _) in zip(block.args, args, strict=True):
        value.name_hint = name.replace(".", "_")
    val = {name: value for (_, name, _), value in zip(args, block.args, strict=True)}
    bld = Builder(InsertPoint.at_end(block))

    def e(op: g.GraphOp | ad.AicfcOp) -> SSAValue:  # type: ignore[name-defined]
        return bld.insert(op).results[0]

    seeds = iter(range(1, 1000))

    def dropout(x: SSAValue) -> SSAValue:
        return e(g.DropoutOp(x, val["rng.offset"], c.dropout, next(seeds))) if c.dropout else x

    def linear(x: SSAValue, prefix: str) -> SSAValue:
        y = e(g.MatmulOp(x, val[f"{prefix}.weight"], transpose_b=True))
        return e(g.BiasAddOp(y, val[f"{prefix}.bias"])) if c.bias else y

    def ln(x: SSAValue, prefix: str) -> SSAValue:
        return e(g.LayerNormOp(x, val.get(f"{prefix}.weight"), val.get(f"{prefix}.bias")))

    def heads(x: SSAValue) -> SSAValue:
        split = e(g.ReshapeOp(x, [b, t, c.heads, c.head_size]))
        return e(g.TransposeOp(split, [0, 2, 1, 3]))

    def attention(x: SSAValue, prefix: str) -> SSAValue:
        qkv = linear(x, f"{prefix}.c_attn")
        q, k, vv = (heads(p) for p in bld.insert(g.SplitOp(qkv, 2, [d, d, d])).results)
        s = e(g.ScaleOp(e(g.MatmulOp(q, k, transpose_b=True)), 1.0 / math.sqrt(c.head_size)))
        if c.causal:
            s = e(g.CausalMaskOp(s))
        p = dropout(e(g.SoftmaxOp(s, -1)))
        o = e(g.TransposeOp(e(g.MatmulOp(p, vv)), [0, 2, 1, 3]))
        return dropout(linear(e(g.ReshapeOp(o, [b, t, d])), f"{prefix}.c_proj"))

    def mlp(x: SSAValue, prefix: str) -> SSAValue:
        h = e(g.GeluOp(linear(x, f"{prefix}.c_fc")))
        return dropout(linear(h, f"{prefix}.c_proj"))

    tok = e(g.EmbeddingOp(val["x"], val["transformer.wte.weight"]))
    positions = DenseIntOrFPElementsAttr.from_list(TensorType(i32, [t]), list(range(t)))
    pos = e(g.EmbeddingOp(e(g.ConstantOp(positions)), val["transformer.wpe.weight"]))
    h = dropout(e(g.AddOp(tok, e(g.BroadcastToOp(pos, [b, t, d])))))
    for i in range(c.blocks):
        p = f"transformer.h.{i}"
        h = e(g.AddOp(h, attention(ln(h, f"{p}.ln_1"), f"{p}.attn")))
        h = e(g.AddOp(h, mlp(ln(h, f"{p}.ln_2"), f"{p}.mlp")))
    wte = val["transformer.wte.weight"]
    logits = e(g.MatmulOp(ln(h, "transformer.ln_f"), wte, transpose_b=True))
    loss = e(g.CrossEntropyOp(logits, val["y"]))
    wrt = [val[n] for n, _ in params]
    grads = bld.insert(ad.BackwardOp(loss, wrt)).results
    results: list[tuple[str, SSAValue]] = [("loss", loss), ("logits", logits)]
    for (name, _), p, gr in zip(params, wrt, grads, strict=True):
        # plain SGD in graph ops (p - lr g), so the step does not depend on the optimizer ops
        results.append((name, e(g.SubOp(p, e(g.ScaleOp(gr, 0.1))))))
    if c.dropout:
        one = e(g.ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(i64, []), [1])))
        results.append(("rng.offset", e(g.AddOp(val["rng.offset"], one))))
    bld.insert(func.ReturnOp(*(r for _, r in results)))
    fn = func.FuncOp(
        "train_step",
        ([a[2] for a in args], [r.type for _, r in results]),
        Region(block),
        arg_attrs=ArrayAttr([make_attrs(role, name) for role, name, _ in args]),
        res_attrs=ArrayAttr([make_attrs(name=n) for n, _ in results]),
    )
    module = ModuleOp([fn])
    module.verify()
    return print_module(module)


def random_inputs(c: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ids and targets in [0, V), params of a GPT's scale (N(0, 0.3), layer norm weights
    near 1), the offset in [0, 100): values by name."""
    dt = np.float64 if c.dtype == "f64" else np.float32
    out: dict[str, np.ndarray] = {
        "x": rng.integers(0, c.vocab, (c.batch, c.block_size)).astype(np.int32),
        "y": rng.integers(0, c.vocab, (c.batch, c.block_size)).astype(np.int32),
    }
    for name, shape in _params(c):
        base = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        out[name] = (base + 0.3 * rng.standard_normal(shape)).astype(dt)
    if c.dropout:
        out["rng.offset"] = np.asarray(rng.integers(0, 100), np.int64)
    return out


Step = Callable[[Config], str]
