"""Launchers of kernels/attention_rows.cu: attention a warp per row, for any head dim up
to 128 and any key length (the general kernels beside attention.cu's tiled ones).

Forward: grid (BH, ceil(T / 8)), 256 threads (8 warps, a query row each). Backward: the
dq kernel (a warp per query row, writing Delta = rowsum(dout o out) into a workspace),
then the dk/dv kernel (a warp per key row, reading Delta), in that order on one stream.
"""

from __future__ import annotations

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.attention import Attention, attention_problem
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    numel,
)
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.registry_cuda import ATTENTION_ROWS_MAX_D

WARPS = 8
DKDV_KERNEL = "cuda.attention_rows_bwd_dkdv_f32"


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
