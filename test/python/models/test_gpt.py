"""aicfc.models.gpt.GPT and the transformer layers of aicfc.nn: names, initialisation,
shape checks, the Program's integer inputs, and the IR a GPT emits.

The numerics of the whole train step against PyTorch are test_gpt_oracle.py's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import aicfc
from aicfc import nn
from aicfc.models.gpt import GPT, GPTConfig
from support import single_threaded_blas  # noqa: F401  (autouse: one BLAS thread)

SMALL = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)


def small_gpt(seed: int = 0, **changes: object) -> GPT:
    aicfc.manual_seed(seed)
    cfg = GPTConfig(**{**vars(SMALL), **changes})  # type: ignore[arg-type]
    return GPT(cfg)


def ids(shape: tuple[int, ...], high: int = SMALL.vocab_size, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int64)


# --- names and initialisation ------------------------------------------------------


def test_parameter_names_are_nanogpts():
    names = [n for n, _ in small_gpt().named_parameters()]
    block = [
        "ln_1.weight",
        "ln_1.bias",
        "attn.c_attn.weight",
        "attn.c_attn.bias",
        "attn.c_proj.weight",
        "attn.c_proj.bias",
        "ln_2.weight",
        "ln_2.bias",
        "mlp.c_fc.weight",
        "mlp.c_fc.bias",
        "mlp.c_proj.weight",
        "mlp.c_proj.bias",
    ]
    assert names == [
        "transformer.wte.weight",
        "transformer.wpe.weight",
        *(f"transformer.h.{i}.{n}" for i in range(2) for n in block),
        "transformer.ln_f.weight",
        "transformer.ln_f.bias",
    ]


def test_the_head_is_tied_to_the_token_embedding():
    model = small_gpt()
    assert model.lm_head.weight is model.transformer.wte.weight
    assert nn.parameter_aliases(model) == {"lm_head.weight": "transformer.wte.weight"}
    sd = model.state_dict()  # torch's state_dict keeps both names of a tied tensor
    np.testing.assert_array_equal(sd["lm_head.weight"], sd["transformer.wte.weight"])


def test_bias_false_drops_every_linear_and_layer_norm_bias():
    names = [n for n, _ in small_gpt(bias=False).named_parameters()]
    assert not [n for n in names if n.endswith(".bias")]
    assert len(names) == 2 + 6 * SMALL.n_layer + 1


def test_init_is_nanogpts():
    """N(0, 0.02) weights and embeddings, N(0, 0.02/sqrt(2 L)) residual projections, zero
    biases, LayerNorm ones/zeros (nanoGPT's _init_weights and c_proj rule)."""
    cfg = GPTConfig(vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128)
    aicfc.manual_seed(1)
    p = dict(GPT(cfg).named_parameters())
    resid = 0.02 / math.sqrt(2 * cfg.n_layer)
    for name, value in p.items():
        assert value.dtype == np.float32, name
        if name.endswith("c_proj.weight"):
            assert abs(value.data.std() - resid) < 0.05 * resid, name
        elif name.endswith(("wte.weight", "wpe.weight", "c_attn.weight", "c_fc.weight")):
            assert abs(value.data.std() - 0.02) < 0.05 * 0.02, name
            assert abs(value.data.mean()) < 0.002, name
        elif "ln_" in name and name.endswith("weight"):
            np.testing.assert_array_equal(value.data, 1.0)
        else:
            assert name.endswith("bias"), name
            np.testing.assert_array_equal(value.data, 0.0)


def test_num_parameters_counts_the_tied_head_once():
    model = small_gpt()
    d, v, t, layers = SMALL.n_embd, SMALL.vocab_size, SMALL.block_size, SMALL.n_layer
    per_block = (
        2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    )
    total = v * d + t * d + layers * per_block + 2 * d
    assert model.num_parameters(non_embedding=False) == total
    assert model.num_parameters() == total - t * d


def test_state_dict_loads_into_torch_layers_of_the_same_names():
    """Our layers' shapes are torch's: Embedding [V, D], LayerNorm [D], c_attn [3D, D]."""
    model = small_gpt()
    sd = model.state_dict()
    attn = torch.nn.Linear(SMALL.n_embd, 3 * SMALL.n_embd)
    attn.load_state_dict(
        {k.split("c_attn.")[1]: torch.from_numpy(v) for k, v in sd.items() if ".0.attn.c_attn" in k}
    )
    emb = torch.nn.Embedding(SMALL.vocab_size, SMALL.n_embd)
    emb.load_state_dict({"weight": torch.from_numpy(sd["transformer.wte.weight"])})


def test_layer_defaults_are_torchs():
    aicfc.manual_seed(2)
    e = nn.Embedding(300, 200)
    assert abs(e.weight.data.std() - 1.0) < 0.02  # torch.nn.Embedding: N(0, 1)
    ln = nn.LayerNorm(6)
    np.testing.assert_array_equal(ln.weight.data, np.ones(6, np.float32))  # type: ignore[union-attr]
    np.testing.assert_array_equal(ln.bias.data, np.zeros(6, np.float32))  # type: ignore[union-attr]
    assert nn.LayerNorm(6, elementwise_affine=False).weight is None
    assert [n for n, _ in nn.LayerNorm(6, bias=False).named_parameters()] == ["weight"]


# --- refused with the names and numbers ----------------------------------------------


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=4"):
        nn.CausalSelfAttention(10, 4, block_size=8)
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=3"):
        GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=3, n_embd=10))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: nn.Embedding(0, 4), r"Embedding: num_embeddings must be a positive integer"),
        (lambda: nn.LayerNorm((2, 3)), r"LayerNorm: only the last dim is normalised"),
        (lambda: nn.LayerNorm(4, eps=0.0), r"LayerNorm: eps must be > 0"),
        (lambda: nn.CausalSelfAttention(8, 2, 0), r"block_size must be a positive integer"),
    ],
)
def test_bad_layer_sizes_are_value_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_layer_shape_checks():
    attn = nn.CausalSelfAttention(8, 2, block_size=4)
    assert attn.output_shape((3, 4, 8)) == (3, 4, 8)
    with pytest.raises(nn.ShapeError, match=r"T=5 is outside \[1, block_size=4\]"):
        attn.output_shape((3, 5, 8))
    with pytest.raises(nn.ShapeError, match=r"takes \[N, T, 8\] inputs, got \[3, 4, 6\]"):
        attn.output_shape((3, 4, 6))
    with pytest.raises(nn.ShapeError, match=r"takes \[\.\.\., 8\] inputs, got \[3, 7\]"):
        nn.LayerNorm(8).output_shape((3, 7))
    assert nn.Embedding(5, 3).output_shape((2, 7)) == (2, 7, 3)
    assert nn.MLP(8).output_shape((2, 3, 8)) == (2, 3, 8)
    assert nn.Linear(8, 5).output_shape((2, 3, 8)) == (2, 3, 5)  # [..., in] as torch


