"""One ABI and one error path for every CUDA launch (docs/design.md#one-launch-abi).

- Modules: each `kernels/*.cu` is compiled once per process with `cupy.RawModule`
  (NVRTC, for the device's architecture; CuPy caches the binary on disk under
  `CUPY_CACHE_DIR`). On load the module's `aicfc_abi_version` constant is read and
  compared with `KERNEL_ABI_VERSION`; a mismatch is an error naming the file.
- Arguments: input buffers, then output buffers (then a workspace where the kernel
  asks for one), then the scalars in the registry's `abi` order, each converted to
  exactly its C type. CuPy's RawKernel does not type-check: a Python float passed
  to a `float` parameter arrives as 0.0 and an np.float32 in a `double` as garbage,
  so nothing reaches a kernel without `to_c_scalar`.
- Errors: a failed compile, a refused launch or a CUDA error seen while running a
  kernel raises `CudaKernelError` naming the kernel, its symbol, the buffers'
  shapes and the CUDA error.

Imports CuPy lazily (only `load_module` and `KernelLaunch.__call__` touch it), so
the conversions are testable without a GPU.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aicfc.runtime.errors import ExecError
from aicfc.runtime.registry import KernelSpec

KERNEL_ABI_VERSION = 1
"""The launch ABI the Python side speaks; kernels/common.cuh defines the same number."""

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
"""Where the .cu sources live (the installed `aicfc/kernels` package data)."""

C_SCALAR_TYPES: dict[str, type[np.generic]] = {
    "int32_t": np.int32,
    "int64_t": np.int64,
    "uint32_t": np.uint32,
    "uint64_t": np.uint64,
    "float": np.float32,
    "double": np.float64,
    "bool": np.bool_,
}
"""C type of a registry ABI entry -> the NumPy scalar type CuPy passes by value."""


STATIC_SHARED_LIMIT = 48 * 1024
"""Bytes of dynamic shared memory a kernel gets without raising its attribute."""


class CudaKernelError(ExecError):
    """A CUDA kernel failed to compile, load or run; the message names kernel and shapes."""


def _kernel_dir() -> Path:
    if KERNEL_DIR.is_dir():
        return KERNEL_DIR
    # Installed as the aicfc.kernels package.
    import aicfc.kernels

    return Path(aicfc.kernels.__file__).resolve().parent


def to_c_scalar(kernel: str, name: str, ctype: str, value: object) -> np.generic:
    """`value` as the NumPy scalar of C type `ctype` (exact width and kind).

    Raises CudaKernelError naming the kernel and parameter for an unknown C type,
    a value of the wrong kind (a float for an int parameter, a string), or an
    integer that does not fit.
    """
    where = f'kernel "{kernel}": scalar {name!r} ({ctype})'
    if ctype not in C_SCALAR_TYPES:
        raise CudaKernelError(f"{where}: unknown C type (known: {', '.join(C_SCALAR_TYPES)})")
    np_type = C_SCALAR_TYPES[ctype]
    if isinstance(value, str | bytes) or value is None:
        raise CudaKernelError(f"{where}: got {value!r}, expected a number")
    if np_type is np.bool_:
        return np.bool_(bool(value))
    if np.issubdtype(np_type, np.integer):
        if isinstance(value, float | np.floating) and not float(value).is_integer():
            raise CudaKernelError(f"{where}: got the non-integer {value!r}")
        iv = int(value)  # type: ignore[call-overload]
        info = np.iinfo(np.dtype(np_type))
        if not info.min <= iv <= info.max:
            raise CudaKernelError(f"{where}: {iv} does not fit in [{info.min}, {info.max}]")
        return np_type(iv)
    return np_type(float(value))  # type: ignore[arg-type]


def pack_scalars(spec: KernelSpec, values: Mapping[str, object]) -> tuple[np.generic, ...]:
    """The scalars of `spec.abi`, in order and converted; a missing name is an error."""
    out = []
    for name, ctype in spec.abi:
        if name not in values:
            raise CudaKernelError(
                f'kernel "{spec.name}": its ABI lists scalar {name!r} but its launcher gives only '
                f"{', '.join(sorted(values)) or 'none'}"
            )
        out.append(to_c_scalar(spec.name, name, ctype, values[name]))
    return tuple(out)


# ----------------------------------------------------------------------------
# Modules
# ----------------------------------------------------------------------------

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}
_LOCK = threading.Lock()


def toolkit_include() -> Path | None:
    """A CUDA toolkit include folder that has crt/mma.h (WMMA), or None.

    CuPy's wheels point NVRTC at the pip-installed headers, whose mma.h includes a
    crt/mma.h they do not ship; a full toolkit (CUDA_PATH, CUDA_HOME, the nvcc on
    PATH, /usr/local/cuda) has it.
    """
    candidates = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    try:
        import cupy

        candidates.append(cupy.cuda.get_cuda_path())
    except Exception:  # no CuPy or no toolkit found by it
        pass
    for c in candidates:
        if c and Path(c, "include", "crt", "mma.h").is_file():
            return Path(c, "include")
    return None


def compile_options() -> tuple[str, ...]:
    """NVRTC options: our include folder, a toolkit's (for mma.h), C++17."""
    opts = [f"-I{_kernel_dir()}", "-std=c++17"]
    include = toolkit_include()
    if include is not None:
        opts.append(f"-I{include}")
    return tuple(opts)


