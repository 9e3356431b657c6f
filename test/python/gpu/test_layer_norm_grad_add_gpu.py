"""cuda.add_layer_norm_grad_f32 on the GPU: the layer norm backward with the residual
stream's gradient added to dx (autodiff.add_layer_norm_grad, aicfc-fuse), compiled by
NVRTC and bound by its registry entry's launcher as a loaded program binds it.

At nanoGPT-char's rows (B 64 x T 256 = 16384 rows of d_model 384) and ragged ones: dx is
bit for bit cuda.layer_norm_grad_f32's dx then cuda.add_f32 (the two launches the fusion
replaced: the kernel adds with __fadd_rn, never contracted into an fma), dweight and
dbias bit for bit that kernel's; all within F32_TOL of the NumPy reference in float64.
A small GPT's train steps, fp32 and bf16, are bit for bit the steps without the fusion.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from aicfc.dialects import autodiff as ad
from aicfc.runtime import reference
from gpu.gpu_support import F32_TOL, gpu, rel_err
from gpu.test_layer_norm_narrow_gpu import run  # a registry entry's launches on a stream

pytestmark = gpu

SHAPES = [(64 * 256, 384), (1000, 37), (333, 130), (8, 8192)]


@pytest.mark.parametrize("weight", [True, False], ids=["weight", "none"])
@pytest.mark.parametrize(("n", "d"), SHAPES, ids=[f"{n}x{d}" for n, d in SHAPES])
def test_the_fused_backward_is_the_backward_then_the_add(n, d, weight) -> None:
    import cupy

    rng = np.random.default_rng(n + d)
    x = (rng.standard_normal((n, d)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((n, d)).astype(np.float32)
    dres = (rng.standard_normal((n, d)) * 3).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32) if weight else None
    _, mean, rstd = reference.layer_norm(x, w, eps=1e-5)
    params = [w] if w is not None else []

    def outs() -> list[Any]:
        """dx[, dweight, dbias], poisoned with NaN."""
        grads = [cupy.full(d, np.nan, np.float32) for _ in range(2 if weight else 0)]
        return [cupy.full((n, d), np.nan, np.float32), *grads]

    dev = {k: cupy.asarray(a) for k, a in (("dy", dy), ("dr", dres), ("x", x))}
    stats = [cupy.asarray(mean), cupy.asarray(rstd), *(cupy.asarray(a) for a in params)]
    fused, plain = outs(), outs()
    run("cuda.add_layer_norm_grad_f32", [dev["dy"], dev["dr"], dev["x"], *stats], fused, {})
    run("cuda.layer_norm_grad_f32", [dev["dy"], dev["x"], *stats], plain, {})
    summed = cupy.full((n, d), np.nan, np.float32)
    run("cuda.add_f32", [dev["dr"], plain[0]], [summed], {})
    np.testing.assert_array_equal(cupy.asnumpy(fused[0]), cupy.asnumpy(summed))
    for a, c in zip(fused[1:], plain[1:], strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(a), cupy.asnumpy(c))
    ref = reference.REFERENCE[ad.AddLayerNormGradOp](
        *(a.astype(np.float64) for a in (dy, dres, x, mean, rstd, *params))
    )
    for k, got in enumerate(fused):
        assert rel_err(cupy.asnumpy(got), ref[k]) <= F32_TOL, k


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_gpt_steps_with_the_fusion_are_bitwise_the_steps_without(precision: str) -> None:
    """A 2-layer GPT (d_model 64, 4 heads, T 16, no dropout), 3 AdamW steps on the CUDA
    backend: with layer_norm_grad_add (the default pipeline) every loss and parameter
    equals the program's without it, bit for bit, and the step has 4 add launches fewer
    (the 2 x 2 block layer norms)."""
    import aicfc
    from aicfc import optim
    from aicfc.models.gpt import GPT, GPTConfig
    from aicfc.passes.pipelines import Step
    from aicfc.program import Program
    from aicfc.runtime.cuda.backend import CupyBackend

    cfg = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=4, n_embd=64, dropout=0.0)

    def program(fuse: bool) -> Program:
        aicfc.manual_seed(0)
        opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
        prog = Program(
            GPT(cfg), "cross_entropy", opt, CupyBackend(), cache_dir=False, precision=precision
        )
        if not fuse:  # a test's override of the pipeline (gpu_support.per_layer's way)
            prog._steps = tuple(
                Step(
                    s.stage,
                    re.sub(r"^aicfc-fuse\b", "aicfc-fuse{exclude=layer_norm_grad_add}", s.passes)
                    if s.stage == "fused-backward"
                    else s.passes,
                )
                for s in prog._steps
            )
        return prog

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 65, (3, 8, 17)).astype(np.int32)
    fused, unfused = program(True), program(False)
    got = [fused.step(b[:, :-1].copy(), b[:, 1:].copy()) for b in ids]
    want = [unfused.step(b[:, :-1].copy(), b[:, 1:].copy()) for b in ids]
    assert got == want and np.isfinite(want).all()
    for name, value in unfused.parameters().items():
        np.testing.assert_array_equal(fused.parameters()[name], value, err_msg=name)

    def adds(prog: Program) -> int:
        return sum(k == "cuda.add_f32" for k in prog.executable().kernels)

    assert adds(unfused) - adds(fused) == 4
