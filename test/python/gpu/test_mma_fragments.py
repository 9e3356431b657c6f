"""kernels/mma.cuh: the tensor-core fragment layouts and conversions that every mma kernel
builds on, through test/python/gpu/mma_probe.cu (one warp, one product).

Each case loads random A, B and C, runs D = A B + C with the fragments placed by the
header's formulas (directly or through ldmatrix) and compares D with the float64 NumPy
product of the inputs rounded as the kernel rounds them (bf16 / f16: ml_dtypes; tf32:
round to nearest, ties away, 10 mantissa bits). The products of rounded inputs are exact in
float32 and only the float32 sum order differs, so the tolerance is 1e-6 relative to the
sum of |terms|. On the emulator always; on the GPU (the hardware's layouts) when CuPy and
a device exist."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuFunction

PROBE = Path(__file__).resolve().parent / "mma_probe.cu"
LOW = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 -> tf32 as cvt.rna: add half an ulp of the 10-bit mantissa, truncate."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return u.view(np.float32)


def emulated_runner() -> Callable[..., None]:
    reason = cuda_emu.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    lib = cuda_emu.build(str(PROBE))

    def run(symbol: str, arrays: list[np.ndarray], scalars: tuple[int, ...] = (), grid=1) -> None:
        wrapped = [EmuArray(a) for a in arrays]
        EmuFunction(lib, symbol)((grid,), (32,), (*wrapped, *scalars))
        for a, w in zip(arrays, wrapped, strict=True):
            a[...] = w.array

    return run


def gpu_runner() -> Callable[..., None]:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the GPU case needs it")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device: the hardware's fragment layouts cannot be checked")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"no CUDA device ({e}): the hardware's fragment layouts cannot be checked")
    from aicfc.runtime.cuda.abi import compile_options

    module = cupy.RawModule(code=PROBE.read_text(), options=compile_options())

    def run(symbol: str, arrays: list[np.ndarray], scalars: tuple[int, ...] = (), grid=1) -> None:
        dev = [cupy.asarray(a) for a in arrays]
        args = (*dev, *(np.int32(s) for s in scalars))
        module.get_function(symbol)((grid,), (32,), args)
        cupy.cuda.runtime.deviceSynchronize()
        for a, d in zip(arrays, dev, strict=True):
            a[...] = cupy.asnumpy(d)

    return run


RUNNERS = {"emulated": emulated_runner, "gpu": pytest.param(gpu_runner, marks=pytest.mark.gpu)}


@pytest.fixture(params=list(RUNNERS.values()), ids=list(RUNNERS))
def run(request: Any) -> Callable[..., None]:
    return request.param()


def check(d: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64 + c
    scale = np.abs(a64) @ np.abs(b64) + np.abs(c)
    err = np.abs(d - want) / scale
    assert err.max() <= 1e-6, (err.max(), np.unravel_index(err.argmax(), err.shape))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("via_ldmatrix", [0, 1], ids=["registers", "ldmatrix"])
def test_m16n8k16(run, dtype, via_ldmatrix):
    rng = np.random.default_rng(16 + via_ldmatrix)
    a = rng.standard_normal((16, 16)).astype(LOW[dtype])
    b = rng.standard_normal((16, 8)).astype(LOW[dtype])
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = c.copy()
    run(
        "aicfc_probe_mma_m16n8k16",
        [a.view(np.uint16), b.view(np.uint16), d],
        (int(dtype == "bf16"), via_ldmatrix),
    )
    check(d, a, b, c)


def test_m16n8k8_tf32(run):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = c.copy()
    run("aicfc_probe_mma_m16n8k8_tf32", [a, b, d])
    check(d, tf32_round(a), tf32_round(b), c)


def test_conversions(run):
    rng = np.random.default_rng(2)
    ties = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-8, 0.0, -0.0], np.float32)
    x = np.concatenate([(rng.standard_normal(58) * 100).astype(np.float32), ties])
    words = np.zeros(64, np.uint32)
    bf, hf = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
    run("aicfc_probe_pack", [x, words, bf, hf], (64,), grid=2)
    assert (words.view(np.float32) == tf32_round(x)).all()
    assert (bf.view(np.uint16) == x.astype(ml_dtypes.bfloat16).view(np.uint16)).all()
    assert (hf.view(np.uint16) == x.astype(np.float16).view(np.uint16)).all()


def test_probe_compiles_for_sm90(tmp_path):
    """The PTX branch of mma.cuh (not seen by the emulator) through nvcc and ptxas."""
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )
    if nvcc is None:
        pytest.skip("nvcc is not installed (CUDA toolkit missing): mma.cuh's PTX is unchecked")
    out = tmp_path / "probe.cubin"
    cmd = [nvcc, "-arch=sm_90", "-cubin", "-I", str(cuda_emu.KERNELS), "-o", str(out), str(PROBE)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
