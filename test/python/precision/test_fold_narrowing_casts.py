"""aicfc-fold-narrowing-casts: a layer norm stores its output in bf16/f16 itself.

- op by op (runtime/reference.py, out_dtype "bf16"/"f16"): y is bit for bit graph.cast of
  the float32 layer norm's y, the sum and statistics stay float32 and equal;
- the bf16 nanoGPT-char train step (6 layers, d_model 384, 6 heads, T 256, batch 64)
  lowered for an H200 on the CPU: 38 cast launches without the fold, 25 with it (the 13
  layer norm outputs: 12 add_layer_norm of the blocks, the one of ln_f);
- a small GPT's whole train step on the NumPy backend, bf16 and fp16: with the fold
  bit for bit the step without it (every result: loss, params, moments, the weight
  copies), as the fold moves one rounding nowhere.
"""

from __future__ import annotations

import collections

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from aicfc import optim
from aicfc.builder import build_train_step
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.dialects import graph as g
from aicfc.dialects.roles import arg_name
from aicfc.execute import LoadedFunction
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.passes.aicfc_fold_weight_casts import copy_source
from aicfc.passes.pipelines import Step, run_steps, train_pipeline
from aicfc.runtime.reference import REFERENCE, cast
from support import random_values

H200 = {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True}
FOLD = ",aicfc-fold-narrowing-casts"
LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def without_fold(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    assert sum(FOLD in s.passes for s in steps) == 1
    return tuple(Step(s.stage, s.passes.replace(FOLD, "")) for s in steps)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]) if a.ndim else a


@pytest.mark.parametrize("low", sorted(LOW))
def test_a_narrowed_layer_norm_is_the_cast_of_the_f32_one(low: str) -> None:
    rng = np.random.default_rng(11)
    x, r = rng.standard_normal((2, 6, 37)).astype(np.float32), rng.standard_normal((2, 6, 37))
    r = (3 * r).astype(np.float32)
    w, b = rng.standard_normal(37).astype(np.float32), rng.standard_normal(37).astype(np.float32)
    for cls, ins, y_at in ((g.LayerNormOp, (x, w, b), 0), (g.AddLayerNormOp, (x, r, w, b), 1)):
        wide = REFERENCE[cls](*ins, eps=1e-5)
        narrow = REFERENCE[cls](*ins, eps=1e-5, out_dtype=low)
        assert narrow[y_at].dtype == LOW[low]
        np.testing.assert_array_equal(bits(narrow[y_at]), bits(cast(wide[y_at], dtype=low)[0]))
        for i, (a, c) in enumerate(zip(narrow, wide, strict=True)):
            if i != y_at:
                assert a.dtype == np.float32
                np.testing.assert_array_equal(a, c)


def gpt_step(layers: int, heads: int, d: int, t: int, batch: int) -> ModuleOp:
    cfg = GPTConfig(65, t, layers, heads, d, 0.0, True)
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
    return ModuleOp([build_train_step(GPT(cfg), "cross_entropy", opt, (batch, t), np.float32)])


def cast_launches(steps: tuple[Step, ...]) -> collections.Counter[str]:
    """The cast launches of nanoGPT-char's bf16 step, by the op that made the cast's input."""
    module = gpt_step(6, 6, 384, 256, 64)
    exec_at = [s.stage for s in steps].index("exec")
    run_steps(make_context(), module, steps[:exec_at])
    producers = collections.Counter(
        op.input.owner.name
        for op in module.walk()
        if isinstance(op, g.CastOp) and not isinstance(op.input.owner, func.FuncOp)
    )
    run_steps(make_context(), module, steps[exec_at:])
    launches = [
        op.kernel_name
        for op in module.walk()
        if isinstance(op, ex.LaunchOp) and op.kernel_name.startswith("cuda.cast_")
    ]
    assert sum(producers.values()) == len(launches)  # one launch per cast op
    return producers


def test_the_bf16_gpt_step_lowers_with_13_fewer_casts() -> None:
    steps = train_pipeline("cupy", True, H200, autocast="bf16")
    before, after = cast_launches(without_fold(steps)), cast_launches(steps)
    # 6 blocks x 2 layer norms (add_layer_norm: the residual add fused) + ln_f = 13
    # normalised outputs cast to bf16 for c_attn, c_fc and the tied head
    assert before["graph.add_layer_norm"] == 13
    assert sum(before.values()) == 26
    assert "graph.add_layer_norm" not in after
    # left: the residual stream's gradient (11 add_layer_norm_grad: aicfc-fuse's
    # layer_norm_grad_add; ln_f's layer_norm_grad) cast for the c_proj products and the
    # logits' gradient (1); attention reads and writes bf16 itself (kernels/attention_mma.cu)
    assert after == {
        "autodiff.add_layer_norm_grad": 11,
        "autodiff.layer_norm_grad": 1,
        "autodiff.cross_entropy_with_grad": 1,
    }
    assert sum(after.values()) == 13


def numpy_program(module: ModuleOp, steps: tuple[Step, ...]) -> LoadedFunction:
    run_steps(make_context(), module, steps)
    return LoadedFunction.load(module, None, "numpy")


def step_values(fn: func.FuncOp, low: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random inputs, params and moments; sane hyperparameters; each weight copy the cast
    of its master (as a Program fills it)."""
    values = random_values(fn, rng, classes=65)
    for name in list(values):
        if name.startswith("optim."):
            values[name] = np.asarray(
                {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}.get(
                    name.rsplit(".", 1)[1], 0.1
                ),
                values[name].dtype,
            )
        src = copy_source(name)
        if src is not None:
            values[name] = values[src].astype(LOW[low])
    return values


@pytest.mark.parametrize(("precision", "low"), [("bf16", "bf16"), ("fp16", "f16")])
def test_the_gpt_step_with_the_fold_is_bitwise_the_step_without(precision: str, low: str) -> None:
    steps = train_pipeline("numpy", True, None, autocast=precision)
    planned = [s.stage for s in steps].index("exec")
    folded = gpt_step(2, 2, 32, 16, 3)
    run_steps(make_context(), folded, steps[:planned])
    fn = next(op for op in folded.walk() if isinstance(op, func.FuncOp))
    narrowed = sum(
        isinstance(op, g.AddLayerNormOp | g.LayerNormOp)
        and op.results[-3].type.element_type != op.operands[0].type.element_type  # type: ignore[attr-defined]
        for op in fn.walk()
    )
    assert narrowed == 5  # 2 blocks x 2 + ln_f
    values = step_values(fn, low, np.random.default_rng(5))
    names = [arg_name(a) for a in fn.body.blocks.first.args]  # type: ignore[union-attr]
    assert set(values) == set(names)
    got_prog = numpy_program(folded, steps[planned:])
    want_prog = numpy_program(gpt_step(2, 2, 32, 16, 3), without_fold(steps))
    got = got_prog.results(got_prog.run(got_prog.set_values(values)))
    want = want_prog.results(want_prog.run(want_prog.set_values(values)))
    assert set(got) == set(want) and len(got) > 40
    assert np.isfinite(np.asarray(want["loss"], np.float64)).all()
    for name, w in want.items():
        assert got[name].dtype == w.dtype, name
        np.testing.assert_array_equal(bits(got[name]), bits(w), err_msg=name)
