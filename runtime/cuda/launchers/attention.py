"""Launchers of kernels/attention.cu: FlashAttention-2 style tiled attention (head dims 32,
64 and 128, keys as long as the queries), forward and backward; and the parameters every
attention launcher reads.

q, k, v [B, H, T, d] are BH = B H rows of T queries (keys) of d columns. Forward: grid
(BH, ceil(T / 64)), 128 threads, 4 (3 x 64 d + 64 x 64) bytes of dynamic shared memory.
Backward: the delta pre-pass D = rowsum(dout o out) into a workspace, then one block per
(bh, 64-row tile) computing that tile's dk, dv and dq (128 threads, 256 for d = 128).

The packed launchers (graph.packed_qkv_attention and its gradient) run the same kernels on
the heads of qkv [N, T, 3D] in place: BH = N H rows of T, out and dout [N, T, D], dqkv
[N, T, 3D]. Their bodies take a `PackedGeometry`, so attention_mma.py launches the
tensor-core kernels (bf16 / f16, the same ABI and grid) through them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec

TILE = 64
"""attention.cu's query and key tile."""
DELTA_KERNEL = "cuda.attention_bwd_delta_f32"


@dataclass(frozen=True)
class Attention:
    """The problem of an attention launch: BH rows of T queries and S keys of d columns,
    and the kernel scalars (scale, causal, dropout p, seed)."""

    bh: int
    t: int
    s: int
    d: int
    scale: float
    causal: bool
    p: float
    seed: int

    def scalars(self) -> dict[str, object]:
        return {
            "BH": self.bh,
            "T": self.t,
            "S": self.s,
            "d": self.d,
            "scale": self.scale,
            "causal": int(self.causal),
            "p": self.p,
            "seed": self.seed,
        }

    def tiled_scalars(self) -> dict[str, object]:
        """The tiled kernels' scalars: S = T and d is in the symbol (one per head dim)."""
        return {n: v for n, v in self.scalars().items() if n not in ("S", "d")}


def attention_problem(
    spec: KernelSpec, q: Any, k: Any, v: Any, offset: Any, params: Params
) -> Attention:
    """Check q [..., T, d] against k, v [..., S, d] and read the parameters: scale defaults
    to 1 / sqrt(d) (torch's), dropout needs the offset operand. CudaKernelError naming the
    kernel otherwise."""
    where = f'kernel "{spec.name}"'
    if len(q.shape) < 2 or tuple(k.shape) != tuple(v.shape) or len(k.shape) != len(q.shape):
        raise CudaKernelError(f"{where}: q, k, v are {describe([q, k, v])}; expected [..., T, d]")
    t, d = int(q.shape[-2]), int(q.shape[-1])
    s = int(k.shape[-2])
    if tuple(q.shape[:-2]) != tuple(k.shape[:-2]) or int(k.shape[-1]) != d:
        raise CudaKernelError(f"{where}: q is {describe([q])} but k, v are {describe([k])}")
    bh = numel(q) // (t * d) if t * d else 0
    return attention_params(spec, bh, t, s, d, offset, params)


def attention_params(
    spec: KernelSpec, bh: int, t: int, s: int, d: int, offset: Any, params: Params
) -> Attention:
    """The attention of BH rows of T queries and S keys of d columns with the parameters
    read (attention_problem's); CudaKernelError naming the kernel for a bad p or offset."""
    where = f'kernel "{spec.name}"'
    p = float(param(params, "dropout_p", 0.0))
    if not 0.0 <= p < 1.0:
        raise CudaKernelError(f"{where}: dropout_p = {p} is outside [0, 1)")
    if p > 0.0 and offset is None:
        raise CudaKernelError(f"{where}: dropout needs the offset operand (rng.offset)")
    if offset is not None:
        expect_numel(spec, 1, offset=offset)
    scale = param(params, "scale", None)
    return Attention(
        bh=bh,
        t=t,
        s=s,
        d=d,
        scale=1.0 / math.sqrt(d) if scale is None else float(scale),
        causal=bool(param(params, "causal", False)),
        p=p,
        seed=int(param(params, "seed", 0)),
    )


