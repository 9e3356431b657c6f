"""Launchers of kernels/gemm.cu (SIMT tiled GEMMs), and the GEMM operands every GEMM reads.

    Y [M, N] = act(op(A) [M, K] op(B) [K, N] (+ bias [N])), Z [M, N] the pre-activation

`gemm_operands` checks a matmul/gemm_epilogue launch's buffers against each
other once for every GEMM family (gemm.cu, gemm_tf32.cu, gemm_small.cu,
cuBLASLt); `Gemm.buffers` and `Gemm.scalars` are the start of every GEMM
kernel's ABI. Operands of rank >= 3 are products in torch.matmul's batched form,
read as runtime/selector.py `gemm_dims` says: one product with A's leading dims folded
into M where B is a matrix (`Linear` on [B, T, D]), else `batch` strided products,
which only the batched kernels (gemm.cu's and cuBLASLt's) take.
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
    param,
)
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.selector import GemmDims, gemm_dims


def gemm_mnk(a: Any, b: Any, ta: bool, tb: bool) -> tuple[int, int, int]:
    """(M, N, K) of op(A) op(B) for A, B of shapes [M, K] / [K, M] and [K, N] / [N, K]."""
    g = gemm_batch(a, b, ta, tb)
    return g.m, g.n, g.k


def gemm_batch(a: Any, b: Any, ta: bool, tb: bool) -> GemmDims:
    """The GEMM of op(A) op(B) (`gemm_dims` of the buffers' shapes); CudaKernelError when
    the operands disagree on K, have a rank below 2 or batch dims that broadcast partly."""
    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    try:
        g = gemm_dims(sa, sb, ta, tb)
    except ValueError as e:
        raise CudaKernelError(f"GEMM operands {list(sa)} and {list(sb)}: {e}") from None
    if g is None:
        raise CudaKernelError(
            f"GEMM operands {list(sa)} and {list(sb)} are not matrices or strided batches of them"
        )
    return g


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
    batch: int = 1
    stride_a: int = 0
    stride_b: int = 0

    @property
    def buffers(self) -> list[Any]:
        """A, B, bias|None, Y, Z|None: the buffers of every GEMM kernel's ABI, in order."""
        return [self.a, self.b, self.bias, self.y, self.z]

    def scalars(self) -> dict[str, object]:
        """M, N, K and the act code, the scalars every GEMM kernel's ABI starts with."""
        return {"M": self.m, "N": self.n, "K": self.k, "act": ACT_CODES[self.act]}


def gemm_operands(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, batched: bool = False
) -> Gemm:
    """The GEMM of a matmul/gemm_epilogue launch; CudaKernelError naming the kernel for an
    unknown activation, operands that disagree on K, a Y, Z or bias of another size, or a
    batch of products for a kernel that runs one (`batched`: it runs any batch)."""
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    y = outs[0]
    z = outs[1] if len(outs) > 1 else None
    act = str(param(params, "act", "none"))
    act_code(spec, act)  # refuses an activation the kernels do not know
    ta, tb = bool(param(params, "transpose_a")), bool(param(params, "transpose_b"))
    try:
        g = gemm_batch(a, b, ta, tb)
    except CudaKernelError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None
    if g.batch > 1 and not batched:
        raise CudaKernelError(
            f'kernel "{spec.name}": operands {list(a.shape)} and {list(b.shape)} are a batch of '
            f"{g.batch} products; this kernel runs one"
        )
    expect_numel(spec, g.n, bias=bias)
    expect_numel(spec, g.batch * g.m * g.n, Y=y, Z=z)
    return Gemm(a, b, bias, y, z, act, ta, tb, g.m, g.n, g.k, g.batch, g.stride_a, g.stride_b)


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

MAX_GRID_Z = 65535


def launch_gemm_batched(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """aicfc_gemm_batched_f32_*: 64 x 64 tiles, grid (N / 64, M / 64, batch), 256 threads."""
    g = gemm_operands(spec, ins, outs, params, batched=True)
    grid = (cdiv(g.n, 64), cdiv(g.m, 64), g.batch)
    if grid[1] > MAX_GRID_Z or g.batch > MAX_GRID_Z:
        raise CudaKernelError(
            f'kernel "{spec.name}": M = {g.m} or a batch of {g.batch} exceeds the grid limit'
        )
    scalars = {**g.scalars(), "stride_a": g.stride_a, "stride_b": g.stride_b}
    return [kernel_launch(spec, grid, (THREADS,), g.buffers, scalars)]
