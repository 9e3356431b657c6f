"""Launchers of kernels/elementwise.cu: arithmetic and activations over n elements,
bias_add, scale and causal_mask, byte copies (exec.copy, reshape), the strided permute of
transpose and broadcast_to, and the strided copies of split and concat.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    Launcher,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    expect_operands,
    grid_1d,
    launch_pointwise,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec

launch_elementwise: Launcher = launch_pointwise
"""add/sub/mul, relu/gelu/tanh and their grads: n elements (common.launch_pointwise)."""


def launch_bias_add(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """x + bias along the last axis: n elements of x, C of bias (element i adds bias[i % C])."""
    x, bias = ins
    n = numel(outs[0])
    expect_operands(spec, n, [x], outs)
    c = int(x.shape[-1]) if x.shape else 1
    expect_numel(spec, c, bias=bias)
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, *outs], {"n": n, "C": c})]


def launch_copy(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """nbytes from the input to the output; nothing where both are the same bytes (a
    reshape the backend made a view of its input)."""
    nbytes = int(ins[0].nbytes)
    if int(outs[0].nbytes) != nbytes:
        raise CudaKernelError(
            f'kernel "{spec.name}": copies {nbytes} bytes into '
            f"{describe(outs[:1])} of {int(outs[0].nbytes)}"
        )
    if int(ins[0].data.ptr) == int(outs[0].data.ptr):
        return []
    words = cdiv(nbytes, 16)
    return [
        kernel_launch(spec, grid_1d(ctx, words), (THREADS,), [ins[0], outs[0]], {"nbytes": nbytes})
    ]


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous row-major array of `shape`."""
    return [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(len(shape))]


def transpose_strides(
    in_shape: tuple[int, ...], out_shape: tuple[int, ...], params: Params
) -> list[int]:
    """Output axis d reads input axis perm[d]; ValueError unless that gives `out_shape`."""
    perm = tuple(int(p) for p in param(params, "perm", ()))
    if sorted(perm) != list(range(len(in_shape))) or out_shape != tuple(in_shape[p] for p in perm):
        raise ValueError(f"perm {perm} does not take {list(in_shape)} to {list(out_shape)}")
    strides = row_major_strides(in_shape)
    return [strides[p] for p in perm]


def broadcast_strides(
    in_shape: tuple[int, ...], out_shape: tuple[int, ...], params: Params
) -> list[int]:
    """NumPy's rules, aligned on the right: a new or size-1 input axis has stride 0;
    ValueError where `in_shape` does not broadcast to `out_shape`."""
    strides = row_major_strides(in_shape)
    lead = len(out_shape) - len(in_shape)
    if lead < 0 or any(i not in (1, o) for i, o in zip(in_shape, out_shape[lead:], strict=True)):
        raise ValueError(f"{list(in_shape)} does not broadcast to {list(out_shape)}")
    return [
        0 if d < lead or in_shape[d - lead] == 1 else strides[d - lead]
        for d in range(len(out_shape))
    ]


SourceStrides = Callable[[tuple[int, ...], tuple[int, ...], Params], list[int]]
"""(input shape, output shape, params) -> the input stride of each output axis."""


def permute_table(
    strides: SourceStrides,
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    params: Params,
) -> np.ndarray:
    """[out_shape..., source stride of each output axis...] for aicfc_permute_b*."""
    src = strides(in_shape, out_shape, params)
    return np.array([*out_shape, *src], dtype=np.int64)


def launch_permute(
    strides: SourceStrides,
    spec: KernelSpec,
    ins: Buffers,
    outs: Buffers,
    params: Params,
    ctx: LoadContext,
) -> list[Launch]:
    """aicfc_permute_b{32,64}: out[i] = in[sum of i's output coordinates x `strides`]."""
    out_shape = tuple(int(d) for d in outs[0].shape)
    in_shape = tuple(int(d) for d in ins[0].shape)
    try:
        meta = ctx.table(permute_table(strides, in_shape, out_shape, params))
    except ValueError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None
    n = numel(outs[0])
    if rows_of_words(spec, ins[0], outs[0], permute_table(strides, in_shape, out_shape, params)):
        spec, n = registry.get(ROWS_KERNEL), n // 4
    return [
        kernel_launch(
            spec,
            grid_1d(ctx, n),
            (THREADS,),
            [ins[0], outs[0]],
            {"meta": meta.data.ptr, "rank": len(out_shape), "n": n},
            keepalive=[meta],
        )
    ]


ROWS_KERNEL = "cuda.permute_rows_b32"


