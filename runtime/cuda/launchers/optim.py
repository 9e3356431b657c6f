"""Launchers of kernels/optim.cu: SGD, multi-tensor Adam, and the training loop's bookkeeping
(lr_schedule, clip_grad_norm, accumulation_step, accumulate_grad).

Adam launches of one program are grouped (runtime/cuda/launch.py `group_steps`):
consecutive `autodiff.adam_step` launches with one kernel flagged "multi_tensor" and
equal params (the decoupled flag) become one launch over a device tensor list
(PyTorch's multi-tensor apply), so every parameter is updated by a single kernel. Each
tensor's row names its own hyperparameter buffers, so param groups share the launch.

Hyperparameters are f64 scalars (the train step's state), the gradient scale and the
apply flag f32 scalars: every kernel reads them from device memory at each launch, and
the launchers check their dtypes and sizes (a float64 lr read as float would be garbage).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from aicfc.dialects.schedule_table import COEFFICIENTS_PER_SEGMENT, KINDS_BY_NAME, split_kinds
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    LoadContext,
    Params,
    expect_numel,
    expect_operands,
    grid_1d,
    number,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec


def expect_scalars(spec: KernelSpec, dtype: str, **buffers: Any) -> None:
    """Raise unless each named buffer is one element of `dtype` ("float64", "float32")."""
    for what, a in buffers.items():
        if numel(a) != 1 or str(a.dtype) != dtype:
            raise CudaKernelError(
                f'kernel "{spec.name}": {what} must be a {dtype} scalar, got {describe([a])}'
            )


def _control(spec: KernelSpec, scale: Any, apply: Any) -> None:
    expect_scalars(spec, "float32", grad_scale=scale, apply=apply)


def launch_sgd(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(param, grad, lr, momentum, weight_decay, grad_scale, apply[, buf]) -> (param'[, buf'])
    of n elements; a buffer needs its next value."""
    p, g, lr, mu, wd, scale, apply = ins[:7]
    buf = ins[7] if len(ins) > 7 else None
    buf_out = outs[1] if len(outs) > 1 else None
    if (buf is None) != (buf_out is None):
        raise CudaKernelError(
            f'kernel "{spec.name}": a momentum buffer needs both its value and its next value'
        )
    expect_scalars(spec, "float64", lr=lr, momentum=mu, weight_decay=wd)
    _control(spec, scale, apply)
    n = numel(p)
    expect_numel(spec, n, param=p, grad=g, buf=buf, param_out=outs[0], buf_out=buf_out)
    scalars = {"nesterov": int(bool(param(params, "nesterov"))), "n": n}
    buffers = [p, g, lr, mu, wd, scale, apply, buf, outs[0], buf_out]
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), buffers, scalars)]


# ----------------------------------------------------------------------------
# Multi-tensor kernels: Adam and the gradient norm
# ----------------------------------------------------------------------------