def test_a_sequence_longer_than_block_size_is_refused_at_step():
    prog = aicfc.compile(small_gpt(), backend="numpy")
    t = SMALL.block_size + 1
    with pytest.raises(aicfc.InputError, match=rf'"x".*T={t} is outside \[1, block_size=8\]'):
        prog.step(ids((2, t)), ids((2, t)))
    assert prog.compiled() == []


@pytest.mark.parametrize(
    ("x", "y", "words"),
    [
        (np.zeros((2, 4), np.float32), ids((2, 4)), ['"x"', "integer token ids", "float32"]),
        (ids((2, 4), high=SMALL.vocab_size + 2), ids((2, 4)), ['"x"', "[0, 11)", "rows"]),
        (np.full((2, 4), -1), ids((2, 4)), ['"x"', "[0, 11)", "from -1"]),
        (ids((2, 4)), ids((2,)), ['"y"', "expected shape [2, 4]", "one label per position"]),
        (ids((2, 4)), ids((2, 4), high=SMALL.vocab_size + 5), ['"y"', "[0, 11)"]),
        (ids((2, 4, 1)), ids((2, 4)), ['"x"', "token ids [N, T]", "[2, 4, 1]"]),
    ],
    ids=["x-float", "x-range-high", "x-range-low", "y-shape", "y-range", "x-rank"],
)
def test_token_input_errors_name_the_input(x, y, words):
    prog = aicfc.compile(small_gpt(), backend="numpy")
    with pytest.raises(aicfc.InputError) as e:
        prog.step(x, y)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert prog.compiled() == []
