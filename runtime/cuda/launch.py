"""Launchers: from one exec launch (kernel, buffers, params) to bound CUDA launches.

Each registry op has a launcher that reads the buffers' shapes and the launch's
`params`, computes the scalars its kernels' ABI names (M, N, K, n, C, ...), the
grid and the block, and returns `cuda_abi.KernelLaunch`es whose arguments are
fixed at load time; nothing is computed while a step runs, so the same launches
are run eagerly or captured into a CUDA graph. The table `LAUNCHERS` is keyed by
op name; cuBLASLt entries (flag "library") go to runtime/cublaslt.py.

Kernel families that share an op (the small-GEMM kernels) find their launcher by
flag (`FLAG_LAUNCHERS`).

`LoadContext` is what a launcher may ask the backend for: a zeroed workspace
(kept for the program's life), a small int64 table uploaded to the device, the
multiprocessor count, and the cuBLASLt handle. `DeviceContext` is that on the
current CuPy device: each CupyExecutable binds its launches with one, and kernel
tests and benchmarks launch single kernels with one.

Adam launches of one program are grouped (`group_steps`): consecutive
`autodiff.adam_step` launches with one kernel flagged "multi_tensor" and equal
hyperparameters become one launch over a device tensor list (PyTorch's
multi-tensor apply), so every parameter is updated by a single kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.registry import PARAM_DEFAULTS, KernelSpec

ACT_CODES = {"none": 0, "relu": 1, "gelu": 2}
"""The `act` scalar of the GEMM and epilogue kernels (kernels/common.cuh)."""

THREADS = 256
ROWS_PER_BLOCK = 8  # loss.cu: one warp per row, 8 warps per block
FUSED_COLUMN_PARTIALS = 16384
"""Most column partials (blocks x C) the fused loss's last block adds itself (at most
64 loads per thread); larger problems reduce dlogits in a second launch."""


class LoadContext(Protocol):
    """What launchers may ask of the backend while a program loads."""

    sm_count: int

    def workspace(self, nbytes: int) -> Any:
        """A zero-filled device buffer of `nbytes` bytes, kept alive with the program."""

    def table(self, values: np.ndarray) -> Any:
        """`values` (int64) uploaded to a device array kept alive with the program."""

    def cublaslt(self) -> Any:
        """The backend's cuBLASLt context (runtime/cublaslt.py), or raise if unavailable."""


class DeviceContext:
    """The LoadContext on the current CuPy device; `keep` holds what it allocated.

    sm_count: the device's multiprocessor count (None: read from the current device).
    cublaslt: returns the cuBLASLt context to plan with (CupyBackend.cublaslt shares one
              per backend); None makes one on first use, or raises CudaKernelError
              saying why cuBLASLt cannot run here.
    """

    def __init__(
        self, sm_count: int | None = None, cublaslt: Callable[[], Any] | None = None
    ) -> None:
        import cupy

        if sm_count is None:
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
            sm_count = int(props["multiProcessorCount"])
        self.sm_count = sm_count
        self.keep: list[Any] = []
        self._cublaslt = cublaslt
        self._own_cublaslt: Any = None

    def workspace(self, nbytes: int) -> Any:
        """Zeroed bytes, at least 256 and a multiple of 256."""
        import cupy

        ws = cupy.zeros(max(256, cdiv(nbytes, 256) * 256), dtype=np.uint8)
        self.keep.append(ws)
        return ws

    def table(self, values: np.ndarray) -> Any:
        import cupy

        t = cupy.asarray(np.ascontiguousarray(values, dtype=np.int64))
        self.keep.append(t)
        return t

    def cublaslt(self) -> Any:
        if self._cublaslt is not None:
            return self._cublaslt()
        if self._own_cublaslt is None:
            from aicfc.runtime.cuda import cublaslt

            reason = cublaslt.available()
            if reason is not None:
                raise CudaKernelError(f"cuBLASLt kernels cannot run: {reason}")
            self._own_cublaslt = cublaslt.CublasLt()
        return self._own_cublaslt


