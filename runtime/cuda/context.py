"""`DeviceContext`: the LoadContext (runtime/cuda/launchers/common.py) on the current
CuPy device.

Each CupyExecutable binds its launches with one (sharing the backend's cuBLASLt
handle); kernel tests, autotuning and benchmarks launch single kernels with one.
What it allocates (workspaces, tables) is kept in `keep` for the program's life.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aicfc.runtime.cuda.abi import CudaKernelError
from aicfc.runtime.cuda.cublaslt import CublasLt, available
from aicfc.runtime.cuda.launchers.common import cdiv


class DeviceContext:
    """The LoadContext on the current CuPy device; `keep` holds what it allocated.

    sm_count: the device's multiprocessor count (None: read from the current device).
    cublaslt: returns the cuBLASLt context to plan with (CupyBackend.cublaslt shares one
              per backend); None makes one on first use, or raises CudaKernelError
              saying why cuBLASLt cannot run here.
    """

    def __init__(
        self, sm_count: int | None = None, cublaslt: Callable[[], Any] | None = None
    ) -> None:
        import cupy

        if sm_count is None:
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
            sm_count = int(props["multiProcessorCount"])
        self.sm_count = sm_count
        self.keep: list[Any] = []
        self._cublaslt = cublaslt
        self._own_cublaslt: Any = None

    def workspace(self, nbytes: int) -> Any:
        """Zeroed bytes, at least 256 and a multiple of 256."""
        import cupy

        ws = cupy.zeros(max(256, cdiv(nbytes, 256) * 256), dtype=np.uint8)
        # The fill runs on the null stream; the program's non-blocking stream would not
        # wait for it (a ticket still being zeroed under a running reduction).
        cupy.cuda.Stream.null.synchronize()
        self.keep.append(ws)
        return ws

    def table(self, values: np.ndarray) -> Any:
        import cupy

        t = cupy.asarray(np.ascontiguousarray(values, dtype=np.int64))
        cupy.cuda.Stream.null.synchronize()  # as workspace(): uploaded before any launch
        self.keep.append(t)
        return t

    def cublaslt(self) -> Any:
        if self._cublaslt is not None:
            return self._cublaslt()
        if self._own_cublaslt is None:
            reason = available()
            if reason is not None:
                raise CudaKernelError(f"cuBLASLt kernels cannot run: {reason}")
            self._own_cublaslt = CublasLt()
        return self._own_cublaslt
