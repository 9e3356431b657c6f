"""Launchers of kernels/optim.cu: SGD (with momentum) and multi-tensor Adam.

Adam launches of one program are grouped (runtime/cuda/launch.py `group_steps`):
consecutive `autodiff.adam_step` launches with one kernel flagged "multi_tensor" and
equal hyperparameters become one launch over a device tensor list (PyTorch's
multi-tensor apply), so every parameter is updated by a single kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicfc.dialects.autodiff import AdamStepOp, SgdStepOp
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    LoadContext,
    Params,
    expect_operands,
    grid_1d,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec


def launch_sgd(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
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
        **{k: param(params, k, d) for k, d in SgdStepOp.DEFAULTS.items()},
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
    params: Params,
    ctx: LoadContext,
) -> list[Launch]:
    """One aicfc_adam_multi_tensor_f32 launch over every (inputs, outputs) of `group`."""
    rows: list[list[int]] = []
    sizes: list[int] = []
    for ins, outs in group:
        if len(ins) != 5 or len(outs) != 4:
            raise CudaKernelError(
                f'kernel "{spec.name}" takes param, grad, exp_avg, exp_avg_sq and step, and '
                f"gives their next values, got {describe(ins)} -> "
                f"{describe(outs)}"
            )
        p, g, m, v, s = ins
        if not all(numel(a) == numel(p) for a in (g, m, v, *outs[:3])):
            raise CudaKernelError(
                f'kernel "{spec.name}": param, grad, exp_avg, exp_avg_sq and their next values '
                f"must have one shape, got {describe([*ins, *outs])}"
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
        **{k: param(params, k, d) for k, d in AdamStepOp.DEFAULTS.items()},
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