def rows_of_words(spec: KernelSpec, x: Any, out: Any, table: np.ndarray) -> bool:
    """Whether a 4-byte permute moves whole 16-byte words (aicfc_permute_rows_b32): the
    last axis contiguous in both, its size and every source stride multiples of 4, both
    buffers 16-byte aligned."""
    rank = len(table) // 2
    if rank == 0 or np.dtype(x.dtype).itemsize != 4:
        return False
    shape, src = table[:rank], table[rank:]
    aligned = int(x.data.ptr) % 16 == 0 and int(out.data.ptr) % 16 == 0
    return bool(aligned and src[-1] == 1 and shape[-1] % 4 == 0 and not (src % 4)[:-1].any())


launch_transpose: Launcher = partial(launch_permute, transpose_strides)
"""graph.transpose: output axis d reads input axis perm[d]."""

launch_broadcast_to: Launcher = partial(launch_permute, broadcast_strides)
"""graph.broadcast_to: a new or size-1 input axis is read with stride 0."""


def strided_copy_table(
    shape: tuple[int, ...],
    src_strides: list[int],
    dst_strides: list[int],
    src_offset: int,
    dst_offset: int,
) -> np.ndarray:
    """[shape..., source strides..., destination strides..., source and destination
    offsets] for aicfc_strided_copy_b* (elements, not bytes)."""
    return np.array([*shape, *src_strides, *dst_strides, src_offset, dst_offset], dtype=np.int64)


def _slices(
    spec: KernelSpec, whole: tuple[int, ...], parts: list[tuple[int, ...]], params: Params
) -> tuple[int, list[int]]:
    """(axis, start of each part along it) for parts that tile `whole` along `axis`."""
    rank = len(whole)
    axis = int(param(params, "axis", 0))
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is outside a rank-{rank} tensor")
    axis %= rank
    starts, at = [], 0
    for part in parts:
        if len(part) != rank or any(
            p != w for d, (p, w) in enumerate(zip(part, whole, strict=True)) if d != axis
        ):
            raise ValueError(f"{list(part)} is not a slice of {list(whole)} along axis {axis}")
        starts.append(at)
        at += part[axis]
    if at != whole[axis]:
        raise ValueError(f"the parts add up to {at} along axis {axis}, not {whole[axis]}")
    return axis, starts


def _strided_launch(
    spec: KernelSpec, ctx: LoadContext, src: Any, dst: Any, meta: np.ndarray, rank: int, n: int
) -> Launch:
    table = ctx.table(meta)
    return kernel_launch(
        spec,
        grid_1d(ctx, n),
        (THREADS,),
        [src, dst],
        {"meta": table.data.ptr, "rank": rank, "n": n},
        keepalive=[table],
    )


def _launch_parts(
    spec: KernelSpec,
    whole: Any,
    parts: Buffers,
    params: Params,
    ctx: LoadContext,
    gather: bool,
) -> list[Launch]:
    """A strided copy per part along `axis`: each part read out of `whole` (gather: split)
    or written into it (concat)."""
    shape = tuple(int(d) for d in whole.shape)
    shapes = [tuple(int(d) for d in p.shape) for p in parts]
    try:
        axis, starts = _slices(spec, shape, shapes, params)
    except ValueError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None
    strides = row_major_strides(shape)
    launches = []
    for part, dims, start in zip(parts, shapes, starts, strict=True):
        if not numel(part):
            continue
        own, at = row_major_strides(dims), start * strides[axis]
        if gather:
            meta, src, dst = strided_copy_table(dims, strides, own, at, 0), whole, part
        else:
            meta, src, dst = strided_copy_table(dims, own, strides, 0, at), part, whole
        launches.append(_strided_launch(spec, ctx, src, dst, meta, len(dims), numel(part)))
    return launches


def launch_split(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """x -> one result per size along `axis` (torch.split): a strided copy per result."""
    return _launch_parts(spec, ins[0], outs, params, ctx, gather=True)


def launch_concat(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """inputs -> their concatenation along `axis` (torch.cat): a strided copy per input."""
    return _launch_parts(spec, outs[0], ins, params, ctx, gather=False)


def launch_scale(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """y = factor x over n elements."""
    n = numel(outs[0])
    expect_operands(spec, n, ins, outs)
    factor = float(param(params, "factor", 1.0))
    return [
        kernel_launch(
            spec, grid_1d(ctx, n), (THREADS,), [ins[0], outs[0]], {"n": n, "factor": factor}
        )
    ]


def launch_causal_mask(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """x [..., T, S] -> y: `fill` (default -inf) where the column exceeds the row."""
    x = ins[0]
    if len(x.shape) < 2:
        raise CudaKernelError(f'kernel "{spec.name}": x is {describe([x])}, expected [..., T, S]')
    n = numel(outs[0])
    expect_operands(spec, n, ins, outs)
    t, s = int(x.shape[-2]), int(x.shape[-1])
    fill = float(param(params, "fill", float("-inf")))
    scalars = {"T": t, "S": s, "n": n, "fill": fill}
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [x, outs[0]], scalars)]
