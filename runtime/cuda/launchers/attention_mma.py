"""Launchers of kernels/attention_mma.cu: packed-qkv attention on tensor cores (bf16 / f16
storage, float32 statistics and accumulation), forward and backward.

The ABI, grid and operand checks are attention.py's packed launchers' (the kernels take
the same arguments); what differs is the launch geometry: 128 threads for both passes,
shared tiles of 64 rows of d + 8 16-bit values (3 in the forward; 4 and the 64-entry lse
and D vectors in the backward), and the delta pre-pass of the storage dtype, d / 8 lanes a
row.
"""

from __future__ import annotations

from aicfc.runtime.cuda.abi import Launch
from aicfc.runtime.cuda.launchers.attention import (
    TILE,
    PackedGeometry,
    packed_attention_grad_launches,
    packed_attention_launches,
)
from aicfc.runtime.cuda.launchers.common import Buffers, LoadContext, Params
from aicfc.runtime.registry import KernelSpec


def mma_tile_bytes(d: int) -> int:
    """attention_mma.cu's [64][d + 8] tile of 16-bit values."""
    return 2 * TILE * (d + 8)


def mma_geometry(dtype: str) -> PackedGeometry:
    """The launch geometry of attention_mma.cu's kernels of storage dtype `dtype`."""
    return PackedGeometry(
        fwd_shared=lambda d: 3 * mma_tile_bytes(d),
        bwd_shared=lambda d: 4 * mma_tile_bytes(d) + 2 * 4 * TILE,
        bwd_threads=lambda d: 128,
        delta_kernel=f"cuda.attention_bwd_delta_packed_{dtype}",
        delta_lane_cols=8,
    )


def launch_packed_attention(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(qkv [N, T, 3D] bf16/f16) -> (out [N, T, D] bf16/f16, lse [N, H, T] float32)."""
    return packed_attention_launches(spec, ins, outs, params, mma_geometry(spec.dtypes[0]))


def launch_packed_attention_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dout, qkv, out (bf16/f16), lse float32) -> (dqkv [N, T, 3D] bf16/f16): the delta
    pre-pass, then the tiled backward."""
    return packed_attention_grad_launches(
        spec, ins, outs, params, ctx, mma_geometry(spec.dtypes[0])
    )
