"""Launchers of kernels/amp.cu: dynamic loss scaling (unscale_grad, amp_select, update_scale)."""

from __future__ import annotations

from aicfc.dialects.autodiff import UpdateScaleOp
from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    THREADS,
    Buffers,
    LoadContext,
    Params,
    expect_numel,
    grid_1d,
    numel,
    param,
)
from aicfc.runtime.registry import KernelSpec

CLEAR = "cuda.amp_clear_f32"


def launch_unscale_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """found = 0 (aicfc_amp_clear_f32), then out = g / scale with found = 1 on a non-finite."""
    g, scale = ins
    out, found = outs
    n = numel(out)
    expect_numel(spec, n, grad=g)
    expect_numel(spec, 1, scale=scale, found_inf=found)
    clear = kernel_launch(registry.get(CLEAR), (1,), (1,), [found], {})
    return [
        clear,
        kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [g, scale, out, found], {"n": n}),
    ]


def launch_amp_select(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """out = found != 0 ? previous : updated, n elements."""
    found, updated, previous = ins
    n = numel(outs[0])
    expect_numel(spec, n, updated=updated, previous=previous)
    expect_numel(spec, 1, found_inf=found)
    return [kernel_launch(spec, grid_1d(ctx, n), (THREADS,), [*ins, outs[0]], {"n": n})]


def launch_update_scale(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """One thread: the next scale and growth tracker (GradScaler's defaults where unset)."""
    d = UpdateScaleOp.DEFAULTS
    scalars = {
        "growth": float(param(params, "growth_factor", d["growth_factor"])),
        "backoff": float(param(params, "backoff_factor", d["backoff_factor"])),
        "interval": int(param(params, "growth_interval", d["growth_interval"])),
    }
    return [kernel_launch(spec, (1,), (1,), [*ins, *outs], scalars)]
