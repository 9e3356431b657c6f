"""Launcher of kernels/mlp_fused.cu: the whole train step of a small MLP in one persistent
kernel (autodiff.mlp_train_step; docs/design.md#fused-mlp-train-step).

The launch's buffers follow the op's operand layout (dialects/autodiff/fused_step.py
`MlpTrainStepOp`): x, labels, dloss, the five hyperparameters, grad_scale and apply, then
each layer's weight (with exp_avg, exp_avg_sq, step) and bias (with its three) where it
has one; outputs: the loss, then each layer's next values in the same order. Everything
travels in one int64 table (`meta`, kernels/mlp_fused.cu's field order), with the
scratch of the step (each layer's output, pre-activation where its gradient reads it,
dZ, and the rows' log-probabilities) carved from one workspace of the program's own.

Grid: one block of 256 threads per tile of the widest phase, at most one per
multiprocessor, so that every block is resident at once (the kernel's grid barrier
spins; kernels/mlp_fused.cu says why a hand-written barrier).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicfc.dialects.activation_table import FACTS, Saved
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    act_code,
    cdiv,
    matrix_shape,
    numel,
    param,
)
from aicfc.runtime.cuda.launchers.optim import expect_scalars
from aicfc.runtime.registry import KernelSpec

THREADS = 256
TILE = 16
MAX_ROWS = 256
"""The largest batch M (kernels/mlp_fused.cu kMaxWidth bounds the loss rows too)."""
MAX_WIDTH = 256
"""The largest output width N of a layer (the loss task keeps 16 rows of N logits)."""
MAX_LAYERS = 8
GLOBAL_FIELDS = 16
LAYER_FIELDS = 24
TILE_K = 64
SHARED_BYTES = 4 * (2 * TILE_K * TILE + THREADS + TILE * MAX_WIDTH + 2 * MAX_LAYERS)
"""sizeof(Smem) of kernels/mlp_fused.cu (float arrays only)."""
HEAD = 10
"""x, labels, dloss, lr, beta1, beta2, eps, weight_decay, grad_scale, apply."""


def _tiles(rows: int, cols: int) -> int:
    return cdiv(rows, TILE) * cdiv(cols, TILE)


def _layers(spec: KernelSpec, ins: Buffers, outs: Buffers, bias: tuple[bool, ...]) -> list[Any]:
    """Per layer (in buffers, out buffers): 4 or 8 of each; CudaKernelError on counts."""
    want_in = HEAD + sum(8 if b else 4 for b in bias)
    want_out = 1 + sum(8 if b else 4 for b in bias)
    if len(ins) != want_in or len(outs) != want_out:
        raise CudaKernelError(
            f'kernel "{spec.name}": {len(bias)} layers (bias {list(bias)}) take {want_in} '
            f"buffers and give {want_out}, got {describe(ins)} -> {describe(outs)}"
        )
    found, at_in, at_out = [], HEAD, 1
    for b in bias:
        n = 8 if b else 4
        found.append((ins[at_in : at_in + n], outs[at_out : at_out + n]))
        at_in += n
        at_out += n
    return found


def launch_mlp_train_step(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """One persistent launch of the whole step; CudaKernelError naming the kernel and the
    buffer for a shape, dtype or limit the kernel does not take."""
    acts = tuple(str(param(params, "acts", "")).split(","))
    bias = tuple(bool(b) for b in param(params, "bias", ()))
    if not acts or len(acts) != len(bias) or len(acts) > MAX_LAYERS:
        raise CudaKernelError(
            f'kernel "{spec.name}": 1 to {MAX_LAYERS} layers with an activation and a bias '
            f"flag each, got acts {list(acts)}, bias {list(bias)}"
        )
    if acts[-1] != "none":
        raise CudaKernelError(f'kernel "{spec.name}": the last layer gives logits (act none)')
    layers = _layers(spec, ins, outs, bias)
    x, y, dloss, lr, b1, b2, eps, wd, scale, apply = ins[:HEAD]
    m, k = matrix_shape(spec, "x", x)
    if str(x.dtype) != "float32" or str(y.dtype) != "int32" or numel(y) != m:
        raise CudaKernelError(
            f'kernel "{spec.name}": x must be float32 [M, K] and labels int32 [M], got '
            f"{describe([x, y])}"
        )
    if not 1 <= m <= MAX_ROWS:
        raise CudaKernelError(f'kernel "{spec.name}": batch {m} is not in [1, {MAX_ROWS}]')
    expect_scalars(spec, "float64", lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    expect_scalars(spec, "float32", dloss=dloss, grad_scale=scale, apply=apply, loss=outs[0])
    rows: list[list[int]] = []
    sizes: list[tuple[int, int, bool]] = []  # (N, K, keeps Z) per layer
    for li, ((lins, louts), act) in enumerate(zip(layers, acts, strict=True)):
        n, kk = matrix_shape(spec, f"layer {li} weight", lins[0])
        if kk != k or not 1 <= n <= MAX_WIDTH:
            raise CudaKernelError(
                f'kernel "{spec.name}": layer {li} weight is {describe([lins[0]])}; it needs '
                f"{k} input features and at most {MAX_WIDTH} outputs"
            )
        for a in (*lins, *louts):
            if str(a.dtype) != "float32":
                raise CudaKernelError(f'kernel "{spec.name}": layer {li}: {describe([a])}')
        for group in range(0, len(lins), 4):
            p, mm, v, s = lins[group : group + 4]
            po, mo, vo, _so = louts[group : group + 4]
            count = numel(p)
            if not all(numel(a) == count for a in (mm, v, po, mo, vo)) or numel(s) != 1:
                raise CudaKernelError(
                    f'kernel "{spec.name}": layer {li}: a parameter, its exp_avg, exp_avg_sq '
                    f"and their next values need one size and the step one element, got "
                    f"{describe([p, mm, v, s])}"
                )
        if bias[li] and numel(lins[4]) != n:
            raise CudaKernelError(f'kernel "{spec.name}": layer {li} bias is not [{n}]')
        code = act_code(spec, act)
        keeps_z = act != "none" and FACTS[act].saves == Saved.INPUT
        sizes.append((n, k, keeps_z))
        b_in = lins[4:8] if bias[li] else [None] * 4
        b_out = louts[4:8] if bias[li] else [None] * 4
        w_in, w_out = lins[:4], louts[:4]
        ptrs = [
            w_in[0],
            b_in[0],
            w_out[0],
            b_out[0],
            w_in[1],
            w_in[2],
            w_in[3],
            w_out[1],
            w_out[2],
            w_out[3],
            b_in[1],
            b_in[2],
            b_in[3],
            b_out[1],
            b_out[2],
            b_out[3],
        ]
        rows.append([kk, n, code] + [0 if a is None else a.data.ptr for a in ptrs])
        k = n
    # scratch: per layer h [M, N], z [M, N] where kept, dz [M, N]; then rowval [M]
    offsets, total = [], 0

    def carve(nbytes: int) -> int:
        nonlocal total
        at = total
        total += cdiv(nbytes, 256) * 256
        return at

    for n, _, keeps_z in sizes:
        offsets.append((carve(4 * m * n), carve(4 * m * n) if keeps_z else -1, carve(4 * m * n)))
    rowval_at = carve(4 * m)
    scratch = ctx.workspace(total)
    base = scratch.data.ptr
    for row, (h_at, z_at, dz_at), (_, _, keeps_z) in zip(rows, offsets, sizes, strict=True):
        h, z = base + h_at, (base + z_at) if z_at >= 0 else 0
        row.extend([h, z, base + dz_at, z if keeps_z else h, 0])
    head = [x, y, dloss, outs[0], lr, b1, b2, eps, wd, scale, apply]
    glob = [a.data.ptr for a in head] + [base + rowval_at, m, len(acts)]
    glob += [int(bool(param(params, "decoupled_weight_decay"))), 0]
    table = np.array(glob + [v for r in rows for v in r], dtype=np.int64)
    assert len(glob) == GLOBAL_FIELDS and all(len(r) == LAYER_FIELDS for r in rows)
    meta = ctx.table(table)
    work = [_tiles(m, n) for n, _, _ in sizes[:-1]]  # forward
    work.append(cdiv(m, TILE))  # loss
    for li in range(len(sizes) - 1, 0, -1):  # backward, with layer li + 1's update
        upd = _tiles(*sizes[li + 1][:2]) if li + 1 < len(sizes) else 0
        work.append(_tiles(m, sizes[li][1]) + upd)
    work.append(sum(_tiles(*s[:2]) for s in sizes[:2]))  # the last updates
    grid = max(1, min(ctx.sm_count, max(work)))
    ws = ctx.workspace(256)
    launch = kernel_launch(
        spec,
        (grid,),
        (THREADS,),
        [ws],
        {"meta": meta.data.ptr},
        shared_mem=SHARED_BYTES,
        keepalive=[meta, ws, scratch, *ins, *outs],
    )
    launch.shapes = f"{len(acts)} layers: " + describe([x, *(lins[0] for lins, _ in layers)])
    return [launch]
