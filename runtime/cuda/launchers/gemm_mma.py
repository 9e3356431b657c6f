"""Launchers of kernels/gemm_mma.cu: the tensor-core latency GEMMs for small products.

The mma kernels keep gemm_small.cu's split-K contract (32x32 output tiles, the K chunks
of `split_k_plan`, 256 threads, the same workspace of tickets, column sums and partials),
so they bind exactly as the split-K kernels do; only their operand and result dtypes
differ, and those the registry rows state (runtime/registry_cuda_mma.py).
"""

from __future__ import annotations

from aicfc.runtime.cuda.launchers.common import Launcher
from aicfc.runtime.cuda.launchers.gemm_small import launch_gemm_epilogue_grad, launch_gemm_splitk

launch_gemm_mma: Launcher = launch_gemm_splitk
"""aicfc_gemm_mma_<form>_*: (A, B[, bias]) -> (Y[, Z]), grid (N / 32, M / 32, splits)."""

launch_epilogue_grad_mma: Launcher = launch_gemm_epilogue_grad
"""aicfc_gemm_epilogue_grad_mma_<form>_*: (A, B, saved) -> (dZ, dbias), the same grid."""
