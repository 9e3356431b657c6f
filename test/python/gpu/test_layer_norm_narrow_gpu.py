"""layernorm.cu's narrow entries on the GPU: aicfc_[add_]layer_norm_f32_{bf16,f16} store y in
bf16/f16 (aicfc-fold-narrowing-casts), compiled by NVRTC and bound by their registry
entries' launchers as a loaded program binds them.

At nanoGPT-char's rows (B 64 x T 256 = 16384 rows of d_model 384) and ragged ones: y is
bit for bit the f32 kernel's y cast by cuda.cast_f32_<low> (the two launches the fold
replaced), the sum, mean and rstd bit for bit the f32 kernel's; y within one rounding of
the low dtype of the NumPy reference of the narrowed op. The y buffers are 16-bit words
(the kernels read and write raw bits), so no CuPy bfloat16 is needed.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects import graph as g
from aicfc.runtime import reference, registry
from gpu.gpu_support import F32_TOL, gpu, rel_err

pytestmark = gpu

LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
LOW_TOL = {"bf16": 2.0**-8, "f16": 2.0**-11}
"""y against the reference, norm-wise: one rounding of the low dtype (the float32 sums'
order differs from NumPy's, which can move a value across a rounding boundary)."""
SHAPES = [(64 * 256, 384), (1000, 37), (333, 130), (8, 8192)]


def run(kernel: str, ins: list[Any], outs: list[Any], params: dict[str, Any]) -> None:
    import cupy

    from aicfc.runtime.cuda.context import DeviceContext
    from aicfc.runtime.cuda.launch import launches_for

    launches = launches_for(registry.get(kernel), ins, outs, params, DeviceContext())
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    for la in launches:
        la(stream)
    stream.synchronize()


@pytest.mark.parametrize("low", sorted(LOW))
@pytest.mark.parametrize("residual", [False, True], ids=["layer_norm", "add_layer_norm"])
@pytest.mark.parametrize(("n", "d"), SHAPES, ids=[f"{n}x{d}" for n, d in SHAPES])
def test_narrow_layer_norm_is_the_f32_kernel_then_the_cast(n, d, residual, low) -> None:
    import cupy

    rng = np.random.default_rng(n + d)
    x = (rng.standard_normal((n, d)) * 2 + 0.5).astype(np.float32)
    r = (rng.standard_normal((n, d)) * 3).astype(np.float32)
    w, b = rng.standard_normal(d).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    ins = [x, *([r] if residual else []), w, b]
    op = "add_layer_norm" if residual else "layer_norm"

    def outs(y_dtype: Any) -> list[Any]:
        """[s,] y, mean, rstd; the float32 ones poisoned with NaN."""
        s = [cupy.full((n, d), np.nan, np.float32)] if residual else []
        stats = [cupy.full(n, np.nan, np.float32) for _ in range(2)]
        return [*s, cupy.zeros((n, d), y_dtype), *stats]

    d_ins = [cupy.asarray(a) for a in ins]
    narrow, wide = outs(np.uint16), outs(np.float32)
    run(f"cuda.{op}_f32_{low}", d_ins, narrow, {"eps": 1e-5, "out_dtype": low})
    run(f"cuda.{op}_f32", d_ins, wide, {"eps": 1e-5})
    cast_y = cupy.zeros((n, d), np.uint16)
    run(f"cuda.cast_f32_{low}", [wide[-3]], [cast_y], {"dtype": low})
    np.testing.assert_array_equal(cupy.asnumpy(narrow[-3]), cupy.asnumpy(cast_y))
    for a, c in zip(narrow[:-3] + narrow[-2:], wide[:-3] + wide[-2:], strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(a), cupy.asnumpy(c))
    cls = g.AddLayerNormOp if residual else g.LayerNormOp
    ref = reference.REFERENCE[cls](*ins, eps=1e-5, out_dtype=low)
    y = cupy.asnumpy(narrow[-3]).view(LOW[low]).astype(np.float64)
    assert np.linalg.norm(y - ref[-3].astype(np.float64)) <= LOW_TOL[low] * np.linalg.norm(y)
    for a, c in zip(narrow[-2:], ref[-2:], strict=True):
        assert rel_err(cupy.asnumpy(a), c) <= F32_TOL


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_gpt_steps_with_the_fold_are_bitwise_the_steps_without(precision: str) -> None:
    """A 2-layer GPT (d_model 64, 4 heads, T 16, no dropout), 3 AdamW steps on the CUDA
    backend: with aicfc-fold-narrowing-casts (the default pipeline) every loss and
    parameter equals the program's without it, bit for bit (the kernels are deterministic
    and the fold moves no rounding), and the step has 5 cast launches fewer (the 4 block
    layer norms and ln_f)."""
    import aicfc
    from aicfc import optim
    from aicfc.models.gpt import GPT, GPTConfig
    from aicfc.passes.pipelines import Step
    from aicfc.program import Program
    from aicfc.runtime.cuda.backend import CupyBackend

    cfg = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=4, n_embd=64, dropout=0.0)

    def program(fold: bool) -> Program:
        aicfc.manual_seed(0)
        opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
        prog = Program(
            GPT(cfg), "cross_entropy", opt, CupyBackend(), cache_dir=False, precision=precision
        )
        if not fold:  # a test's override of the pipeline (gpu_support.per_layer's way)
            prog._steps = tuple(
                Step(s.stage, s.passes.replace(",aicfc-fold-narrowing-casts", ""))
                for s in prog._steps
            )
        return prog

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 65, (3, 8, 17)).astype(np.int32)
    folded, unfolded = program(True), program(False)
    got = [folded.step(b[:, :-1].copy(), b[:, 1:].copy()) for b in ids]
    want = [unfolded.step(b[:, :-1].copy(), b[:, 1:].copy()) for b in ids]
    assert got == want and np.isfinite(want).all()
    for name, value in unfolded.parameters().items():
        np.testing.assert_array_equal(folded.parameters()[name], value, err_msg=name)

    def casts(prog: Program) -> int:
        return sum(k.startswith("cuda.cast_") for k in prog.executable().kernels)

    assert casts(unfolded) - casts(folded) == 5
