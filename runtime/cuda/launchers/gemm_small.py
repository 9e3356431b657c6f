"""Launchers of kernels/gemm_small.cu: the latency GEMMs for small products.

- skinny: one side (M, N or K) at most 32; a thread per output when K is short,
  else a warp per index of the long side (`skinny_mode`).
- split-K: K cut into chunks of 64 to 128 over the blocks of a third grid
  dimension, partial sums in a workspace, the last block of each tile adding them
  (`split_k_plan`).
- gemm_epilogue_grad: the split-K product with the backward epilogue
  (dZ = product * act'(saved), dbias = column sums of dZ) in the same launch.
"""

from __future__ import annotations

from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    LoadContext,
    Params,
    act_code,
    cdiv,
    expect_numel,
    param,
)
from aicfc.runtime.cuda.launchers.gemm import gemm_operands
from aicfc.runtime.registry import KernelSpec


def skinny_mode(m: int, n: int, k: int) -> int:
    """gemm_small.cu's mode for the shortest side: 0 = K (ties first), 1 = N, 2 = M."""
    short = min(m, n, k)
    return 0 if k == short else 1 if n == short else 2


def launch_gemm_skinny(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """aicfc_gemm_skinny_f32_*: a thread per output (K short) or a warp per long-side index."""
    g = gemm_operands(spec, ins, outs, params)
    m, n, k = g.m, g.n, g.k
    mode = skinny_mode(m, n, k)
    if mode and min(m, n) > 32:
        raise CudaKernelError(f'kernel "{spec.name}": (M, N, K) = {(m, n, k)} has no short side')
    work = {0: cdiv(m * n, THREADS), 1: cdiv(m, THREADS // 32), 2: cdiv(n, THREADS // 32)}[mode]
    scalars = {**g.scalars(), "mode": mode}
    return [kernel_launch(spec, (work,), (THREADS,), g.buffers, scalars)]


SPLIT_K_TILE = 32
SPLIT_K_MIN_CHUNK = 64
SPLIT_K_MAX_CHUNK = 128  # gemm_small.cu kMaxChunk: a block's whole chunk in shared memory


def split_k_plan(m: int, n: int, k: int, sm_count: int) -> tuple[int, int]:
    """(splits, k_chunk) for gemm_small.cu's split-K kernel: about two blocks per
    multiprocessor, each block at least 64 of K and at most 128, chunks a multiple of 32."""
    tiles = cdiv(m, SPLIT_K_TILE) * cdiv(n, SPLIT_K_TILE)
    splits = max(1, min(cdiv(2 * sm_count, tiles), k // SPLIT_K_MIN_CHUNK))
    splits = max(splits, cdiv(k, SPLIT_K_MAX_CHUNK))
    chunk = max(SPLIT_K_TILE, cdiv(cdiv(k, splits), SPLIT_K_TILE) * SPLIT_K_TILE)
    return max(1, cdiv(k, chunk)), chunk


def launch_gemm_splitk(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """aicfc_gemm_splitk_f32_*: grid (N / 32, M / 32, splits), partials in a workspace."""
    g = gemm_operands(spec, ins, outs, params)
    m, n, k = g.m, g.n, g.k
    splits, chunk = split_k_plan(m, n, k, ctx.sm_count)
    grid = (cdiv(n, SPLIT_K_TILE), cdiv(m, SPLIT_K_TILE), splits)
    if grid[1] > 65535 or splits > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": (M, N, K) = {(m, n, k)} exceeds its grid')
    tickets = cdiv(4 * grid[0] * grid[1], 256) * 256
    ws = ctx.workspace(tickets + (4 * splits * m * n if splits > 1 else 0))
    scalars = {**g.scalars(), "splits": splits, "k_chunk": chunk}
    return [kernel_launch(spec, grid, (THREADS,), [*g.buffers, ws], scalars, keepalive=[ws])]


def launch_gemm_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """aicfc_gemm_epilogue_grad_f32_*: (A, B, saved) -> (dZ [M, N], dbias [N]), the split-K
    grid and plan; workspace: tile and strip tickets, column sums, then the partials."""
    a, b, saved = ins
    dz, dbias = outs
    act = str(param(params, "act", "relu"))
    g = gemm_operands(spec, [a, b], [dz], {**params, "act": "none"})
    m, n, k = g.m, g.n, g.k
    expect_numel(spec, m * n, saved=saved)
    expect_numel(spec, n, dbias=dbias)
    splits, chunk = split_k_plan(m, n, k, ctx.sm_count)
    grid = (cdiv(n, SPLIT_K_TILE), cdiv(m, SPLIT_K_TILE), splits)
    if grid[1] > 65535 or splits > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": (M, N, K) = {(m, n, k)} exceeds its grid')
    tickets = cdiv(4 * (grid[0] * grid[1] + grid[0]), 256) * 256
    columns = 4 * cdiv(grid[1] * n, 64) * 64
    ws = ctx.workspace(tickets + columns + (4 * splits * m * n if splits > 1 else 0))
    scalars = {**g.scalars(), "act": act_code(spec, act), "splits": splits, "k_chunk": chunk}
    buffers = [a, b, saved, dz, dbias, ws]
    return [kernel_launch(spec, grid, (THREADS,), buffers, scalars, keepalive=[ws])]
