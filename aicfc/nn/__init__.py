"""aicfc.nn: neural-network modules that emit graph IR (torch.nn's names and layouts).

`modules.py` holds the base class, the containers and the MLP layers (Linear, the
activations, Dropout); `transformer.py` the layers of a decoder-only transformer
(Embedding, LayerNorm, CausalSelfAttention, MLP, TransformerBlock). The GPT built from
them is `aicfc.models.gpt.GPT`.
"""

from __future__ import annotations

from aicfc.nn.modules import (
    GELU,
    Dropout,
    EmitContext,
    InputSpec,
    LayerMismatch,
    Linear,
    Module,
    Parameter,
    ReLU,
    Sequential,
    ShapeError,
    SiLU,
    Tanh,
    default_rng,
    dropout_key,
    dropout_keys,
    dropout_offset,
    has_dropout,
    manual_seed,
    mode_key,
    parameter_aliases,
    scalar_constant,
)
from aicfc.nn.transformer import MLP, CausalSelfAttention, Embedding, LayerNorm, TransformerBlock

__all__ = [
    "GELU",
    "MLP",
    "CausalSelfAttention",
    "Dropout",
    "Embedding",
    "EmitContext",
    "InputSpec",
    "LayerMismatch",
    "LayerNorm",
    "Linear",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "ShapeError",
    "SiLU",
    "Tanh",
    "TransformerBlock",
    "default_rng",
    "dropout_key",
    "dropout_keys",
    "dropout_offset",
    "has_dropout",
    "manual_seed",
    "mode_key",
    "parameter_aliases",
    "scalar_constant",
]