def adam_chunk(total: int, sm_count: int) -> int:
    """Elements per block: about 8 blocks per multiprocessor, between 1024 and 8192."""
    target = max(1, total // (sm_count * 8))
    chunk = 1024
    while chunk < target and chunk < 8192:
        chunk *= 2
    return chunk


def _chunks(sizes: list[int], chunk: int) -> list[tuple[int, int]]:
    """(tensor, start) of every chunk of `chunk` elements; one empty chunk if all are empty
    (a launch needs a block)."""
    found = [(t, start) for t, n in enumerate(sizes) for start in range(0, n, chunk)]
    return found or [(0, 0)]


LOW_COPY_KINDS = {"bfloat16": 1, "float16": 2}
"""The dtype code of a low-precision copy in a row of the Adam tensor list (kernels/optim.cu
kLowBf16, kLowF16; 0: no copy)."""


def _adam_row(spec: KernelSpec, ins: list[Any], outs: list[Any]) -> list[int]:
    """One tensor's row of the Adam tensor list: 12 input and 4 output pointers, the low
    copy and its next value (0 without), the copy's dtype code, the element count."""
    copy = len(ins) == 13 and len(outs) == 5
    if not copy and (len(ins) != 12 or len(outs) != 4):
        raise CudaKernelError(
            f'kernel "{spec.name}" takes param, grad, exp_avg, exp_avg_sq, step, lr, '
            "beta1, beta2, eps, weight_decay, grad_scale, apply (and a low-precision copy), "
            "and gives the next param, exp_avg, exp_avg_sq and step (and copy), got "
            f"{describe(ins)} -> {describe(outs)}"
        )
    p, g, m, v, s, lr, b1, b2, eps, wd, scale, apply = ins[:12]
    if not all(numel(a) == numel(p) for a in (g, m, v, *outs[:3], *ins[12:], *outs[4:])):
        raise CudaKernelError(
            f'kernel "{spec.name}": param, grad, exp_avg, exp_avg_sq, the copy and their next '
            f"values must have one shape, got {describe([p, g, m, v, *outs[:3]])}"
        )
    if numel(s) != 1 or numel(outs[3]) != 1:
        raise CudaKernelError(f'kernel "{spec.name}": the step counter must be a scalar')
    expect_scalars(spec, "float64", lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    _control(spec, scale, apply)
    low: list[int] = [0, 0, 0]
    if copy:
        kind = LOW_COPY_KINDS.get(np.dtype(ins[12].dtype).name)
        if kind is None or np.dtype(outs[4].dtype) != np.dtype(ins[12].dtype):
            raise CudaKernelError(
                f'kernel "{spec.name}": the low-precision copy must be bfloat16 or float16 '
                f"with its next value of the same dtype, got {describe([ins[12], outs[4]])}"
            )
        low = [ins[12].data.ptr, outs[4].data.ptr, kind]
    return [a.data.ptr for a in (*ins[:12], *outs[:4])] + low + [numel(p)]


def launch_adam_group(
    spec: KernelSpec,
    group: list[tuple[list[Any], list[Any]]],
    params: Params,
    ctx: LoadContext,
) -> list[Launch]:
    """One aicfc_adam_multi_tensor_f32 launch over every (inputs, outputs) of `group` (each
    with or without a low-precision copy: kernels/optim.cu)."""
    rows = [_adam_row(spec, ins, outs) for ins, outs in group]
    sizes = [r[-1] for r in rows]
    chunk = adam_chunk(sum(sizes), ctx.sm_count)
    chunks = _chunks(sizes, chunk)
    meta = ctx.table(
        np.array([x for r in rows for x in r] + [x for c in chunks for x in c], dtype=np.int64)
    )
    ws = ctx.workspace(256)
    scalars = {
        "meta": meta.data.ptr,
        "ntensors": len(rows),
        "nchunks": len(chunks),
        "chunk": chunk,
        "decoupled_weight_decay": int(bool(param(params, "decoupled_weight_decay"))),
    }
    flat = [a for ins, outs in group for a in (*ins, *outs)]
    launch = kernel_launch(
        spec, (len(chunks),), (THREADS,), [ws], scalars, keepalive=[meta, ws, *flat]
    )
    launch.shapes = f"{len(rows)} tensors: " + describe([ins[0] for ins, _ in group])
    return [launch]


def launch_adam(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """One adam_step launch: the multi-tensor kernel over a list of one tensor."""
    return launch_adam_group(spec, [(ins, outs)], params, ctx)


def launch_clip_grad_norm(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """Gradients (any number, float32) -> (total_norm, clip_coef): one launch, a block per
    chunk and the partials in a workspace that the last block adds in chunk order."""
    if not ins or len(outs) != 2:
        raise CudaKernelError(
            f'kernel "{spec.name}" takes gradients and gives total_norm and clip_coef, got '
            f"{describe(ins)} -> {describe(outs)}"
        )
    for i, g in enumerate(ins):
        if str(g.dtype) != "float32":
            raise CudaKernelError(
                f'kernel "{spec.name}": gradient #{i} must be float32, got {describe([g])}'
            )
    expect_scalars(spec, "float32", total_norm=outs[0], clip_coef=outs[1])
    max_norm = number(spec, params, "max_norm", float)
    if not 0.0 < max_norm < float("inf"):
        raise CudaKernelError(
            f'kernel "{spec.name}": max_norm = {max_norm} is not a positive finite number'
        )
    sizes = [numel(g) for g in ins]
    chunk = adam_chunk(sum(sizes), ctx.sm_count)
    chunks = _chunks(sizes, chunk)
    rows = [x for g, n in zip(ins, sizes, strict=True) for x in (g.data.ptr, n)]
    meta = ctx.table(np.array(rows + [x for c in chunks for x in c], dtype=np.int64))
    ws = ctx.workspace(16 + 8 * len(chunks))
    scalars = {
        "meta": meta.data.ptr,
        "ntensors": len(ins),
        "nchunks": len(chunks),
        "chunk": chunk,
        "max_norm": max_norm,
    }
    launch = kernel_launch(
        spec, (len(chunks),), (THREADS,), [*outs, ws], scalars, keepalive=[meta, ws, *ins]
    )
    launch.shapes = f"{len(ins)} tensors: " + describe(ins)
    return [launch]


# ----------------------------------------------------------------------------
# Scalar bookkeeping: the schedule and the accumulation counter
# ----------------------------------------------------------------------------


def _double_bits(x: float) -> int:
    """The int64 whose bits are the double `x` (how the table carries a coefficient)."""
    return int(struct.unpack("<q", struct.pack("<d", float(x)))[0])


def schedule_table(
    kinds: str, milestones: tuple[int, ...], coefficients: tuple[float, ...]
) -> list[int]:
    """Per segment: (kind code, first step, its coefficients as double bits)."""
    rows: list[int] = []
    starts = (0, *milestones)
    for k, name in enumerate(split_kinds(kinds)):
        cs = coefficients[k * COEFFICIENTS_PER_SEGMENT : (k + 1) * COEFFICIENTS_PER_SEGMENT]
        rows += [KINDS_BY_NAME[name].code, int(starts[k]), *(_double_bits(c) for c in cs)]
    return rows


def launch_lr_schedule(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(last_epoch, apply, initial_lr...) -> (new_last_epoch, lr...): one thread."""
    epoch, apply, *initial = ins
    new_epoch, *lrs = outs
    if not initial or len(lrs) != len(initial):
        raise CudaKernelError(
            f'kernel "{spec.name}": one lr result per initial_lr, got {describe(ins)} -> '
            f"{describe(outs)}"
        )
    expect_scalars(spec, "int64", last_epoch=epoch, new_last_epoch=new_epoch)
    expect_scalars(spec, "float32", apply=apply)
    for i, (b, lr) in enumerate(zip(initial, lrs, strict=True)):
        expect_scalars(spec, "float64", **{f"initial_lr #{i}": b, f"lr #{i}": lr})
    kinds = str(param(params, "kinds"))
    milestones = tuple(int(m) for m in param(params, "milestones"))
    coefficients = tuple(float(c) for c in param(params, "coefficients"))
    pointers = [x for b, lr in zip(initial, lrs, strict=True) for x in (b.data.ptr, lr.data.ptr)]
    table = schedule_table(kinds, milestones, coefficients)
    meta = ctx.table(np.array(pointers + table, dtype=np.int64))
    scalars = {
        "meta": meta.data.ptr,
        "ngroups": len(initial),
        "nsegments": len(split_kinds(kinds)),
    }
    return [
        kernel_launch(
            spec, (1,), (32,), [epoch, apply, new_epoch], scalars, keepalive=[meta, *ins, *lrs]
        )
    ]


def launch_accumulation_step(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """count -> (count', apply): one thread."""
    (count,) = ins
    new_count, apply = outs
    expect_scalars(spec, "int64", count=count, new_count=new_count)
    expect_scalars(spec, "float32", apply=apply)
    every = number(spec, params, "every", int)
    if every < 1:
        raise CudaKernelError(f'kernel "{spec.name}": every = {every} is below 1')
    return [kernel_launch(spec, (1,), (32,), [count, new_count, apply], {"every": every})]


def launch_accumulate_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(grad, accum, reset) -> (mean, accum') of n elements, a grid-stride loop."""
    grad, accum, reset = ins
    n = numel(grad)
    expect_operands(spec, n, [grad, accum], outs)
    expect_scalars(spec, "float32", reset=reset)
    every = number(spec, params, "every", int)
    if every < 1:
        raise CudaKernelError(f'kernel "{spec.name}": every = {every} is below 1')
    return [
        kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, *outs], {"every": every, "n": n})
    ]
