"""Launchers of kernels/gemm_tf32.cu (WMMA TF32 tensor-core GEMMs, 128 x 128 tiles)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aicfc.runtime.cuda.abi import Launch
from aicfc.runtime.cuda.launchers.common import LoadContext
from aicfc.runtime.cuda.launchers.gemm import launch_tiled
from aicfc.runtime.registry import KernelSpec


def launch_gemm_tf32(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """aicfc_gemm_tf32_{nn,nt,tn,tt}: grid (N / 128, M / 128), 256 threads."""
    return launch_tiled(128, spec, ins, outs, params)
