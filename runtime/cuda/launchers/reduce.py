"""Launchers of kernels/reduce.cu: the backward epilogue and reduce_sum, and the
two-launch gemm_epilogue_grad (a product kernel into dZ, then the backward epilogue in
place on dZ) for products too large for gemm_small.cu's one-launch kernel.

The backward epilogue's bias gradient is a column sum over M rows: on [16384, 1536] (a
GPT's MLP) its 48 column tiles alone leave most of the GPU idle, so the rows are split
into chunks, each block sums its chunk, and a second launch adds the chunks in order
(deterministic: fixed-order sums, no atomics).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aicfc.runtime import registry
from aicfc.runtime.cuda import launch
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    act_code,
    cdiv,
    expect_numel,
    param,
    rows_shape,
)
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.registry_cuda import COMPOSITE_PRODUCTS, epilogue_grad_kernel

EPILOGUE_GRAD_MIN_ROWS = 128
"""Rows of the smallest chunk that epilogue_grad's first stage gives one block (4 rows for
each of its 32 row groups): fewer would make the partial sums the bigger part of the work."""

BLOCKS_PER_SM = 4
"""Blocks of 32 x 32 threads the first stage aims at per multiprocessor (two resident at
once, two waves)."""


def epilogue_grad_plan(m: int, n: int, sm_count: int) -> tuple[int, int]:
    """(chunks, rows): epilogue_grad's rows split into `chunks` chunks of `rows` rows (a
    multiple of 32, the last one shorter), enough for BLOCKS_PER_SM blocks a multiprocessor
    over the ceil(N / 32) column tiles, none under EPILOGUE_GRAD_MIN_ROWS rows; one chunk
    where M is short or the column tiles fill the device."""
    return row_chunks(m, cdiv(n, 32), sm_count)


def row_chunks(m: int, tiles: int, sm_count: int) -> tuple[int, int]:
    """(chunks, rows) of a column reduction over `m` rows with `tiles` blocks a chunk
    (`epilogue_grad_plan`; reduce_sum's blocks are its outer rows times its column tiles)."""
    want = max(1, cdiv(BLOCKS_PER_SM * sm_count, tiles))
    chunks = min(want, max(1, m // EPILOGUE_GRAD_MIN_ROWS))
    rows = max(32, cdiv(cdiv(m, chunks), 32) * 32)
    return max(1, cdiv(m, rows)), rows


def may_split_rows(spec: KernelSpec) -> bool:
    """Whether `spec` may split its rows into chunks: the entries whose sums are float32
    (f32, and the wide bf16/f16 -> f32 ones) have a "workspace" of f32 partials; a bf16/f16
    sum would round before the chunks are added, and each result must round once
    (kernels/reduce.cu), so those run as one chunk."""
    return "workspace" in spec.flags


def launch_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dY [M, N], saved [M, N]) -> (dZ [M, N], dbias [N]): grid (N / 32, chunks), 32 x 32
    threads, each block's column sums of its row chunk into a workspace [chunks, N], then
    aicfc_sum_partials_f32 adds them in chunk order (one chunk: straight into dbias)."""
    dy, saved = ins
    dz, dbias = outs
    m, n = rows_shape(spec, "dY", dy)
    expect_numel(spec, m * n, saved=saved, dZ=dz)
    expect_numel(spec, n, dbias=dbias)
    act = act_code(spec, str(param(params, "act", "relu")))
    chunks, rows = (
        epilogue_grad_plan(m, n, ctx.sm_count) if may_split_rows(spec) else (1, max(1, m))
    )
    partial = dbias if chunks == 1 else ctx.workspace(4 * chunks * n)
    first = kernel_launch(
        spec,
        (cdiv(n, 32), chunks),
        (32, 32),
        [dy, saved, dz, partial],
        {"M": m, "N": n, "act": act, "rows": rows},
        keepalive=[partial],
    )
    if chunks == 1:
        return [first]
    combine = registry.get("cuda.sum_partials_f32")
    second = kernel_launch(
        combine, (cdiv(n, 256),), (256,), [partial, dbias], {"chunks": chunks, "N": n}
    )
    return [first, second]


def product_then_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(A, B, saved) -> (dZ, dbias) as two launches on one stream: the product kernel that
    COMPOSITE_PRODUCTS names for `spec` writes op(A) op(B) into dZ, then the epilogue_grad
    kernel of `spec`'s storage dtype runs in place on dZ (each of its threads reads an
    element of dY before writing dZ there); with out_dtype "f32" the one that writes
    dbias in float32."""
    a, b, saved = ins
    dz, dbias = outs
    product = registry.get(COMPOSITE_PRODUCTS[spec.name])
    flags = {k: params[k] for k in ("transpose_a", "transpose_b") if k in params}
    first = launch.launches_for(product, [a, b], [dz], flags, ctx)
    wide = param(params, "out_dtype", "operands") == "f32"  # dbias in float32
    follow = registry.get(epilogue_grad_kernel(spec.dtypes[0], wide))
    act = {"act": param(params, "act", "relu")}
    return [*first, *launch.launches_for(follow, [dz, saved], [dz, dbias], act, ctx)]


launch_gemm_then_epilogue_grad = product_then_epilogue_grad
"""gemm_epilogue_grad through one of our product kernels (see product_then_epilogue_grad)."""


def reduce_view(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[int, int, int]:
    """(outer, R, inner) of `shape` when the reduced `axes` are one contiguous run."""
    rank = len(shape)
    norm = sorted({a % rank for a in axes}) if rank else []
    if not norm:
        return 1, 1, int(np.prod(shape, dtype=np.int64))
    if norm != list(range(norm[0], norm[-1] + 1)):
        raise CudaKernelError(
            f"reduce_sum over axes {tuple(axes)} of a rank-{rank} tensor: the CUDA kernel reduces "
            "one contiguous run of axes (transpose first)"
        )
    outer = int(np.prod(shape[: norm[0]], dtype=np.int64))
    r = int(np.prod(shape[norm[0] : norm[-1] + 1], dtype=np.int64))
    inner = int(np.prod(shape[norm[-1] + 1 :], dtype=np.int64))
    return outer, r, inner


def launch_reduce_sum(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """x -> the sum over `axes` (one contiguous run): grid (inner / 32, chunks outer),
    32 x 32; with R split into chunks (inner > 1: `row_chunks`), each chunk's sums go to a
    workspace [chunks, outer, inner] and aicfc_sum_partials_f32 adds them in chunk order."""
    axes = param(params, "axes", ())
    outer, r, inner = reduce_view(tuple(ins[0].shape), tuple(axes))
    expect_numel(spec, outer * inner, result=outs[0])
    tiles = 1 if inner == 1 else cdiv(inner, 32)
    split = inner > 1 and may_split_rows(spec)
    chunks, rows = row_chunks(r, tiles * outer, ctx.sm_count) if split else (1, max(1, r))
    if chunks * outer > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": {outer} outer rows exceed the grid limit')
    partial = outs[0] if chunks == 1 else ctx.workspace(4 * chunks * outer * inner)
    scalars = {"outer": outer, "R": r, "inner": inner, "rows": rows}
    first = kernel_launch(
        spec, (tiles, chunks * outer), (32, 32), [ins[0], partial], scalars, keepalive=[partial]
    )
    if chunks == 1:
        return [first]
    combine = registry.get("cuda.sum_partials_f32")
    n = outer * inner
    return [
        first,
        kernel_launch(
            combine, (cdiv(n, 256),), (256,), [partial, outs[0]], {"chunks": chunks, "N": n}
        ),
    ]
