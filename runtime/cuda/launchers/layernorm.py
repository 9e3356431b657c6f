"""Launchers of kernels/layernorm.cu: layer norm forward (with the fused residual add) and
its backward (dx, with the residual stream's gradient added for add_layer_norm_grad, then
dweight and dbias reduced from per-block partials).

Geometry (layernorm.cu's header): a team of `team(D)` threads per row, each holding 16
elements in registers, `256 / team` rows per block; the forward's grid covers the rows
once, the backward's is at most two blocks per multiprocessor (the number of dw/db
partials, which the second launch adds in a fixed order). The rows are the dims before
the last one, folded: x [B, T, D] is B T rows of D.
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
    param,
    rows_shape,
)
from aicfc.runtime.registry import KernelSpec

ROW_ELEMENTS = 16
"""Row elements a thread holds (layernorm.cu kPer)."""
MAX_TEAM = 512
PARAM_GRAD_KERNEL = "cuda.layer_norm_param_grad_f32"
DEFAULT_EPS = 1e-5


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def layer_norm_block(d: int) -> tuple[int, int]:
    """(team, rows per block): 16 elements a thread, a team of 32 to 512 threads.
    ValueError for D above 8192 (16 x 512)."""
    team = max(32, pow2_at_least(cdiv(d, ROW_ELEMENTS)))
    if team > MAX_TEAM:
        raise ValueError(f"layer norm over D = {d}: layernorm.cu takes D <= 8192")
    return team, max(1, 256 // team)


def layer_norm_grid(n: int, d: int) -> tuple[int]:
    return (max(1, cdiv(n, layer_norm_block(d)[1])),)


def layer_norm_grad_grid(n: int, d: int, sm_count: int) -> tuple[int]:
    """At most two blocks per multiprocessor: the number of dw/db partials."""
    return (max(1, min(cdiv(n, layer_norm_block(d)[1]), 2 * sm_count)),)


def layer_norm_grad_workspace(blocks: int, d: int) -> int:
    """Bytes of the dw, db partials [2][blocks][D]."""
    return 4 * 2 * blocks * d


def layer_norm_param_grad_grid(d: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) of aicfc_layer_norm_param_grad_f32."""
    return (cdiv(d, 32), 2), (32, 32)


def _rows(spec: KernelSpec, x: Any) -> tuple[int, int, tuple[int, int]]:
    n, d = rows_shape(spec, "x", x)
    try:
        block = layer_norm_block(d)
    except ValueError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None
    return n, d, block


def _affine(spec: KernelSpec, rest: Buffers, d: int) -> tuple[Any, Any]:
    """(weight, bias) from the operands after x (and the residual): none, the weight, or
    both (weight first, the order of graph.layer_norm's optional operands)."""
    if len(rest) > 2:
        raise ValueError(f"{len(rest)} operands after the input; expected weight and bias")
    w = rest[0] if rest else None
    b = rest[1] if len(rest) > 1 else None
    expect_numel(spec, d, weight=w, bias=b)
    return w, b


def launch_layer_norm(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(x [..., D], weight [D]?, bias [D]?) -> (y [..., D], mean [...], rstd [...])."""
    x = ins[0]
    n, d, block = _rows(spec, x)
    w, b = _affine(spec, ins[1:], d)
    y, mean, rstd = outs
    expect_numel(spec, n * d, y=y)
    expect_numel(spec, n, mean=mean, rstd=rstd)
    eps = float(param(params, "eps", DEFAULT_EPS))
    return [
        kernel_launch(
            spec,
            layer_norm_grid(n, d),
            block,
            [x, w, b, y, mean, rstd],
            {"N": n, "D": d, "eps": eps},
        )
    ]


def launch_add_layer_norm(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(x, residual [..., D], weight?, bias?) -> (sum, y [..., D], mean, rstd [...]):
    sum = x + residual, y = layer_norm(sum)."""
    x, r = ins[0], ins[1]
    n, d, block = _rows(spec, x)
    w, b = _affine(spec, ins[2:], d)
    s, y, mean, rstd = outs
    expect_numel(spec, n * d, residual=r, sum=s, y=y)
    expect_numel(spec, n, mean=mean, rstd=rstd)
    eps = float(param(params, "eps", DEFAULT_EPS))
    return [
        kernel_launch(
            spec,
            layer_norm_grid(n, d),
            block,
            [x, r, w, b, s, y, mean, rstd],
            {"N": n, "D": d, "eps": eps},
        )
    ]


def layer_norm_grad_launches(
    spec: KernelSpec,
    dy: Any,
    x: Any,
    mean: Any,
    rstd: Any,
    w: Any,
    dres: Any,
    dx: Any,
    dw: Any,
    db: Any,
    ctx: LoadContext,
) -> list[Launch]:
    """dx (+ dres when given) from aicfc_layer_norm_grad_f32, then dw and db (each
    optional) from its partials by aicfc_layer_norm_param_grad_f32 when either is wanted."""
    n, d, block = _rows(spec, x)
    expect_numel(spec, n * d, dy=dy, dres=dres, dx=dx)
    expect_numel(spec, n, mean=mean, rstd=rstd)
    expect_numel(spec, d, weight=w, dweight=dw, dbias=db)
    (blocks,) = grid = layer_norm_grad_grid(n, d, ctx.sm_count)
    ws = (
        ctx.workspace(layer_norm_grad_workspace(blocks, d))
        if dw is not None or db is not None
        else None
    )
    first = kernel_launch(
        spec,
        grid,
        block,
        [dy, x, mean, rstd, w, dres, dx, ws],
        {"N": n, "D": d},
        keepalive=[ws] if ws is not None else [],
    )
    if ws is None:
        return [first]
    pgrid, pblock = layer_norm_param_grad_grid(d)
    second = kernel_launch(
        registry.get(PARAM_GRAD_KERNEL), pgrid, pblock, [dw, db, ws], {"blocks": blocks, "D": d}
    )
    return [first, second]


def _grads(w: Any, outs: Buffers) -> tuple[Any, Any, Any]:
    """(dx, dweight or None, dbias or None) of a layer norm backward's results."""
    if len(outs) > (3 if w is not None else 1):
        raise ValueError(f"{len(outs)} results; expected dx[, dweight[, dbias]]")
    dw = outs[1] if w is not None and len(outs) > 1 else None
    return outs[0], dw, outs[2] if len(outs) > 2 else None


def launch_layer_norm_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dy, x, mean, rstd, weight?) -> (dx, dweight?, dbias?): dweight where the forward had
    a weight (the fifth operand), dbias where it also had a bias (a third result; a bias
    needs a weight, as graph.layer_norm verifies)."""
    dy, x, mean, rstd = ins[:4]
    w = ins[4] if len(ins) > 4 else None
    return layer_norm_grad_launches(spec, dy, x, mean, rstd, w, None, *_grads(w, outs), ctx)


def launch_add_layer_norm_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(dy, residual_grad, x, mean, rstd, weight?) -> (dx, dweight?, dbias?):
    layer_norm_grad's launches with dres = residual_grad, so dx = residual_grad + dx."""
    dy, dres, x, mean, rstd = ins[:5]
    w = ins[5] if len(ins) > 5 else None
    return layer_norm_grad_launches(spec, dy, x, mean, rstd, w, dres, *_grads(w, outs), ctx)
