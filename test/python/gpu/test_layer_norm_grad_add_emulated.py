"""cuda.add_layer_norm_grad_f32 on the CPU emulator: the layer norm backward with the
residual stream's gradient added to dx (autodiff.add_layer_norm_grad, aicfc-fuse), behind
the registry entry's real launcher (launch_add_layer_norm_grad).

Each case runs on fresh random float32 rows of ragged and aligned widths (odd D takes the
scalar path, D a multiple of 4 the 16-byte one), with and without the weight (and the
bias gradient), its outputs poisoned first. Checked:
- dx is bit for bit cuda.layer_norm_grad_f32's dx plus dres in one float32 add (what the
  unfused graph.add computes: the kernel adds with __fadd_rn, never contracted into an
  fma), dweight and dbias bit for bit that kernel's;
- dx, dweight, dbias against runtime/reference.py's add_layer_norm_grad in float64
  within F32_TOL (norm-wise relative error).
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.dialects import autodiff as ad
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SHAPES = [(7, 5), (5, 37), (6, 64), (3, 130), (4, 384), (2, 1030)]
EPS = 1e-5


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def run(kernel: str, ins: list[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
    wrapped = [EmuArray(a) for a in outs]
    for launch in launches_for(
        registry.get(kernel), [EmuArray(a) for a in ins], wrapped, {}, EmuContext()
    ):
        launch(NullStream())
    return [w.array for w in wrapped]


def poisoned(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, np.float32)


@pytest.mark.parametrize("affine", ["wb", "w", "none"])
@pytest.mark.parametrize(("n", "d"), SHAPES, ids=[f"{n}x{d}" for n, d in SHAPES])
def test_the_fused_backward_is_the_backward_plus_dres(n, d, affine):
    rng = np.random.default_rng(3000 + 10 * n + d + len(affine))
    x = (rng.standard_normal((n, d)) * 2.0 + 0.5).astype(np.float32)
    dy = rng.standard_normal((n, d)).astype(np.float32)
    dres = (3.0 * rng.standard_normal((n, d))).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32) if affine != "none" else None
    _, mean, rstd = reference.layer_norm(x, w, eps=EPS)
    params = [w] if w is not None else []
    outs = [poisoned(n, d), *([poisoned(d)] * {"wb": 2, "w": 1}.get(affine, 0))]
    fused = run(
        "cuda.add_layer_norm_grad_f32", [dy, dres, x, mean, rstd, *params], [a.copy() for a in outs]
    )
    plain = run("cuda.layer_norm_grad_f32", [dy, x, mean, rstd, *params], [a.copy() for a in outs])
    assert not np.isnan(fused[0]).any()
    np.testing.assert_array_equal(fused[0], dres + plain[0])  # one float32 add, as graph.add
    for a, b in zip(fused[1:], plain[1:], strict=True):
        np.testing.assert_array_equal(a, b)
    ref = reference.REFERENCE[ad.AddLayerNormGradOp](
        *(a.astype(np.float64) for a in (dy, dres, x, mean, rstd, *params))
    )
    for k, got in enumerate(fused):
        assert rel_err(got, ref[k]) <= F32_TOL, k
