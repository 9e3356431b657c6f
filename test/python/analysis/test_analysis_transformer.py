"""The static operator report on a GPT train step (the transformer ops of issue 11).

The step is test/python/regressions/transformer_steps.py's (a model's unfused emission),
analysed as written and after aicfc-fuse. Expected figures are computed here from the
config: the parameter total is the sum of the distinct params' sizes (the head tied to
the token embedding counts once), attention's FLOPs are 4 B H T^2 d for its two
products plus 5 per score (scale, mask, softmax, dropout: dialects/graph/attention.py's
stated count), and the properties are the ones the issue names (embedding: a gather;
softmax and layer norm: nonlinear).
"""

from __future__ import annotations

import math

import pytest

from aicfc.execute import run_pipeline
from aicfc.ir import parse_module
from aicfc.passes.analysis import analyze_module
from regressions.transformer_steps import Config, _params, transformer_step

CONFIG = Config(
    batch=2,
    block_size=4,
    heads=2,
    head_size=3,
    vocab=5,
    blocks=2,
    causal=True,
    dropout=0.0,
    affine=True,
    bias=True,
    dtype="f32",
)


def report(fused: bool):
    module = parse_module(transformer_step(CONFIG))
    if fused:
        module = run_pipeline(module, "aicfc-fuse")
    return analyze_module(module, "train_step").function("train_step")


@pytest.mark.parametrize("fused", [False, True])
def test_total_parameters_count_the_tied_head_once(fused: bool) -> None:
    expected = sum(math.prod(shape) for _, shape in _params(CONFIG))
    assert report(fused).total_params == expected


def test_fused_attention_flops_and_properties() -> None:
    nodes = [n for n in report(True).nodes if not n.gradient]
    # the attention chain fused, then its heads' layout folded in (packed_qkv_attention)
    attention = [n for n in nodes if n.kind == "PackedQKVAttention"]
    assert len(attention) == CONFIG.blocks
    b, h, t, d = CONFIG.batch, CONFIG.heads, CONFIG.block_size, CONFIG.head_size
    for node in attention:
        assert node.flops == 4 * b * h * t * t * d + 5 * b * h * t * t
        assert node.param_count == 0
        assert "nonlinear" in node.properties and "stochastic" not in node.properties
    add_ln = [n for n in nodes if n.kind == "AddLayerNorm"]
    # every layer norm reads an add whose sum the residual stream reads too: ln_1 (the
    # embedding sum, then the previous block's output), ln_2 and ln_f
    assert len(add_ln) == 2 * CONFIG.blocks + 1
    assert all("nonlinear" in n.properties and "trainable" in n.properties for n in add_ln)


def test_unfused_properties_gather_and_nonlinear() -> None:
    nodes = [n for n in report(False).nodes if not n.gradient]
    kinds = {n.kind: n for n in nodes}
    embedding = [n for n in nodes if n.kind == "Embedding"]
    assert len(embedding) == 2  # token and position tables
    for node in embedding:
        assert "gather" in node.properties and "trainable" in node.properties
        assert node.flops == 0
    wte = embedding[0]
    assert wte.param_count == CONFIG.vocab * CONFIG.d_model
    for kind in ("Softmax", "LayerNorm"):
        assert "nonlinear" in kinds[kind].properties, kind
    assert "gather" not in kinds["Softmax"].properties