def param(params: Mapping[str, object], key: str, default: object = None) -> Any:
    """A launch parameter with the registry's defaults for omitted ones."""
    if key in params:
        return params[key]
    return PARAM_DEFAULTS.get(key, default)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid_1d(ctx: LoadContext, work: int) -> tuple[int]:
    """Blocks of 256 threads for a grid-stride loop: enough to fill the device, at most one pass."""
    return (max(1, min(cdiv(work, THREADS), ctx.sm_count * 16)),)


def numel(a: Any) -> int:
    return int(np.prod(a.shape, dtype=np.int64))


def matrix_shape(spec: KernelSpec, what: str, a: Any) -> tuple[int, int]:
    """(rows, columns) of a buffer the kernel reads as a matrix; CudaKernelError otherwise."""
    if len(a.shape) != 2:
        raise CudaKernelError(
            f'kernel "{spec.name}": {what} is {cuda_abi.describe([a])}, expected a matrix'
        )
    return int(a.shape[0]), int(a.shape[1])


def expect_numel(spec: KernelSpec, n: int, **buffers: Any) -> None:
    """Raise unless each named buffer (None: absent) holds `n` elements.

    A kernel indexes its buffers by the sizes its launcher computes, so a buffer of
    another size (hand-written exec IR) would be read or written out of bounds; the
    CUDA kernels do not broadcast.
    """
    for what, a in buffers.items():
        if a is not None and numel(a) != n:
            raise CudaKernelError(
                f'kernel "{spec.name}": {what} is {cuda_abi.describe([a])}, {numel(a)} elements; '
                f"the launch needs {n}"
            )


def expect_operands(spec: KernelSpec, n: int, ins: Sequence[Any], outs: Sequence[Any]) -> None:
    """`expect_numel` of each of these operands and results, named by position."""
    expect_numel(
        spec,
        n,
        **{f"operand #{i}": a for i, a in enumerate(ins)},
        **{f"result #{i}": a for i, a in enumerate(outs)},
    )


Launcher = Callable[
    [KernelSpec, list[Any], list[Any], Mapping[str, object], LoadContext], list[Launch]
]


# ----------------------------------------------------------------------------
# GEMM
# ----------------------------------------------------------------------------


def gemm_mnk(a: Any, b: Any, ta: bool, tb: bool) -> tuple[int, int, int]:
    """(M, N, K) of op(A) op(B) for A, B of shapes [M, K] / [K, M] and [K, N] / [N, K]."""
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != kb:
        raise CudaKernelError(
            f"GEMM operands disagree on K: op(A) is [{m}, {k}], op(B) [{kb}, {n}]"
        )
    return int(m), int(n), int(k)


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

    @property
    def buffers(self) -> list[Any]:
        """A, B, bias|None, Y, Z|None: the buffers of every GEMM kernel's ABI, in order."""
        return [self.a, self.b, self.bias, self.y, self.z]

    def scalars(self) -> dict[str, object]:
        """M, N, K and the act code, the scalars every GEMM kernel's ABI starts with."""
        return {"M": self.m, "N": self.n, "K": self.k, "act": ACT_CODES[self.act]}


def gemm_operands(
    spec: KernelSpec, ins: list[Any], outs: list[Any], params: Mapping[str, object]
) -> Gemm:
    """The GEMM of a matmul/gemm_epilogue launch; CudaKernelError naming the kernel for an
    unknown activation, operands that disagree on K, or a Y, Z or bias of another size."""
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    y = outs[0]
    z = outs[1] if len(outs) > 1 else None
    act = str(param(params, "act", "none"))
    if act not in ACT_CODES:
        raise CudaKernelError(f'kernel "{spec.name}": unknown activation {act!r}')
    ta, tb = bool(param(params, "transpose_a")), bool(param(params, "transpose_b"))
    matrix_shape(spec, "A", a), matrix_shape(spec, "B", b)
    m, n, k = gemm_mnk(a, b, ta, tb)
    expect_numel(spec, n, bias=bias)
    expect_numel(spec, m * n, Y=y, Z=z)
    return Gemm(a, b, bias, y, z, act, ta, tb, m, n, k)


