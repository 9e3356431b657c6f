"""Launchers of kernels/gemm.cu (SIMT tiled GEMMs), and the GEMM operands every GEMM reads.

    Y [M, N] = act(op(A) [M, K] op(B) [K, N] (+ bias [N])), Z [M, N] the pre-activation

`gemm_operands` checks a matmul/gemm_epilogue launch's buffers against each
other once for every GEMM family (gemm.cu, gemm_tf32.cu, gemm_small.cu,
cuBLASLt); `Gemm.buffers` and `Gemm.scalars` are the start of every GEMM
kernel's ABI.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    ACT_CODES,
    THREADS,
    Buffers,
    Launcher,
    LoadContext,
    Params,
    act_code,
    cdiv,
    expect_numel,
    matrix_shape,
    param,
)
from aicfc.runtime.registry import KernelSpec


def gemm_mnk(a: Any, b: Any, ta: bool, tb: bool) -> tuple[int, int, int]:
    """(M, N, K) of op(A) op(B) for A, B of shapes [M, K] / [K, M] and [K, N] / [N, K]."""
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != kb:
        raise CudaKernelError(
            f"GEMM operands disagree on K: op(A) is [{m}, {k}], op(B) [{kb}, {n}]"
        )
    return int(m), int(n), int(k)


@dataclass(frozen=True)
class Gemm:
    """The buffers of a matmul/gemm_epilogue launch, checked against each other:
    Y [M, N] = act(op(A) [M, K] op(B) [K, N] (+ bias [N])), Z [M, N] the pre-activation."""

    a: Any
    b: Any
    bias: Any  # None: no bias
    y: Any
    z: Any  # None: the pre-activation is not kept
    act: str
    transpose_a: bool
    transpose_b: bool
    m: int
    n: int
    k: int

    @property
    def buffers(self) -> list[Any]:
        """A, B, bias|None, Y, Z|None: the buffers of every GEMM kernel's ABI, in order."""
        return [self.a, self.b, self.bias, self.y, self.z]

    def scalars(self) -> dict[str, object]:
        """M, N, K and the act code, the scalars every GEMM kernel's ABI starts with."""
        return {"M": self.m, "N": self.n, "K": self.k, "act": ACT_CODES[self.act]}


def gemm_operands(spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params) -> Gemm:
    """The GEMM of a matmul/gemm_epilogue launch; CudaKernelError naming the kernel for an
    unknown activation, operands that disagree on K, or a Y, Z or bias of another size."""
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    y = outs[0]
    z = outs[1] if len(outs) > 1 else None
    act = str(param(params, "act", "none"))
    act_code(spec, act)  # refuses an activation the kernels do not know
    ta, tb = bool(param(params, "transpose_a")), bool(param(params, "transpose_b"))
    matrix_shape(spec, "A", a), matrix_shape(spec, "B", b)
    m, n, k = gemm_mnk(a, b, ta, tb)
    expect_numel(spec, n, bias=bias)
    expect_numel(spec, m * n, Y=y, Z=z)
    return Gemm(a, b, bias, y, z, act, ta, tb, m, n, k)


def launch_tiled(
    tile: int, spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """A tiled GEMM of `tile` x `tile` output blocks: grid (N / tile, M / tile), 256 threads."""
    g = gemm_operands(spec, ins, outs, params)
    grid = (cdiv(g.n, tile), cdiv(g.m, tile))
    if grid[1] > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": M = {g.m} needs more than 65535 row blocks')
    return [kernel_launch(spec, grid, (THREADS,), g.buffers, g.scalars())]


launch_gemm_64: Launcher = partial(launch_tiled, 64)
"""aicfc_gemm_f32_s64_{nn,nt,tn,tt}: 64 x 64 tiles."""

launch_gemm_128: Launcher = partial(launch_tiled, 128)
"""aicfc_gemm_f32_{nn,nt,tn,tt}: 128 x 128 tiles."""