def tiled_geometry(spec: KernelSpec, a: Attention) -> tuple[int, int]:
    """The grid (BH, ceil(T / 64)) of the tiled kernels; CudaKernelError unless S = T and
    d is the head dim the entry is compiled for (its `last_dims` or, packed, its
    `packed_head_dim_range` constraint: one symbol per head dim, checked again for
    hand-written IR)."""
    if a.s != a.t:
        raise CudaKernelError(
            f'kernel "{spec.name}": the tiled kernels take as many keys as queries '
            f"(T = {a.t}, S = {a.s})"
        )
    c = spec.constraints
    dims = {d for _, sizes in c.last_dims for d in sizes}
    dims |= {lo for _, lo, hi in c.packed_head_dim_range if lo == hi}
    if a.d not in dims:
        raise CudaKernelError(
            f'kernel "{spec.name}": head dim {a.d}; the kernel is compiled for '
            f"{' or '.join(map(str, sorted(dims)))}"
        )
    return a.bh, cdiv(a.t, TILE)


def attention_fwd_shared(d: int) -> int:
    return 4 * (3 * TILE * d + TILE * TILE)


def attention_bwd_threads(d: int) -> int:
    return 256 if d == 128 else 128


def attention_bwd_shared(d: int) -> int:
    return 4 * (4 * TILE * d + 2 * TILE * TILE + 2 * TILE)


