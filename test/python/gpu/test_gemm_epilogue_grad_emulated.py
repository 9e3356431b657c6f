"""autodiff.gemm_epilogue_grad's CUDA kernels on the CPU (test/python/gpu/cuda_emu.h).

The one-launch kernel (gemm_small.cu, the split-K product with the backward epilogue)
and the two-launch composite (our 64x64 product into dZ, then epilogue_grad in place),
behind the backend's real launchers, against runtime/reference.py's gemm_epilogue_grad
in float64 by norm-wise relative error (1e-5, strict fp32). Inputs are fresh random
arrays; outputs are poisoned with NaN; shapes are ragged (partial tiles and strips), and
each case runs twice so that the second launch finds its tickets back at zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def case(
    kernel: str, m: int, n: int, k: int, act: str, seed: int, ctx: EmuContext
) -> tuple[float, float, list]:
    """Run `kernel` twice on fresh operands; the errors of dZ and dbias, and the launches."""
    rng = np.random.default_rng(seed)
    ta, tb = PAIRS[kernel.rsplit("_", 1)[1]]
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    saved = (rng.standard_normal((m, n)) * 2).astype(np.float32)  # both signs for relu
    dz = EmuArray(np.full((m, n), np.nan, np.float32))
    db = EmuArray(np.full(n, np.nan, np.float32))
    ins = [EmuArray(a.T.copy() if ta else a), EmuArray(b.T.copy() if tb else b), EmuArray(saved)]
    params = {"act": act, "transpose_a": ta, "transpose_b": tb}
    launches = launches_for(registry.get(kernel), ins, [dz, db], params, ctx)
    for _ in range(2):
        for la in launches:
            la(NullStream())
    ref_dz, ref_db = reference.gemm_epilogue_grad(
        a.astype(np.float64), b.astype(np.float64), saved.astype(np.float64), act=act
    )
    return rel_err(dz.array, ref_dz), rel_err(db.array, ref_db), launches


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize(
    ("m", "n", "k", "act"),
    [(37, 45, 10, "relu"), (33, 70, 300, "gelu")],
    ids=["one_split", "four_splits"],
)
def test_one_launch_kernel_matches_the_reference(pair, m, n, k, act):
    ctx = EmuContext()
    edz, edb, launches = case(f"cuda.gemm_epilogue_grad_splitk_{pair}", m, n, k, act, m + k, ctx)
    (launch,) = launches
    splits = int(launch.args[-2])
    assert splits == (1 if k <= 32 else 4) and launch.grid[:2] == (-(-n // 32), -(-m // 32))
    assert edz < F32_TOL and edb < F32_TOL
    (ws,) = ctx.keep
    tickets = launch.grid[0] * launch.grid[1] + launch.grid[0]
    assert not ws.array[: 4 * tickets].any()  # every tile and strip ticket back at zero


@pytest.mark.parametrize("act", EPILOGUE_ACTIVATIONS)
def test_one_launch_kernel_applies_each_activation_gradient(act):
    edz, edb, _ = case("cuda.gemm_epilogue_grad_splitk_nn", 40, 33, 64, act, 3, EmuContext())
    assert edz < F32_TOL and edb < F32_TOL


@pytest.mark.parametrize("pair", ["nn", "tn"])
def test_composite_runs_the_product_then_epilogue_grad_in_place(pair):
    edz, edb, launches = case(
        f"cuda.gemm_epilogue_grad_f32_s64_{pair}", 70, 45, 33, "relu", 9, EmuContext()
    )
    assert [la.name for la in launches] == [f"cuda.matmul_f32_s64_{pair}", "cuda.epilogue_grad_f32"]
    assert edz < F32_TOL and edb < F32_TOL


@pytest.mark.parametrize(("pair", "m", "width"), [("tt", 1, 255), ("nt", 7, 100), ("tn", 1, 10)])
def test_one_launch_kernel_at_ragged_gpu_test_shapes(pair, m, width):
    """A few of test_gemm_epilogue_grad_gpu.py's ragged shapes (batch 1 and 7; widths
    10, 100, 255), checked here before they reach a GPU."""
    edz, edb, _ = case(
        f"cuda.gemm_epilogue_grad_splitk_{pair}", m, width, width, "relu", m * width, EmuContext()
    )
    assert edz < F32_TOL and edb < F32_TOL
