"""Launchers of kernels/embedding.cu: the gather and its deterministic backward.

Forward: a warp per position, ceil(N / 8) blocks of 256 threads. Backward, two launches
with no atomics (embedding.cu's header gives the summation order): the positions cut
into chunks of `EMBEDDING_CHUNK`, each chunk sorted by id into per-id partial rows in a
workspace, then each (id, 128-column slice) adds its partials over the chunks, with
`embedding_split` warps sharing a pair when there are few pairs for the device.
"""

from __future__ import annotations

from typing import Any

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    matrix_shape,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec

THREADS = 256
EMBEDDING_CHUNK = 256
"""Positions per chunk of the backward (at most 256: one per thread)."""
SLICE = 128
"""Columns per warp task (32 lanes x 4)."""
COMBINE_KERNEL = "cuda.embedding_grad_combine_f32"
MAX_INT32 = 2**31 - 1


def embedding_grid(n: int) -> tuple[int]:
    return (max(1, cdiv(n, 8)),)


def embedding_chunks_grid(n: int, d: int, chunk: int = EMBEDDING_CHUNK) -> tuple[int, int]:
    return max(1, cdiv(n, chunk)), cdiv(d, SLICE)


def embedding_split(v: int, d: int, sm_count: int) -> int:
    """8 warps share a (v, column slice) pair when there are few pairs for the device."""
    return 8 if v * cdiv(d, SLICE) <= 4 * sm_count else 1


def embedding_combine_grid(v: int, d: int, split: int) -> tuple[int]:
    return (cdiv(v * cdiv(d, SLICE), 8 // split),)


def embedding_map_bytes(n: int, v: int, chunk: int = EMBEDDING_CHUNK) -> int:
    return cdiv(4 * v * cdiv(n, chunk), 256) * 256


def embedding_workspace(n: int, v: int, d: int, chunk: int = EMBEDDING_CHUNK) -> int:
    """Bytes: the int32 slot map [V][C], then the partials [C][min(chunk, V)][D]."""
    return embedding_map_bytes(n, v, chunk) + 4 * cdiv(n, chunk) * min(chunk, v) * d


def _check_sizes(spec: KernelSpec, n: int, v: int, d: int) -> None:
    if max(n, v, d, n * d, v * d) > MAX_INT32:
        raise CudaKernelError(
            f'kernel "{spec.name}": N = {n}, V = {v}, D = {d} exceed the kernel\'s int32 indices'
        )


def launch_embedding(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(ids [...], weight [V, D]) -> out [..., D]: out[n] = weight[ids[n]]."""
    ids, table = ins
    v, d = matrix_shape(spec, "weight", table)
    n = numel(ids)
    _check_sizes(spec, n, v, d)
    expect_numel(spec, n * d, out=outs[0])
    return [
        kernel_launch(
            spec, embedding_grid(n), (THREADS,), [ids, table, outs[0]], {"N": n, "V": v, "D": d}
        )
    ]


def embedding_grad_launches(
    spec: KernelSpec,
    dy: Any,
    ids: Any,
    dtable: Any,
    ctx: LoadContext,
    chunk: int = EMBEDDING_CHUNK,
    split: int | None = None,
) -> list[Launch]:
    """The two launches of dtable [V, D] = the scatter-add of dy [N, D] by ids [N]
    (`chunk` positions a chunk, `split` warps a (v, slice) pair: defaults as the header)."""
    v, d = matrix_shape(spec, "dweight", dtable)
    n = numel(ids)
    _check_sizes(spec, n, v, d)
    expect_numel(spec, n * d, dy=dy)
    if not 1 <= chunk <= EMBEDDING_CHUNK:
        raise CudaKernelError(f'kernel "{spec.name}": chunk {chunk} outside [1, 256]')
    split = embedding_split(v, d, ctx.sm_count) if split is None else split
    ws = ctx.workspace(embedding_workspace(n, v, d, chunk))
    scalars = {"N": n, "V": v, "D": d, "chunk": chunk}
    chunks = kernel_launch(
        spec, embedding_chunks_grid(n, d, chunk), (THREADS,), [dy, ids, ws], scalars, keepalive=[ws]
    )
    combine = kernel_launch(
        registry.get(COMBINE_KERNEL),
        embedding_combine_grid(v, d, split),
        (THREADS,),
        [dtable, ws],
        {**scalars, "split": split},
        keepalive=[ws],
    )
    return [chunks, combine]


def launch_embedding_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dy [..., D], ids [...]) -> dweight [V, D] (`num_embeddings` = V)."""
    dy, ids = ins
    v = param(params, "num_embeddings")
    if v is not None and int(v) != int(outs[0].shape[0]):
        raise ValueError(f"num_embeddings = {v} but dweight has {outs[0].shape[0]} rows")
    return embedding_grad_launches(spec, dy, ids, outs[0], ctx)
