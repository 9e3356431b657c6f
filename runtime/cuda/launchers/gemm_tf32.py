"""Launchers of kernels/gemm_tf32.cu (WMMA TF32 tensor-core GEMMs)."""

from __future__ import annotations

from functools import partial

from aicfc.runtime.cuda.launchers.common import Launcher
from aicfc.runtime.cuda.launchers.gemm import launch_tiled

launch_gemm_tf32: Launcher = partial(launch_tiled, 128)
"""aicfc_gemm_tf32_{nn,nt,tn,tt}: 128 x 128 tiles, grid (N / 128, M / 128), 256 threads."""