def launch_gemm(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """aicfc_gemm_{f32,f32_s64,tf32}_{nn,nt,tn,tt}: grid (N / BN, M / BM), 256 threads."""
    g = gemm_operands(spec, ins, outs, params)
    tile = 64 if "tile_64" in spec.flags else 128
    grid = (cdiv(g.n, tile), cdiv(g.m, tile))
    if grid[1] > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": M = {g.m} needs more than 65535 row blocks')
    return [kernel_launch(spec, grid, (THREADS,), g.buffers, g.scalars())]


def skinny_mode(m: int, n: int, k: int) -> int:
    """gemm_small.cu's mode for the shortest side: 0 = K (ties first), 1 = N, 2 = M."""
    short = min(m, n, k)
    return 0 if k == short else 1 if n == short else 2


def launch_gemm_skinny(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
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
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
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


# ----------------------------------------------------------------------------
# Reductions, losses
# ----------------------------------------------------------------------------


def launch_epilogue_grad(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """(dY [M, N], saved [M, N]) -> (dZ [M, N], dbias [N]): grid (N / 32), 32 x 32 threads."""
    dy, saved = ins
    dz, dbias = outs
    m, n = matrix_shape(spec, "dY", dy)
    expect_numel(spec, m * n, saved=saved, dZ=dz)
    expect_numel(spec, n, dbias=dbias)
    act = ACT_CODES[str(param(params, "act", "relu"))]
    return [
        kernel_launch(
            spec, (cdiv(n, 32), 1), (32, 32), [dy, saved, *outs], {"M": m, "N": n, "act": act}
        )
    ]


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
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    axes = param(params, "axes", ())
    outer, r, inner = reduce_view(tuple(ins[0].shape), tuple(axes))
    if outer > 65535:
        raise CudaKernelError(f'kernel "{spec.name}": {outer} outer rows exceed the grid limit')
    expect_numel(spec, outer * inner, result=outs[0])
    grid = (1 if inner == 1 else cdiv(inner, 32), outer)
    return [
        kernel_launch(
            spec, grid, (32, 32), [ins[0], outs[0]], {"outer": outer, "R": r, "inner": inner}
        )
    ]


def launch_cross_entropy(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    logits, labels = ins
    n, c = matrix_shape(spec, "logits", logits)
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
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    logits, labels, dloss = ins
    n, c = matrix_shape(spec, "logits", logits)
    expect_numel(spec, n, labels=labels)
    expect_numel(spec, 1, dloss=dloss)
    expect_numel(spec, n * c, dlogits=outs[0])
    return [
        kernel_launch(
            spec, (cdiv(n, ROWS_PER_BLOCK),), (THREADS,), [*ins, outs[0]], {"N": n, "C": c}
        )
    ]


def launch_cross_entropy_with_grad(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """(logits, labels, dloss) -> (loss, dlogits[, dbias]): one warp per row, 8 per block.

    dbias is summed inside the launch (its last block adds the blocks' column sums)
    while blocks x C is at most FUSED_COLUMN_PARTIALS; beyond that one block would
    add too many partials, so a reduce_sum launch over dlogits follows instead.
    """
    logits, labels, dloss = ins
    n, c = matrix_shape(spec, "logits", logits)
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


def last_axis_rows(spec: KernelSpec, x: Any, params: Mapping[str, object]) -> tuple[int, int]:
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
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
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
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    n = numel(ins[0])
    expect_operands(spec, n, ins, [])
    expect_numel(spec, 1, loss=outs[0])
    grid = (max(1, min(cdiv(n, THREADS), 1024)),)
    ws = ctx.workspace(256 + 4 * grid[0])
    return [kernel_launch(spec, grid, (THREADS,), [*ins, outs[0], ws], {"n": n}, keepalive=[ws])]


# ----------------------------------------------------------------------------
# Elementwise, layout, dropout, SGD
# ----------------------------------------------------------------------------


def launch_elementwise(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """add/sub/mul, relu/gelu/tanh and their grads, mse_loss_grad: n elements."""
    n = numel(outs[0])
    expect_operands(spec, n, ins[:2], outs)
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, *outs], {"n": n})]


def launch_bias_add(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """x + bias along the last axis: n elements of x, C of bias (element i adds bias[i % C])."""
    x, bias = ins
    n = numel(outs[0])
    expect_operands(spec, n, [x], outs)
    c = int(x.shape[-1]) if x.shape else 1
    expect_numel(spec, c, bias=bias)
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, *outs], {"n": n, "C": c})]


def launch_copy(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    nbytes = int(ins[0].nbytes)
    if int(outs[0].nbytes) != nbytes:
        raise CudaKernelError(
            f'kernel "{spec.name}": copies {nbytes} bytes into '
            f"{cuda_abi.describe(outs[:1])} of {int(outs[0].nbytes)}"
        )
    words = cdiv(nbytes, 16)
    return [
        kernel_launch(spec, grid_1d(ctx, words), (THREADS,), [ins[0], outs[0]], {"nbytes": nbytes})
    ]


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous row-major array of `shape`."""
    return [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(len(shape))]


def transpose_strides(
    in_shape: tuple[int, ...], out_shape: tuple[int, ...], params: Mapping[str, object]
) -> list[int]:
    """Output axis d reads input axis perm[d]; ValueError unless that gives `out_shape`."""
    perm = tuple(int(p) for p in param(params, "perm", ()))
    if sorted(perm) != list(range(len(in_shape))) or out_shape != tuple(in_shape[p] for p in perm):
        raise ValueError(f"perm {perm} does not take {list(in_shape)} to {list(out_shape)}")
    strides = row_major_strides(in_shape)
    return [strides[p] for p in perm]


def broadcast_strides(
    in_shape: tuple[int, ...], out_shape: tuple[int, ...], params: Mapping[str, object]
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


SOURCE_STRIDES = {"graph.transpose": transpose_strides, "graph.broadcast_to": broadcast_strides}
"""op -> where each output axis of aicfc_permute_b* steps through the input."""


def permute_table(
    op: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...], params: Mapping[str, object]
) -> np.ndarray:
    """[out_shape..., source stride of each output axis...] for aicfc_permute_b*."""
    src = SOURCE_STRIDES[op](in_shape, out_shape, params)
    return np.array([*out_shape, *src], dtype=np.int64)


def launch_permute(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    out_shape = tuple(int(d) for d in outs[0].shape)
    in_shape = tuple(int(d) for d in ins[0].shape)
    try:
        meta = ctx.table(permute_table(spec.op, in_shape, out_shape, params))
    except ValueError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None
    n = numel(outs[0])
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


def launch_dropout(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """x (or dy) [n], the int64 offset [] -> out [n]: a thread per 4 elements."""
    x, offset = ins
    n = numel(outs[0])
    expect_numel(spec, n, x=x)
    expect_numel(spec, 1, offset=offset)
    p = float(param(params, "p"))
    if not 0.0 <= p < 1.0:
        raise CudaKernelError(f'kernel "{spec.name}": p = {p} is outside [0, 1)')
    return [
        kernel_launch(
            spec,
            grid_1d(ctx, cdiv(n, 4)),
            (THREADS,),
            [*ins, outs[0]],
            {"p": p, "seed": int(param(params, "seed")), "n": n},
        )
    ]


def launch_sgd(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """(param, grad[, buf]) -> (param'[, buf']) of n elements; a buffer needs its next value."""
    buf = ins[2] if len(ins) > 2 else None
    buf_out = outs[1] if len(outs) > 1 else None
    if (buf is None) != (buf_out is None):
        raise CudaKernelError(
            f'kernel "{spec.name}": a momentum buffer needs both its value and its next value'
        )
    n = numel(ins[0])
    expect_operands(spec, n, ins, outs)
    scalars = {
        "lr": param(params, "lr"),
        "momentum": param(params, "momentum", 0.0),
        "weight_decay": param(params, "weight_decay", 0.0),
        "nesterov": int(bool(param(params, "nesterov"))),
        "n": n,
    }
    return [
        kernel_launch(
            spec, grid_1d(ctx, n), (THREADS,), [ins[0], ins[1], buf, outs[0], buf_out], scalars
        )
    ]


# ----------------------------------------------------------------------------
# Multi-tensor Adam
# ----------------------------------------------------------------------------

ADAM_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}


def adam_chunk(total: int, sm_count: int) -> int:
    """Elements per block: about 8 blocks per multiprocessor, between 1024 and 8192."""
    target = max(1, total // (sm_count * 8))
    chunk = 1024
    while chunk < target and chunk < 8192:
        chunk *= 2
    return chunk


def launch_adam_group(
    spec: KernelSpec,
    group: list[tuple[list[Any], list[Any]]],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """One aicfc_adam_multi_tensor_f32 launch over every (inputs, outputs) of `group`."""
    rows: list[list[int]] = []
    sizes: list[int] = []
    for ins, outs in group:
        if len(ins) != 5 or len(outs) != 4:
            raise CudaKernelError(
                f'kernel "{spec.name}" takes param, grad, exp_avg, exp_avg_sq and step, and '
                f"gives their next values, got {cuda_abi.describe(ins)} -> "
                f"{cuda_abi.describe(outs)}"
            )
        p, g, m, v, s = ins
        if not all(numel(a) == numel(p) for a in (g, m, v, *outs[:3])):
            raise CudaKernelError(
                f'kernel "{spec.name}": param, grad, exp_avg, exp_avg_sq and their next values '
                f"must have one shape, got {cuda_abi.describe([*ins, *outs])}"
            )
        if numel(s) != 1 or numel(outs[3]) != 1:
            raise CudaKernelError(f'kernel "{spec.name}": the step counter must be a scalar')
        rows.append([a.data.ptr for a in (p, g, m, v, s, *outs)] + [numel(p)])
        sizes.append(numel(p))
    chunk = adam_chunk(sum(sizes), ctx.sm_count)
    chunks = [(t, start) for t, n in enumerate(sizes) for start in range(0, n, chunk)]
    meta = ctx.table(
        np.array([x for r in rows for x in r] + [x for c in chunks for x in c], dtype=np.int64)
    )
    ws = ctx.workspace(256)
    scalars = {
        "meta": meta.data.ptr,
        "ntensors": len(rows),
        "nchunks": len(chunks),
        "chunk": chunk,
        "lr": param(params, "lr"),
        **{k: param(params, k, d) for k, d in ADAM_DEFAULTS.items()},
        "decoupled_weight_decay": int(bool(param(params, "decoupled_weight_decay"))),
    }
    flat = [a for ins, outs in group for a in (*ins, *outs)]
    launch = kernel_launch(
        spec, (len(chunks),), (THREADS,), [ws], scalars, keepalive=[meta, ws, *flat]
    )
    launch.shapes = f"{len(rows)} tensors: " + cuda_abi.describe([ins[0] for ins, _ in group])
    return [launch]


def launch_adam(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    return launch_adam_group(spec, [(ins, outs)], params, ctx)


# ----------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------

LAUNCHERS: dict[str, Launcher] = {
    "graph.matmul": launch_gemm,
    "graph.gemm_epilogue": launch_gemm,
    "autodiff.epilogue_grad": launch_epilogue_grad,
    "graph.reduce_sum": launch_reduce_sum,
    "graph.cross_entropy": launch_cross_entropy,
    "autodiff.cross_entropy_grad": launch_cross_entropy_grad,
    "autodiff.cross_entropy_with_grad": launch_cross_entropy_with_grad,
    "graph.softmax": launch_softmax,
    "autodiff.softmax_grad": launch_softmax,
    "graph.mse_loss": launch_mse_loss,
    "autodiff.mse_loss_grad": launch_elementwise,
    "graph.add": launch_elementwise,
    "graph.sub": launch_elementwise,
    "graph.mul": launch_elementwise,
    "graph.bias_add": launch_bias_add,
    "graph.relu": launch_elementwise,
    "graph.gelu": launch_elementwise,
    "graph.tanh": launch_elementwise,
    "autodiff.relu_grad": launch_elementwise,
    "autodiff.gelu_grad": launch_elementwise,
    "autodiff.tanh_grad": launch_elementwise,
    "exec.copy": launch_copy,
    "graph.reshape": launch_copy,
    "graph.transpose": launch_permute,
    "graph.broadcast_to": launch_permute,
    "graph.dropout": launch_dropout,
    "autodiff.dropout_grad": launch_dropout,
    "autodiff.sgd_step": launch_sgd,
    "autodiff.adam_step": launch_adam,
}
"""op name -> launcher of its own-source CUDA kernels."""

FLAG_LAUNCHERS: dict[str, Launcher] = {
    "skinny": launch_gemm_skinny,
    "split_k": launch_gemm_splitk,
}
"""Kernel flag -> launcher, for kernel families that share an op with others (the GEMMs
of gemm_small.cu); checked before LAUNCHERS."""


def launches_for(
    spec: KernelSpec,
    ins: list[Any],
    outs: list[Any],
    params: Mapping[str, object],
    ctx: LoadContext,
) -> list[Launch]:
    """The bound launches that run `spec` on these buffers (cuBLASLt for "library" kernels).

    Raises CudaKernelError naming the kernel when the buffers do not fit it (their
    count, rank or size) or a parameter is out of its range.
    """
    launcher: Launcher | None
    if "cublaslt" in spec.flags:
        launcher = ctx.cublaslt().launches
    else:
        by_flag = [FLAG_LAUNCHERS[f] for f in sorted(spec.flags) if f in FLAG_LAUNCHERS]
        launcher = by_flag[0] if by_flag else LAUNCHERS.get(spec.op)
    if launcher is None:
        raise CudaKernelError(f'kernel "{spec.name}": no CUDA launcher for op {spec.op}')
    try:
        return launcher(spec, ins, outs, params, ctx)
    except (ValueError, IndexError) as e:  # unpacking a buffer count the kernel does not take
        raise CudaKernelError(
            f'kernel "{spec.name}" cannot run on inputs ({cuda_abi.describe(ins)}) and outputs '
            f"({cuda_abi.describe(outs)}): {e}"
        ) from None


@dataclass(frozen=True)
class StepGroup:
    """Consecutive launch steps that run as one launch (multi-tensor Adam), or a single step."""

    indices: tuple[int, ...]


def group_steps(
    kernels: Sequence[KernelSpec | None], params: Sequence[Mapping[str, object]]
) -> list[StepGroup]:
    """Group runs of equal multi-tensor kernels with equal params; `None` marks a copy step."""
    groups: list[StepGroup] = []
    for i, spec in enumerate(kernels):
        prev = groups[-1].indices[-1] if groups else None
        if (
            spec is not None
            and "multi_tensor" in spec.flags
            and prev is not None
            and kernels[prev] is spec
            and dict(params[prev]) == dict(params[i])
        ):
            groups[-1] = StepGroup((*groups[-1].indices, i))
        else:
            groups.append(StepGroup((i,)))
    return groups
