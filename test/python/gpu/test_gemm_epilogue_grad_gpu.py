"""autodiff.gemm_epilogue_grad on the GPU: every kernel that implements it, the small
MLP's step through it, against runtime/reference.py.

The one-launch split-K kernel (gemm_small.cu) at the small config's two dX products
(128 x 10 x 256 and 128 x 256 x 256) and at ragged shapes: widths 10, 100, 255, 256
and batches 1, 7, 128, every transpose pair, replayed twice (the tickets reset); the
composites (a product, then epilogue_grad in place) of our 64x64 tile and of cuBLASLt.
Inputs are fresh random arrays, outputs poisoned with NaN; the reference runs in float64;
the metric is the norm-wise relative error (F32_TOL = 1e-5, strict fp32).
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime import reference
from gpu.gpu_support import F32_TOL, TF32_TOL, gpu, randn, rel_err
from gpu.test_kernels_gpu import launch

pytestmark = gpu

PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}


def run_case(
    kernel: str, m: int, n: int, k: int, act: str, seed: int, repeat: int = 2
) -> tuple[float, float]:
    """Errors of (dZ, dbias) of `kernel` on op(A) [m, k], op(B) [k, n], saved [m, n]."""
    rng = np.random.default_rng(seed)
    pair = kernel.rsplit("_", 1)[1] if kernel.rsplit("_", 1)[1] in PAIRS else "nn"
    ta, tb = PAIRS[pair]
    a, b, saved = randn(rng, m, k), randn(rng, k, n), randn(rng, m, n, scale=2.0)
    ins = [a.T.copy() if ta else a, b.T.copy() if tb else b, saved]
    params = {"act": act, "transpose_a": ta, "transpose_b": tb}
    dz, db = launch(kernel, ins, [((m, n), np.float32), ((n,), np.float32)], params, repeat=repeat)
    ref_dz, ref_db = reference.gemm_epilogue_grad(
        a.astype(np.float64), b.astype(np.float64), saved.astype(np.float64), act=act
    )
    return rel_err(dz, ref_dz), rel_err(db, ref_db)


@pytest.mark.parametrize(("m", "n", "k"), [(128, 256, 10), (128, 256, 256)], ids=["dx3", "dx2"])
@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_one_launch_kernel_at_the_small_configs_dx_products(m, n, k, act):
    edz, edb = run_case("cuda.gemm_epilogue_grad_splitk_nn", m, n, k, act, m + n + k)
    assert edz < F32_TOL and edb < F32_TOL


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("batch", [1, 7, 128])
@pytest.mark.parametrize("width", [10, 100, 255, 256])
def test_one_launch_kernel_at_ragged_shapes(pair, batch, width):
    # the dX product of a layer of `width` outputs below one of `width` inputs
    edz, edb = run_case(
        f"cuda.gemm_epilogue_grad_splitk_{pair}", batch, width, width, "relu", batch * width
    )
    assert edz < F32_TOL and edb < F32_TOL


@pytest.mark.parametrize(
    ("kernel", "tol"),
    [
        ("cuda.gemm_epilogue_grad_f32_s64_nn", F32_TOL),
        ("cuda.gemm_epilogue_grad_f32_s64_tt", F32_TOL),
        ("cuda.gemm_epilogue_grad_skinny_nn", F32_TOL),
        ("cuda.gemm_epilogue_grad_cublaslt_f32", F32_TOL),
        ("cuda.gemm_epilogue_grad_cublaslt_tf32", TF32_TOL),
    ],
)
def test_composites_run_the_product_then_the_epilogue_in_place(kernel, tol):
    k = 10 if "skinny" in kernel else 300
    edz, edb = run_case(kernel, 700, 513, k, "gelu", 5)
    assert edz < tol and edb < tol


def test_the_small_mlp_trains_like_the_numpy_backend_through_the_fused_backward():
    """The small config (784-256-256-10, batch 128, Adam) for 5 replayed steps: its two
    dX products run the one-launch kernel, and params match the NumPy backend within
    1e-4 (fp32 after N steps)."""
    from aicfc import nn, optim
    from aicfc.backends import get_backend
    from aicfc.program import Program
    from aicfc.runtime.cuda.backend import CupyBackend

    def model() -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )

    rng = np.random.default_rng(0)
    gpu_model, cpu_model = model(), model()
    cpu_model.load_state_dict(gpu_model.state_dict())
    on_gpu = Program(gpu_model, "cross_entropy", optim.Adam(lr=1e-3), CupyBackend())
    on_cpu = Program(cpu_model, "cross_entropy", optim.Adam(lr=1e-3), get_backend("numpy"))
    for _ in range(5):
        x = rng.standard_normal((128, 784)).astype(np.float32)
        y = rng.integers(0, 10, 128).astype(np.int32)
        assert abs(float(on_gpu.step(x, y)) - float(on_cpu.step(x, y))) < 1e-4
    kernels = on_gpu.executable().kernels
    assert kernels.count("cuda.gemm_epilogue_grad_splitk_nn") == 2
    assert "cuda.epilogue_grad_f32" not in kernels
    got, want = on_gpu.state_dict(), on_cpu.state_dict()
    for name in want:
        assert rel_err(got[name], want[name]) < 1e-4, name
