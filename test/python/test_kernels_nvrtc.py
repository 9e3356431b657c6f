"""Every kernels/*.cu compiles under NVRTC with the runtime's own options (CI has no GPU).

The CuPy runtime compiles each source with NVRTC (runtime/cuda/abi.py, cupy.RawModule),
not with nvcc: no standard header is on its path and `__CUDACC_RTC__` selects the
typedefs of kernels/common.cuh, so a source can pass nvcc (test_kernels_compile.py) and
still fail at load time on the GPU. NVRTC compiles without a device; it comes from the
`nvidia-cuda-nvrtc` wheel of the test extra, called through ctypes (nvrtc.h's C API).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aicfc.runtime.cuda.abi import compile_options

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SOURCES = sorted(p.name for p in KERNELS.glob("*.cu"))


def _libnvrtc() -> Path | None:
    spec = importlib.util.find_spec("nvidia.cu13")
    for root in spec.submodule_search_locations or [] if spec else []:
        found = sorted(Path(root, "lib").glob("libnvrtc.so*"))
        if found:
            return found[0]
    return None


LIB = _libnvrtc()
pytestmark = pytest.mark.skipif(
    LIB is None, reason="NVRTC is not installed (the nvidia-cuda-nvrtc wheel of aicfc[test])"
)


def nvrtc_compile(path: Path, options: tuple[str, ...]) -> tuple[int, str]:
    """NVRTC's result code (0 is success) and log for the source at `path` under `options`."""
    nvrtc = ctypes.CDLL(str(LIB))
    prog = ctypes.c_void_p()
    code = path.read_bytes()
    rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), code, path.name.encode(), 0, None, None)
    assert rc == 0, f"nvrtcCreateProgram({path.name}) returned {rc}"
    try:
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        rc = nvrtc.nvrtcCompileProgram(prog, len(options), argv)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        return rc, log.value.decode(errors="replace")
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def test_nvrtc_refuses_a_source_the_typedefs_do_not_cover(tmp_path):
    """The check can fail: a type that needs <cstdint> under nvcc is an NVRTC error."""
    bad = tmp_path / "bad.cu"
    bad.write_text('#include "common.cuh"\n__global__ void k(int16_t* x) { x[0] = 1; }\n')
    rc, log = nvrtc_compile(bad, (f"-I{KERNELS}", "-std=c++17"))
    assert rc != 0 and "int16_t" in log


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[int, str]]:
    """Every source's (result, log), compiled on all cores (ctypes releases the GIL)."""
    options = (*compile_options(), "--gpu-architecture=sm_90")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(lambda s: nvrtc_compile(KERNELS / s, options), SOURCES)
        return dict(zip(SOURCES, results, strict=True))


@pytest.mark.parametrize("source", SOURCES)
def test_compiles_under_nvrtc_as_the_runtime_loads_it(source, compiled):
    rc, log = compiled[source]
    assert rc == 0, f"NVRTC failed on kernels/{source}:\n{log}"
