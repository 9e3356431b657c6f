"""aicfc-fuse's layer_norm_grad_add: the residual stream's gradient add fused into the
layer norm backward (autodiff.add_layer_norm_grad).

- NumPy, op by op, on fresh random inputs: the fused op's reference and the NumPy
  backend's kernel are bit for bit layer_norm_grad then graph.add (the same two float32
  values added once); the float32 dx is within F32_TOL of the float64 evaluation
  (layer_norm_grad's dx in float64 plus residual_grad);
- nanoGPT-char's train step (6 layers, d_model 384, 6 heads, T 256, batch 64) lowered for
  an H200 on the CPU, fp32 and bf16: 12 add launches fewer (one per block's two layer
  norms; ln_f's dx has other readers, and the tied embedding's gradient sum stays);
- a small GPT's whole train step on the NumPy backend, fp32 and bf16: with the fusion bit
  for bit the step without it (loss, params, moments, weight copies).
"""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest
from xdsl.dialects import func

from aicfc.context import make_context
from aicfc.dialects import autodiff as ad
from aicfc.dialects import exec as ex
from aicfc.dialects.roles import arg_name
from aicfc.passes.pipelines import Step, run_steps, train_pipeline
from aicfc.runtime.numpy.kernels import norm
from aicfc.runtime.numpy.kernels.common import Scratch
from aicfc.runtime.reference import REFERENCE, add, layer_norm, layer_norm_grad
from precision.test_fold_narrowing_casts import H200, bits, gpt_step, numpy_program, step_values

F32_TOL = 1e-5
"""Norm-wise relative error of the float32 reference against its float64 evaluation."""


def without_fusion(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The pipeline with layer_norm_grad_add left out of the backward's aicfc-fuse (the
    pattern with dx on the add's left never matches a GPT step: the VJPs add (ds, dx))."""
    out = []
    for s in steps:
        passes = s.passes
        if s.stage == "fused-backward":
            unfused = "aicfc-fuse{exclude=layer_norm_grad_add}"
            passes, n = re.subn(r"^aicfc-fuse\b", unfused, passes)
            assert n == 1, passes
        out.append(Step(s.stage, passes))
    return tuple(out)


def random_case(rng: np.random.Generator, shape: tuple[int, ...], weight: bool) -> list:
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    w = rng.standard_normal(shape[-1]).astype(np.float32) if weight else None
    _, mean, rstd = layer_norm(x, w, eps=1e-5)
    dy, dr = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    return [dy, 3 * dr, x, mean, rstd, *([w] if weight else [])]


@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("shape", [(2, 6, 37), (5, 64)])
def test_the_fused_op_is_layer_norm_grad_then_add(shape, weight) -> None:
    dy, dr, x, mean, rstd, *w = random_case(np.random.default_rng(sum(shape)), shape, weight)
    plain = layer_norm_grad(dy, x, mean, rstd, *w)
    want = [add(dr, plain[0])[0], *plain[1:]]
    fused = REFERENCE[ad.AddLayerNormGradOp](dy, dr, x, mean, rstd, *w)
    outs = [np.full_like(a, np.nan) for a in want[: 3 if weight else 1]]
    norm.add_layer_norm_grad([dy, dr, x, mean, rstd, *w], outs, {}, Scratch())()
    for k, got in enumerate(outs):
        np.testing.assert_array_equal(bits(got), bits(want[k]), err_msg=f"kernel #{k}")
        np.testing.assert_array_equal(bits(fused[k]), bits(want[k]), err_msg=f"reference #{k}")
    wide = [a.astype(np.float64) for a in (dy, dr, x, mean, rstd, *w)]
    ref64 = REFERENCE[ad.AddLayerNormGradOp](*wide)
    dx64 = layer_norm_grad(wide[0], *wide[2:])[0] + wide[1]
    np.testing.assert_array_equal(ref64[0], dx64)
    err = np.linalg.norm(fused[0] - ref64[0]) / np.linalg.norm(ref64[0])
    assert err <= F32_TOL


def launches(steps: tuple[Step, ...]) -> collections.Counter[str]:
    """exec.launch ops of nanoGPT-char's train step, by kernel."""
    module = gpt_step(6, 6, 384, 256, 64)
    run_steps(make_context(), module, steps)
    return collections.Counter(
        op.kernel_name for op in module.walk() if isinstance(op, ex.LaunchOp)
    )


@pytest.mark.parametrize("precision", [None, "bf16"], ids=["fp32", "bf16"])
def test_the_gpt_step_lowers_with_12_fewer_add_launches(precision: str | None) -> None:
    steps = train_pipeline("cupy", True, H200, autocast=precision)
    before, after = launches(without_fusion(steps)), launches(steps)
    # 6 blocks x 2 layer norms: each dx added to the residual stream's gradient
    assert before["cuda.add_f32"] == 13 and before["cuda.layer_norm_grad_f32"] == 13
    assert "cuda.add_layer_norm_grad_f32" not in before
    assert after["cuda.add_layer_norm_grad_f32"] == 12
    assert after["cuda.layer_norm_grad_f32"] == 1  # ln_f: its dx feeds the c_proj products too
    assert after["cuda.add_f32"] == 1  # the tied embedding's two gradients
    assert sum(before.values()) - sum(after.values()) == 12
    assert before - after == collections.Counter(
        {"cuda.add_f32": 12, "cuda.layer_norm_grad_f32": 12}
    )


@pytest.mark.parametrize(
    ("precision", "low"), [(None, None), ("bf16", "bf16")], ids=["fp32", "bf16"]
)
def test_the_gpt_step_with_the_fusion_is_bitwise_the_step_without(precision, low) -> None:
    steps = train_pipeline("numpy", True, None, autocast=precision)
    planned = [s.stage for s in steps].index("exec")
    fused = gpt_step(2, 2, 32, 16, 3)
    run_steps(make_context(), fused, steps[:planned])
    fn = next(op for op in fused.walk() if isinstance(op, func.FuncOp))
    assert sum(isinstance(op, ad.AddLayerNormGradOp) for op in fn.walk()) == 4  # 2 blocks x 2
    values = step_values(fn, low or "bf16", np.random.default_rng(9))
    names = [arg_name(a) for a in fn.body.blocks.first.args]  # type: ignore[union-attr]
    assert set(values) == set(names)
    got_prog = numpy_program(fused, steps[planned:])
    want_prog = numpy_program(gpt_step(2, 2, 32, 16, 3), without_fusion(steps))
    got = got_prog.results(got_prog.run(got_prog.set_values(values)))
    want = want_prog.results(want_prog.run(want_prog.set_values(values)))
    assert set(got) == set(want) and len(got) > 40
    assert np.isfinite(np.asarray(want["loss"], np.float64)).all()
    for name, w in want.items():
        assert got[name].dtype == w.dtype, name
        np.testing.assert_array_equal(bits(got[name]), bits(w), err_msg=name)