def attention_delta_grid(rows: int, d: int) -> tuple[int]:
    return (cdiv(rows, 256 // (d // 4)),)


def launch_attention(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(q, k, v [B, H, T, d], offset []?) -> (out [B, H, T, d], lse [B, H, T])."""
    q, k, v = ins[:3]
    offset = ins[3] if len(ins) > 3 else None
    a = attention_problem(spec, q, k, v, offset, params)
    grid = tiled_geometry(spec, a)
    out, lse = outs
    expect_numel(spec, numel(q), out=out)
    expect_numel(spec, a.bh * a.t, lse=lse)
    return [
        kernel_launch(
            spec,
            grid,
            (128,),
            [q, k, v, offset, out, lse],
            a.tiled_scalars(),
            shared_mem=attention_fwd_shared(a.d),
        )
    ]


def launch_attention_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dout, q, k, v, out [B, H, T, d], lse [B, H, T], offset []?) -> (dq, dk, dv)."""
    dout, q, k, v, out, lse = ins[:6]
    offset = ins[6] if len(ins) > 6 else None
    a = attention_problem(spec, q, k, v, offset, params)
    grid = tiled_geometry(spec, a)
    expect_numel(spec, numel(q), dout=dout, out=out, dq=outs[0], dk=outs[1], dv=outs[2])
    expect_numel(spec, a.bh * a.t, lse=lse)
    rows = a.bh * a.t
    ws = ctx.workspace(4 * rows)
    delta = kernel_launch(
        registry.get(DELTA_KERNEL),
        attention_delta_grid(rows, a.d),
        (256,),
        [out, dout, ws],
        {"rows": rows, "d": a.d},
        keepalive=[ws],
    )
    grads = kernel_launch(
        spec,
        grid,
        (attention_bwd_threads(a.d),),
        [q, k, v, dout, lse, offset, *outs, ws],
        a.tiled_scalars(),
        shared_mem=attention_bwd_shared(a.d),
        keepalive=[ws],
    )
    return [delta, grads]


# --- packed qkv (graph.packed_qkv_attention): the heads of qkv [N, T, 3D] in place ----------


@dataclass(frozen=True)
class PackedGeometry:
    """What the packed kernels of one storage dtype launch with: dynamic shared memory of
    the forward and the backward (bytes, by head dim d), the backward's threads, and the
    delta pre-pass (its registry entry and the head-dim columns one of its lanes reads)."""

    fwd_shared: Callable[[int], int]
    bwd_shared: Callable[[int], int]
    bwd_threads: Callable[[int], int]
    delta_kernel: str
    delta_lane_cols: int

    def delta_grid(self, rows: int, d: int) -> tuple[int]:
        return (cdiv(rows, 256 // (d // self.delta_lane_cols)),)


F32_PACKED = PackedGeometry(
    fwd_shared=attention_fwd_shared,
    bwd_shared=attention_bwd_shared,
    bwd_threads=attention_bwd_threads,
    delta_kernel="cuda.attention_bwd_delta_packed_f32",
    delta_lane_cols=4,
)
"""attention.cu's packed kernels (float32)."""


def packed_problem(
    spec: KernelSpec, qkv: Any, offset: Any, params: Params
) -> tuple[Attention, int]:
    """(the attention of the heads of qkv [N, T, 3 H d], H) with H = num_heads; the
    parameters as attention_problem reads them. CudaKernelError naming the kernel for a
    qkv that is not [N, T, 3 H d]."""
    heads = int(param(params, "num_heads", 0))
    shape = tuple(int(x) for x in qkv.shape)
    if len(shape) != 3 or heads < 1 or shape[2] % (3 * heads) or not shape[2]:
        raise CudaKernelError(
            f'kernel "{spec.name}": qkv is {describe([qkv])}; expected [N, T, 3 H d] with '
            f"H = num_heads = {heads}"
        )
    n, t, w = shape
    return attention_params(spec, n * heads, t, t, w // (3 * heads), offset, params), heads


def packed_scalars(a: Attention, heads: int) -> dict[str, object]:
    """The packed kernels' scalars: the plain ones and H."""
    return {**a.scalars(), "H": heads}


def launch_packed_attention(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(qkv [N, T, 3D], offset []?) -> (out [N, T, D], lse [N, H, T])."""
    return packed_attention_launches(spec, ins, outs, params, F32_PACKED)


def packed_attention_launches(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, geo: PackedGeometry
) -> list[Launch]:
    """launch_packed_attention with the launch geometry of `geo`."""
    qkv = ins[0]
    offset = ins[1] if len(ins) > 1 else None
    a, heads = packed_problem(spec, qkv, offset, params)
    grid = tiled_geometry(spec, a)
    out, lse = outs
    expect_numel(spec, numel(qkv) // 3, out=out)
    expect_numel(spec, a.bh * a.t, lse=lse)
    return [
        kernel_launch(
            spec,
            grid,
            (128,),
            [qkv, offset, out, lse],
            packed_scalars(a, heads),
            shared_mem=geo.fwd_shared(a.d),
        )
    ]


def launch_packed_attention_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dout [N, T, D], qkv [N, T, 3D], out [N, T, D], lse [N, H, T], offset []?) ->
    (dqkv [N, T, 3D]): the delta pre-pass over out, dout, then the tiled backward."""
    return packed_attention_grad_launches(spec, ins, outs, params, ctx, F32_PACKED)


def packed_attention_grad_launches(
    spec: KernelSpec,
    ins: Buffers,
    outs: Buffers,
    params: Params,
    ctx: LoadContext,
    geo: PackedGeometry,
) -> list[Launch]:
    """launch_packed_attention_grad with the launch geometry of `geo`."""
    dout, qkv, out, lse = ins[:4]
    offset = ins[4] if len(ins) > 4 else None
    a, heads = packed_problem(spec, qkv, offset, params)
    grid = tiled_geometry(spec, a)
    (dqkv,) = outs
    expect_numel(spec, numel(qkv) // 3, dout=dout, out=out)
    expect_numel(spec, numel(qkv), dqkv=dqkv)
    expect_numel(spec, a.bh * a.t, lse=lse)
    rows = a.bh * a.t
    ws = ctx.workspace(4 * rows)
    delta = kernel_launch(
        registry.get(geo.delta_kernel),
        geo.delta_grid(rows, a.d),
        (256,),
        [out, dout, ws],
        {"rows": rows, "d": a.d, "H": heads, "T": a.t},
        keepalive=[ws],
    )
    grads = kernel_launch(
        spec,
        grid,
        (geo.bwd_threads(a.d),),
        [qkv, dout, lse, offset, dqkv, ws],
        packed_scalars(a, heads),
        shared_mem=geo.bwd_shared(a.d),
        keepalive=[ws],
    )
    return [delta, grads]
