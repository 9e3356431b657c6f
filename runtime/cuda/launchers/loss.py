"""Launchers of kernels/loss.cu: cross-entropy (with its gradient, fused or not), softmax
along the last axis and its gradient, the MSE loss and its gradient.

The row kernels run one warp per row, `ROWS_PER_BLOCK` warps per block. The scalar
losses reduce deterministically through a workspace (zeroed at load): each block writes
its partial sum, the last block to finish adds them in block order.
"""

from __future__ import annotations

from typing import Any

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    Launcher,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    expect_operands,
    launch_pointwise,
    numel,
    param,
    rows_shape,
)
from aicfc.runtime.cuda.launchers.reduce import launch_reduce_sum
from aicfc.runtime.registry import KernelSpec

ROWS_PER_BLOCK = 8  # loss.cu: one warp per row, 8 warps per block
FUSED_COLUMN_PARTIALS = 16384
"""Most column partials (blocks x C) the fused loss's last block adds itself (at most
64 loads per thread); larger problems reduce dlogits in a second launch."""


def launch_cross_entropy(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    logits, labels = ins
    n, c = rows_shape(spec, "logits", logits)
    expect_numel(spec, n, labels=labels)
    expect_numel(spec, 1, loss=outs[0])
    blocks = cdiv(n, ROWS_PER_BLOCK)
    ws = ctx.workspace(256 + 4 * blocks)
    return [
        kernel_launch(
            spec,
            (blocks,),
            (THREADS,),
            [logits, labels, outs[0], ws],
            {"N": n, "C": c},
            keepalive=[ws],
        )
    ]


def launch_cross_entropy_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    logits, labels, dloss = ins
    n, c = rows_shape(spec, "logits", logits)
    expect_numel(spec, n, labels=labels)
    expect_numel(spec, 1, dloss=dloss)
    expect_numel(spec, n * c, dlogits=outs[0])
    return [
        kernel_launch(
            spec, (cdiv(n, ROWS_PER_BLOCK),), (THREADS,), [*ins, outs[0]], {"N": n, "C": c}
        )
    ]


def launch_cross_entropy_with_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(logits, labels, dloss) -> (loss, dlogits[, dbias]): one warp per row, 8 per block.

    dbias is summed inside the launch (its last block adds the blocks' column sums)
    while blocks x C is at most FUSED_COLUMN_PARTIALS; beyond that one block would
    add too many partials, so a reduce_sum launch over dlogits follows instead.
    """
    logits, labels, dloss = ins
    n, c = rows_shape(spec, "logits", logits)
    dbias = outs[2] if len(outs) > 2 else None
    expect_numel(spec, n, labels=labels)
    expect_numel(spec, 1, dloss=dloss, loss=outs[0])
    expect_numel(spec, n * c, dlogits=outs[1])
    expect_numel(spec, c, dbias=dbias)
    blocks = cdiv(n, ROWS_PER_BLOCK)
    in_kernel = dbias is not None and blocks * c <= FUSED_COLUMN_PARTIALS
    columns_at = 256 + cdiv(4 * blocks, 256) * 256
    ws = ctx.workspace(columns_at + (4 * blocks * c if in_kernel else 0))
    fused = kernel_launch(
        spec,
        (blocks,),
        (THREADS,),
        [logits, labels, dloss, outs[0], outs[1], dbias if in_kernel else None, ws],
        {"N": n, "C": c},
        keepalive=[ws],
    )
    if dbias is None or in_kernel:
        return [fused]
    reduce = registry.get("cuda.reduce_sum_f32")
    return [fused, *launch_reduce_sum(reduce, [outs[1]], [dbias], {"axes": (0,)}, ctx)]


def last_axis_rows(spec: KernelSpec, x: Any, params: Params) -> tuple[int, int]:
    rank = len(x.shape)
    axis = int(param(params, "axis", -1))
    if rank == 0 or axis % rank != rank - 1:
        raise CudaKernelError(
            f'kernel "{spec.name}": the CUDA softmax runs along the last axis, got axis {axis} '
            f"of a rank-{rank} tensor"
        )
    c = int(x.shape[-1])
    return numel(x) // c, c


def launch_softmax(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """softmax x -> y, softmax_grad (dy, y) -> dx along the last axis: a warp per row."""
    rows, c = last_axis_rows(spec, ins[0], params)
    expect_operands(spec, rows * c, ins, outs)
    return [
        kernel_launch(
            spec, (cdiv(rows, ROWS_PER_BLOCK),), (THREADS,), [*ins, outs[0]], {"rows": rows, "C": c}
        )
    ]


def launch_mse_loss(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    n = numel(ins[0])
    expect_operands(spec, n, ins, [])
    expect_numel(spec, 1, loss=outs[0])
    grid = (max(1, min(cdiv(n, THREADS), 1024)),)
    ws = ctx.workspace(256 + 4 * grid[0])
    return [kernel_launch(spec, grid, (THREADS,), [*ins, outs[0], ws], {"n": n}, keepalive=[ws])]


launch_mse_loss_grad: Launcher = launch_pointwise
"""(pred [n], target [n], dloss []) -> dpred [n] (common.launch_pointwise)."""