def load_module(source: str) -> Any:
    """The cupy.RawModule of `kernels/<source>`, compiled and ABI-checked once per process.

    Raises CudaKernelError naming the file for a missing source, a compile error
    (with the compiler's log) or an ABI version mismatch.
    """
    import cupy

    options = compile_options()
    key = (source, options)
    with _LOCK:
        if key in _MODULES:
            return _MODULES[key]
        path = _kernel_dir() / source
        if not path.is_file():
            raise CudaKernelError(f"kernel source {source!r} not found in {_kernel_dir()}")
        module = cupy.RawModule(code=path.read_text(), options=options)
        try:
            module.compile()
        except Exception as e:  # cupy's CompileException carries the NVRTC log
            raise CudaKernelError(f"kernels/{source} failed to compile: {e}") from None
        version = _read_abi_version(module, source)
        if version != KERNEL_ABI_VERSION:
            raise CudaKernelError(
                f"kernels/{source} speaks launch ABI version {version}, this runtime speaks "
                f"{KERNEL_ABI_VERSION}: rebuild the kernels and the runtime from one checkout"
            )
        _MODULES[key] = module
        return module


def _read_abi_version(module: Any, source: str) -> int:
    import cupy

    try:
        ptr = module.get_global("aicfc_abi_version")
    except Exception as e:
        raise CudaKernelError(
            f"kernels/{source} exports no aicfc_abi_version (include common.cuh and use "
            f"AICFC_EXPORT_ABI_VERSION): {e}"
        ) from None
    arr = cupy.ndarray((1,), np.int32, ptr)
    return int(arr.get()[0])


def get_function(spec: KernelSpec) -> Any:
    """The RawKernel of a registry entry (its `source` and `symbol`)."""
    if spec.source is None or spec.symbol is None:
        raise CudaKernelError(f'kernel "{spec.name}" has no source/symbol (a library kernel)')
    module = load_module(spec.source)
    try:
        return module.get_function(spec.symbol)
    except Exception as e:
        raise CudaKernelError(
            f'kernel "{spec.name}": symbol {spec.symbol} not found in kernels/{spec.source}: {e}'
        ) from None


# ----------------------------------------------------------------------------
# Launches
# ----------------------------------------------------------------------------


def describe(arrays: Sequence[Any]) -> str:
    """ "f32[128, 784], f32[256, 784], -" for error messages (- is an absent buffer)."""
    parts = []
    for a in arrays:
        if a is None:
            parts.append("-")
        else:
            parts.append(f"{np.dtype(a.dtype).name}{list(a.shape)}")
    return ", ".join(parts)


class Launch:
    """One step of a loaded program: call with a cupy Stream to enqueue it.

    scratch: names of scratch memory this launch writes that other launches share
    (beyond its buffers and any workspace of its own), such as a cuBLASLt
    workspace; launches naming the same scratch never run concurrently
    (runtime/schedule.py treats each name as a region they all write).
    """

    name: str
    shapes: str
    scratch: tuple[str, ...] = ()

    def __call__(self, stream: Any) -> None:
        raise NotImplementedError

    def error(self, e: BaseException, what: str = "launch") -> CudaKernelError:
        return CudaKernelError(f'kernel "{self.name}" ({self.shapes}): {what} failed: {e}')


@dataclass
class KernelLaunch(Launch):
    """A RawKernel with its grid, block and converted arguments, fixed at load."""

    name: str
    symbol: str
    function: Any
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[Any, ...]
    shapes: str
    shared_mem: int = 0
    keepalive: list[Any] = field(default_factory=list)

    def __call__(self, stream: Any) -> None:
        try:
            with stream:
                self.function(self.grid, self.block, self.args, shared_mem=self.shared_mem)
        except Exception as e:  # CuPy's CUDADriverError and argument errors
            raise self.error(e, f"launch of {self.symbol}") from None


@dataclass
class CallbackLaunch(Launch):
    """A launch issued by a Python callable (a cuBLASLt call, a memcpy) on a stream."""

    name: str
    shapes: str
    issue: Callable[[Any], None]
    keepalive: list[Any] = field(default_factory=list)
    scratch: tuple[str, ...] = ()

    def __call__(self, stream: Any) -> None:
        try:
            self.issue(stream)
        except CudaKernelError:
            raise
        except Exception as e:
            raise self.error(e) from None


def kernel_launch(
    spec: KernelSpec,
    grid: tuple[int, ...],
    block: tuple[int, ...],
    buffers: Sequence[Any],
    scalars: Mapping[str, object],
    shared_mem: int = 0,
    keepalive: Sequence[Any] = (),
) -> KernelLaunch:
    """Bind `spec`'s RawKernel to its buffers (None = null) and converted scalars; a
    `shared_mem` above 48 KB raises the function's dynamic shared-memory limit first."""
    args: list[Any] = [np.uint64(0) if b is None else b for b in buffers]
    args.extend(pack_scalars(spec, scalars))
    function = get_function(spec)
    if shared_mem > STATIC_SHARED_LIMIT and hasattr(function, "max_dynamic_shared_size_bytes"):
        function.max_dynamic_shared_size_bytes = shared_mem  # cudaFuncSetAttribute, once

    if any(g < 1 for g in grid) or any(b < 1 for b in block):
        raise CudaKernelError(
            f'kernel "{spec.name}" ({describe(buffers)}): empty launch grid {grid} x block {block}'
        )
    return KernelLaunch(
        name=spec.name,
        symbol=spec.symbol or "",
        function=function,
        grid=tuple(int(g) for g in grid),
        block=tuple(int(b) for b in block),
        args=tuple(args),
        shapes=describe(buffers),
        shared_mem=shared_mem,
        keepalive=list(keepalive),
    )
