"""Launchers of kernels/attention_rows.cu: attention a warp per row, for any head dim up
to 128 and any key length (the general kernels beside attention.cu's tiled ones).

Forward: grid (BH, ceil(T / 8)), 256 threads (8 warps, a query row each). Backward: the
dq kernel (a warp per query row, writing Delta = rowsum(dout o out) into a workspace),
then the dk/dv kernel (a warp per key row, reading Delta), in that order on one stream.
The packed launchers run the same on the heads of qkv [N, T, 3D] in place (S = T).
"""

from __future__ import annotations

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.attention import (
    Attention,
    attention_problem,
    packed_problem,
    packed_scalars,
)
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    numel,
)
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.registry_cuda_transformer import ATTENTION_ROWS_MAX_D

WARPS = 8
DKDV_KERNEL = "cuda.attention_rows_bwd_dkdv_f32"
DKDV_PACKED_KERNEL = "cuda.attention_rows_bwd_dkdv_packed_f32"


def _checked(spec: KernelSpec, a: Attention) -> Attention:
    if not 1 <= a.d <= ATTENTION_ROWS_MAX_D:
        raise CudaKernelError(
            f'kernel "{spec.name}": head dim {a.d} is outside [1, {ATTENTION_ROWS_MAX_D}]'
        )
    if a.t < 1 or a.s < 1 or a.bh < 1:
        raise CudaKernelError(
            f'kernel "{spec.name}": empty attention (BH {a.bh}, T {a.t}, S {a.s})'
        )
    if cdiv(max(a.t, a.s), WARPS) > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": {max(a.t, a.s)} rows exceed the grid')
    return a


def launch_attention_rows(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(q [..., T, d], k, v [..., S, d], offset []?) -> (out [..., T, d], lse [..., T])."""
    q, k, v = ins[:3]
    offset = ins[3] if len(ins) > 3 else None
    a = _checked(spec, attention_problem(spec, q, k, v, offset, params))
    out, lse = outs
    expect_numel(spec, numel(q), out=out)
    expect_numel(spec, a.bh * a.t, lse=lse)
    grid = (a.bh, cdiv(a.t, WARPS))
    return [kernel_launch(spec, grid, (32 * WARPS,), [q, k, v, offset, out, lse], a.scalars())]


def launch_attention_rows_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dout, q, out [..., T, d], k, v [..., S, d] in operand order dout, q, k, v, out,
    lse [..., T], offset []?) -> (dq, dk, dv)."""
    dout, q, k, v, out, lse = ins[:6]
    offset = ins[6] if len(ins) > 6 else None
    a = _checked(spec, attention_problem(spec, q, k, v, offset, params))
    dq, dk, dv = outs
    expect_numel(spec, numel(q), dout=dout, out=out, dq=dq)
    expect_numel(spec, numel(k), dk=dk, dv=dv)
    expect_numel(spec, a.bh * a.t, lse=lse)
    ws = ctx.workspace(4 * a.bh * a.t)
    first = kernel_launch(
        spec,
        (a.bh, cdiv(a.t, WARPS)),
        (32 * WARPS,),
        [q, k, v, dout, out, lse, offset, dq, ws],
        a.scalars(),
        keepalive=[ws],
    )
    second = kernel_launch(
        registry.get(DKDV_KERNEL),
        (a.bh, cdiv(a.s, WARPS)),
        (32 * WARPS,),
        [q, k, v, dout, lse, offset, dk, dv, ws],
        a.scalars(),
        keepalive=[ws],
    )
    return [first, second]


def launch_packed_attention_rows(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(qkv [N, T, 3D], offset []?) -> (out [N, T, D], lse [N, H, T]): the heads in place."""
    qkv = ins[0]
    offset = ins[1] if len(ins) > 1 else None
    a, heads = packed_problem(spec, qkv, offset, params)
    a = _checked(spec, a)
    out, lse = outs
    expect_numel(spec, numel(qkv) // 3, out=out)
    expect_numel(spec, a.bh * a.t, lse=lse)
    grid = (a.bh, cdiv(a.t, WARPS))
    scalars = packed_scalars(a, heads)
    return [kernel_launch(spec, grid, (32 * WARPS,), [qkv, offset, out, lse], scalars)]


def launch_packed_attention_rows_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dout [N, T, D], qkv [N, T, 3D], out [N, T, D], lse [N, H, T], offset []?) ->
    (dqkv [N, T, 3D]): the dq kernel (writing Delta), then the dk/dv kernel."""
    dout, qkv, out, lse = ins[:4]
    offset = ins[4] if len(ins) > 4 else None
    a, heads = packed_problem(spec, qkv, offset, params)
    a = _checked(spec, a)
    (dqkv,) = outs
    expect_numel(spec, numel(qkv) // 3, dout=dout, out=out)
    expect_numel(spec, numel(qkv), dqkv=dqkv)
    expect_numel(spec, a.bh * a.t, lse=lse)
    ws = ctx.workspace(4 * a.bh * a.t)
    scalars = packed_scalars(a, heads)
    grid = (a.bh, cdiv(a.t, WARPS))
    first = kernel_launch(
        spec,
        grid,
        (32 * WARPS,),
        [qkv, dout, out, lse, offset, dqkv, ws],
        scalars,
        keepalive=[ws],
    )
    second = kernel_launch(
        registry.get(DKDV_PACKED_KERNEL),
        grid,
        (32 * WARPS,),
        [qkv, dout, lse, offset, dqkv, ws],
        scalars,
        keepalive=[ws],
    )
    return [first, second]
