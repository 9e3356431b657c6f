"""Launchers of kernels/reduce.cu: the backward epilogue and reduce_sum, and the
two-launch gemm_epilogue_grad (a product kernel into dZ, then the backward epilogue in
place on dZ) for products too large for gemm_small.cu's one-launch kernel."""

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
from aicfc.runtime.registry_cuda import COMPOSITE_PRODUCTS, EPILOGUE_GRAD_KERNEL


def launch_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dY [M, N], saved [M, N]) -> (dZ [M, N], dbias [N]): grid (N / 32), 32 x 32 threads."""
    dy, saved = ins
    dz, dbias = outs
    m, n = rows_shape(spec, "dY", dy)
    expect_numel(spec, m * n, saved=saved, dZ=dz)
    expect_numel(spec, n, dbias=dbias)
    act = act_code(spec, str(param(params, "act", "relu")))
    return [
        kernel_launch(
            spec, (cdiv(n, 32), 1), (32, 32), [dy, saved, *outs], {"M": m, "N": n, "act": act}
        )
    ]


def product_then_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(A, B, saved) -> (dZ, dbias) as two launches on one stream: the product kernel that
    COMPOSITE_PRODUCTS names for `spec` writes op(A) op(B) into dZ, then epilogue_grad runs
    in place on dZ (each of its threads reads an element of dY before writing dZ there)."""
    a, b, saved = ins
    dz, dbias = outs
    product = registry.get(COMPOSITE_PRODUCTS[spec.name])
    flags = {k: params[k] for k in ("transpose_a", "transpose_b") if k in params}
    first = launch.launches_for(product, [a, b], [dz], flags, ctx)
    follow = registry.get(EPILOGUE_GRAD_KERNEL)
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
    """x -> the sum over `axes` (one contiguous run): grid (inner / 32, outer), 32 x 32."""
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
