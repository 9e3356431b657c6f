"""From one exec launch (kernel, buffers, params) to bound CUDA launches.

Each CUDA registry entry names its launcher (`KernelSpec.launcher`,
"<module>:<function>"): a function of `runtime/cuda/launchers/<module>.py`, the
module of the entry's kernel family (`kernels/<module>.cu`; "cublaslt" for the
library entries). `launcher_of` resolves that reference once; `launches_for`
calls it. A launcher reads the buffers' shapes and the launch's `params`,
computes the scalars its kernel's ABI names, the grid and the block, and
returns `abi.KernelLaunch`es whose arguments are fixed at load time, so the same
launches run eagerly or captured into a CUDA graph (the launcher contract is in
runtime/cuda/launchers/common.py).

`group_steps` finds the launches that run as one: consecutive launches of one
kernel flagged "multi_tensor" (Adam) with equal params, which
`launchers.optim.launch_adam_group` binds as a single launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import cast

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, describe
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    Launcher,
    LoadContext,
    Params,
)
from aicfc.runtime.registry import KernelSpec

LAUNCHERS_PACKAGE = "aicfc.runtime.cuda.launchers"
"""Where the modules named by `KernelSpec.launcher` live."""


@cache
def resolve_launcher(reference: str) -> Launcher:
    """The function that `reference` ("<module>:<function>") names in LAUNCHERS_PACKAGE.

    Raises CudaKernelError naming the reference when the module or function is missing.
    """
    try:
        found = registry.resolve_launcher(LAUNCHERS_PACKAGE, reference)
    except LookupError as e:
        raise CudaKernelError(str(e)) from None
    return cast(Launcher, found)


def launcher_of(spec: KernelSpec) -> Launcher:
    """The launcher of registry entry `spec`; CudaKernelError naming the kernel if it has
    none or its reference does not resolve."""
    if spec.launcher is None:
        raise CudaKernelError(f'kernel "{spec.name}": no CUDA launcher for op {spec.op}')
    try:
        return resolve_launcher(spec.launcher)
    except CudaKernelError as e:
        raise CudaKernelError(f'kernel "{spec.name}": {e}') from None


def launches_for(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """The bound launches that run `spec` on these buffers.

    Raises CudaKernelError naming the kernel when the buffers do not fit it (their
    count, rank or size) or a parameter is out of its range.
    """
    launcher = launcher_of(spec)
    try:
        return launcher(spec, ins, outs, params, ctx)
    except (ValueError, IndexError) as e:  # unpacking a buffer count the kernel does not take
        raise CudaKernelError(
            f'kernel "{spec.name}" cannot run on inputs ({describe(ins)}) and outputs '
            f"({describe(outs)}): {e}"
        ) from None


@dataclass(frozen=True)
class StepGroup:
    """Consecutive launch steps that run as one launch (multi-tensor Adam), or a single step."""

    indices: tuple[int, ...]


def group_steps(kernels: Sequence[KernelSpec | None], params: Sequence[Params]) -> list[StepGroup]:
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
