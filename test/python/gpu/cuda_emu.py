"""Run kernels/*.cu on the CPU through cuda_emu.h, behind the backend's real launchers.

    lib = build("gemm_small.cu")          # g++ -std=c++20, cached per source content
    fn = EmuFunction(lib, "aicfc_gemm_skinny_f32_nt")
    fn((grid), (block), args)              # the call signature of a cupy.RawKernel
    fn((grid), (block), args, shared_mem=n)  # n bytes of dynamic shared memory per block
    EmuFunction(lib, symbol, cooperative=True)  # every block's threads alive at once

`EmuArray` wraps a NumPy array so that it looks like a CuPy array to
runtime/cuda/launchers/ (shape, dtype, nbytes, data.ptr); `EmuContext` is the
LoadContext that launchers ask for workspaces and tables. A test replaces
`get_function` of aicfc.runtime.cuda.abi by
`lambda spec: EmuFunction(build(spec.source), spec.symbol)` and runs each
`KernelLaunch` with `run(launch)`: the launcher's grid, block and ABI-converted
scalars reach the emulated kernel exactly as they would reach the GPU.

For checking index math and arithmetic of small cases without a GPU; not timing.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parents[2] / "kernels"
CXX = shutil.which("g++")

_CALL = r"""
#include <type_traits>
#include <utility>
namespace emu {
template <typename P> P from_bits(uint64_t b) {
  if constexpr (std::is_pointer_v<P>) return reinterpret_cast<P>(b);
  else if constexpr (std::is_floating_point_v<P>) { double d; std::memcpy(&d, &b, 8); return (P)d; }
  else return (P)(int64_t)b;
}
template <typename... P, size_t... I>
void call_impl(void (*f)(P...), const uint64_t* a, std::index_sequence<I...>) {
  f(from_bits<P>(a[I])...);
}
template <typename... P> void call(void (*f)(P...), const uint64_t* a) {
  call_impl(f, a, std::index_sequence_for<P...>{});
}
}  // namespace emu
"""

_LIBS: dict[str, ctypes.CDLL] = {}
_PROBE = "#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n"


def unavailable_reason() -> str | None:
    """Why kernels cannot be emulated here (no g++, or one without C++20 <barrier>)."""
    if CXX is None:
        return "g++ is not installed"
    work = Path(tempfile.mkdtemp(prefix="aicfc-emu-probe-"))
    (work / "probe.cc").write_text(_PROBE)
    done = subprocess.run(
        [CXX, "-std=c++20", "-pthread", str(work / "probe.cc"), "-o", str(work / "probe")],
        capture_output=True,
        text=True,
    )
    shutil.rmtree(work, ignore_errors=True)
    return None if done.returncode == 0 else f"{CXX} lacks C++20 <barrier>: {done.stderr[:200]}"


def kernel_symbols(source_text: str) -> list[str]:
    """The `extern "C"` kernel names of a .cu file, macro instantiations expanded by cpp."""
    return re.findall(r"\b(aicfc_\w+)\s*\(", source_text)


def build(source: str) -> ctypes.CDLL:
    """kernels/<source> compiled for the CPU with a wrapper `emu_<symbol>` per kernel
    (cached per content of the source, every kernels/*.cuh and the emulator)."""
    if CXX is None:
        raise RuntimeError("g++ is not installed")
    path = KERNELS / source
    headers = "".join(h.read_text() for h in sorted(KERNELS.glob("*.cuh")))
    text = path.read_text() + headers
    tools = (HERE / "cuda_emu.h").read_text() + Path(__file__).read_text()
    key = hashlib.sha256((text + tools).encode()).hexdigest()[:16]
    if key in _LIBS:
        return _LIBS[key]
    work = Path(tempfile.gettempdir()) / f"aicfc-emu-{key}"
    work.mkdir(exist_ok=True)
    lib_path = work / (path.stem + ".so")
    if not lib_path.exists():
        pre = subprocess.run(
            [
                CXX,
                "-std=c++20",
                "-E",
                "-P",
                "-include",
                str(HERE / "cuda_emu.h"),
                f"-I{KERNELS}",
                "-x",
                "c++",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        entries = sorted(set(re.findall(r'extern "C"\s+void\s+(aicfc_\w+)\s*\(', pre)))
        wrappers = "".join(
            f'extern "C" void emu_{s}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
            f"unsigned by, unsigned bz, unsigned smem, const uint64_t* a) {{ emu::launch("
            f"{{gx, gy, gz}}, {{bx, by, bz}}, [&] {{ emu::call({s}, a); }}, smem); }}\n"
            + f'extern "C" void emu_coop_{s}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
            f"unsigned by, unsigned bz, unsigned smem, const uint64_t* a) {{ "
            f"emu::launch_cooperative({{gx, gy, gz}}, {{bx, by, bz}}, "
            f"[&] {{ emu::call({s}, a); }}, smem); }}\n"
            for s in entries
        )
        unit = work / (path.stem + "_emu.cc")
        unit.write_text(f'#include "{path}"\n{_CALL}\n{wrappers}')
        done = subprocess.run(
            [
                CXX,
                "-std=c++20",
                "-O1",
                "-shared",
                "-fPIC",
                "-pthread",
                "-w",
                "-include",
                str(HERE / "cuda_emu.h"),
                f"-I{KERNELS}",
                str(unit),
                "-o",
                str(lib_path),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"g++ could not build kernels/{source} for the emulator:\n" + done.stderr[-4000:]
            )
    lib = ctypes.CDLL(str(lib_path))
    _LIBS[key] = lib
    return lib


def _bits(arg: Any) -> int:
    """One kernel argument as the uint64 the wrapper unpacks (pointer, integer, double bits)."""
    if isinstance(arg, EmuArray):
        return arg.data.ptr
    if isinstance(arg, np.floating):
        return int(np.array(float(arg), dtype=np.float64).view(np.uint64))
    if isinstance(arg, np.bool_):
        return int(bool(arg))
    return int(arg) & (2**64 - 1)


class EmuFunction:
    """A kernel of an emulated module, called like a cupy.RawKernel.

    cooperative: run every block's threads at once (cuda_emu.h `launch_cooperative`), as
    a kernel with a grid-wide barrier needs; else the blocks run one after another."""

    def __init__(self, lib: ctypes.CDLL, symbol: str, cooperative: bool = False):
        self.symbol = symbol
        self.fn = getattr(lib, f"emu_coop_{symbol}" if cooperative else f"emu_{symbol}")
        self.fn.restype = None

    def __call__(
        self,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: tuple[Any, ...],
        shared_mem: int = 0,
    ) -> None:
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        packed = (ctypes.c_uint64 * max(1, len(args)))(*[_bits(a) for a in args])
        self.fn(*[ctypes.c_uint(int(v)) for v in (*g, *b, shared_mem)], packed)


@dataclass
class _Ptr:
    ptr: int


class EmuArray:
    """A NumPy array dressed as a device array (shape, dtype, nbytes, data.ptr)."""

    def __init__(self, array: np.ndarray):
        self.array = np.ascontiguousarray(array)
        self.shape = self.array.shape
        self.dtype = self.array.dtype
        self.nbytes = self.array.nbytes
        self.data = _Ptr(self.array.ctypes.data)


class EmuContext:
    """The LoadContext of runtime/cuda/launchers/common.py over host memory."""

    sm_count = 132

    def __init__(self) -> None:
        self.keep: list[EmuArray] = []

    def workspace(self, nbytes: int) -> EmuArray:
        ws = EmuArray(np.zeros(max(256, nbytes), dtype=np.uint8))
        self.keep.append(ws)
        return ws

    def table(self, values: np.ndarray) -> EmuArray:
        t = EmuArray(np.ascontiguousarray(values, dtype=np.int64))
        self.keep.append(t)
        return t

    def cublaslt(self) -> Any:
        raise RuntimeError("cuBLASLt kernels are not emulated")


class NullStream:
    """`with stream:` for KernelLaunch.__call__."""

    def __enter__(self) -> NullStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
