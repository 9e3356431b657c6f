"""Differential tests of the whole compiler on random transformer train steps.

Each step (transformer_steps.py: B, T, heads, head size, V, 1-2 pre-LN blocks, causal
or not, dropout or not, layer norms with or without weight and bias, a tied LM head,
cross-entropy over [B, T, V], SGD) runs

- as the reference: the interpreter (runtime/reference.py) on the function after
  aicfc-expand-backward alone;
- after every prefix of the graph-level pipeline (aicfc-fuse, aicfc-expand-backward,
  aicfc-fuse, canonicalize, aicfc-fold-constants, cse), through the interpreter;
- lowered for the NumPy backend (aicfc-lower-exec, with and without aicfc-fold-inplace,
  memory-planned) for three steps, the interpreter feeding each step's next params and
  offset back in.

Everything is float64 on fresh random inputs, so beyond rounding (relative error 1e-9)
a difference is a wrong rewrite, VJP or buffer alias. The fused IR must really contain
the fused ops (attention, add + layer norm, the GELU epilogue, the loss with its
gradient), so the fused paths are the ones compared.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.roles import arg_name, result_names
from aicfc.execute import LoadedFunction, run_pipeline
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, run_func
from regressions.transformer_steps import Config, random_config, random_inputs, transformer_step
from support import rel_err

TOL = 1e-9
STEPS = 3
PIPELINE = (
    "aicfc-fuse",
    "aicfc-expand-backward",
    "aicfc-fuse",
    "canonicalize",
    "aicfc-fold-constants",
    "cse",
)

Values = dict[str, np.ndarray]

FIXED = {
    "causal_dropout": Config(2, 4, 2, 2, 5, 1, True, 0.25, True, True),
    "not_causal": Config(1, 3, 2, 3, 3, 2, False, 0.0, True, True),
    "no_affine": Config(2, 3, 1, 2, 5, 1, True, 0.0, False, False),
    "weight_without_bias": Config(1, 4, 2, 1, 3, 1, True, 0.0, True, False),
    "one_position": Config(2, 1, 2, 2, 3, 1, True, 0.25, True, True),
}
RANDOM = [random_config(random.Random(seed)) for seed in range(6)]
CASES = {**FIXED, **{f"random{i}": c for i, c in enumerate(RANDOM)}}


def interpret(text: str, passes: str, args: Values) -> tuple[Values, list[type]]:
    """The named results of `text` after `passes`, and the op classes it then holds."""
    module = parse_module(text)
    run_pipeline(module, passes)
    fn = find_func(module)
    names = [arg_name(a) or f"arg{i}" for i, a in enumerate(fn.body.blocks.first.args)]  # type: ignore[union-attr]
    outs = run_func(fn, [args[n] for n in names])
    named = {
        n or f"result{j}": o for j, (n, o) in enumerate(zip(result_names(fn), outs, strict=True))
    }
    return named, [type(op) for op in fn.walk()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_pass_keeps_the_results(name: str) -> None:
    c = CASES[name]
    text = transformer_step(c)
    args = random_inputs(c, np.random.default_rng(len(name)))
    want, _ = interpret(text, "aicfc-expand-backward", args)
    assert np.isfinite(want["loss"]) and want["loss"] > 0
    kinds: list[type] = []
    for k in range(2, len(PIPELINE) + 1):
        got, kinds = interpret(text, ",".join(PIPELINE[:k]), args)
        for key, value in want.items():
            assert rel_err(got[key], value) <= TOL, f"after {PIPELINE[:k]}: {key}"
    fused = {g.PackedQKVAttentionOp, g.AddLayerNormOp, g.GemmEpilogueOp}
    fused |= {ad.PackedQKVAttentionGradOp, ad.LayerNormGradOp}
    if c.bias:
        fused |= {ad.EpilogueGradOp}
    assert fused <= set(kinds), fused - set(kinds)
    assert g.SoftmaxOp not in kinds and g.CausalMaskOp not in kinds
    # the heads are read from and written to the packed qkv in place
    assert not {g.SplitOp, g.ConcatOp, g.ScaledDotProductAttentionOp} & set(kinds)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("inplace", [False, True], ids=["out_of_place", "inplace"])
def test_numpy_backend_runs_the_lowered_step(name: str, inplace: bool) -> None:
    c = CASES[name]
    text = transformer_step(c)
    args = random_inputs(c, np.random.default_rng(len(name) + 1))
    loaded = LoadedFunction.load(parse_module(text), None, "numpy", inplace=inplace)
    feed = loaded.set_values(args)
    stored = {b.name for b in loaded.stored}
    current = dict(args)
    for step in range(STEPS):
        want, _ = interpret(text, "aicfc-expand-backward", current)
        got = loaded.results(loaded.run(feed))
        assert set(got) == set(want) | stored
        for key, value in want.items():
            assert rel_err(got[key], value) <= TOL, f"step {step}: {key}"
        current.update({n: v for n, v in want.items() if n in stored})
