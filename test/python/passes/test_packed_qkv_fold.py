"""The packed-qkv fold on whole GPT train steps (aicfc-fuse's `packed_qkv_attention`).

- NumPy differential: a 2-layer GPT (3 heads of 8, T 8, dropout 0.1 on the embeddings, the
  attention probabilities and the residuals) lowered with the fold and without it
  (`aicfc-fuse{exclude=packed_qkv_attention}` in both fuse steps), the same initial
  weights and state, then 4 AdamW steps on fresh random batches: every loss and every
  final parameter and optimizer state within 1e-5 norm-wise relative (fp32: the two steps
  compute the same numbers with the heads read in place instead of copied).
- Launch counts: nanoGPT-char's train step (6 layers, d_model 384, 6 heads, T 256,
  batch 64; tools/bench_gpt_step.py's config) lowered for the CUDA kernel family has no
  split, concat, transpose or permute launch: one packed attention launch a layer
  forward and one backward, the tiled kernels for head dim 64; without the fold the
  same step has a split, a concat, eight transposes and the unpacked attention a layer.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

import aicfc
from aicfc import optim
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.execute import LoadedFunction, find_program
from aicfc.ir import parse_module
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.passes.pipelines import Step, run_steps, train_pipeline
from support import rel_err

TOL = 1e-5
UNFOLDED = "aicfc-fuse{exclude=packed_qkv_attention}"


def pipeline(
    backend: str, fold: bool, options: dict[str, object] | None = None
) -> tuple[Step, ...]:
    steps = train_pipeline(backend, True, options)
    if fold:
        return steps
    return tuple(Step(s.stage, UNFOLDED) if s.passes == "aicfc-fuse" else s for s in steps)


def graph_ir(cfg: GPTConfig, batch: int) -> tuple[str, dict[str, np.ndarray]]:
    """The train step's graph IR and the program's initial params and state."""
    aicfc.manual_seed(0)
    opt = optim.AdamW(lr=1e-2, weight_decay=0.1)
    prog = aicfc.compile(GPT(cfg), optimizer=opt, backend="numpy", cache_dir=False)
    return prog.mlir("graph", batch_size=batch), prog.state_dict()


def lowered(text: str, backend: str, fold: bool, options: dict[str, object] | None = None):
    module = parse_module(text)
    run_steps(make_context(), module, pipeline(backend, fold, options))
    return module


def launches(module) -> collections.Counter[str]:
    program = find_program(module, "train_step")
    return collections.Counter(
        op.kernel.data for op in program.walk() if isinstance(op, ex.LaunchOp)
    )


def test_gpt_step_trains_the_same_with_and_without_the_fold() -> None:
    cfg = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=3, n_embd=24, dropout=0.1)
    text, state = graph_ir(cfg, batch=3)
    runs = {}
    for fold in (True, False):
        module = lowered(text, "numpy", fold)
        kinds = set(launches(module))
        assert ("numpy.packed_qkv_attention_out" in kinds) == fold, sorted(kinds)
        assert ("numpy.split_out" in kinds) != fold, sorted(kinds)
        loaded = LoadedFunction.load(module, "train_step", "numpy")
        rng = np.random.default_rng(7)  # the same fresh batches for both
        shape = (3, cfg.block_size + 1)
        batches = [rng.integers(0, cfg.vocab_size, shape).astype(np.int32) for _ in range(4)]
        loaded.set_values({**state, "x": batches[0][:, :-1], "y": batches[0][:, 1:]})
        losses = []
        for ids in batches:
            feed = {"x": ids[:, :-1], "y": ids[:, 1:]}
            losses.append(float(loaded.run(feed)["loss"]))
        runs[fold] = (losses, loaded.store.state_dict())
    (folded, folded_state), (plain, plain_state) = runs[True], runs[False]
    assert all(np.isfinite(folded)) and folded[-1] != folded[0]
    assert rel_err(np.array(folded), np.array(plain)) < TOL, (folded, plain)
    assert folded_state.keys() == plain_state.keys()
    for name, value in plain_state.items():
        assert rel_err(folded_state[name], value) < TOL, name


LAYOUT = ("cuda.split", "cuda.concat", "cuda.transpose", "cuda.permute")


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "unfolded"])
def test_nanogpt_char_step_has_no_layout_launches_around_attention(fold: bool) -> None:
    layers, heads = 6, 6
    cfg = GPTConfig(vocab_size=65, block_size=256, n_layer=layers, n_head=heads, n_embd=384)
    text, _ = graph_ir(cfg, batch=64)
    count = launches(lowered(text, "cuda", fold, {"tf32": True, "arch": 90}))
    layout = {k: n for k, n in count.items() if k.startswith(LAYOUT)}
    if fold:
        assert layout == {}, layout
        assert count["cuda.packed_qkv_attention_f32_d64"] == layers
        assert count["cuda.packed_qkv_attention_grad_f32_d64"] == layers
        assert not any("scaled_dot_product_attention" in k for k in count), sorted(count)
    else:  # what the fold removes: per layer a split, 3 + 1 transposes each way, a concat
        assert layout == {
            "cuda.split_b32": layers,
            "cuda.concat_b32": layers,
            "cuda.transpose_b32": 8 * layers,
        }, layout
        assert count["cuda.scaled_dot_product_attention_f32_d64"] == layers
