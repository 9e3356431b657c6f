"""Launchers of kernels/cross_entropy.cu: the fused softmax cross-entropy and its gradient
over many classes (a language model's head, V from 65 to 50,257).

A team of `team(V)` threads per row (about 32 classes a thread, 32 to 1024 threads),
`256 / team` rows per block, one pass over the rows. The loss is reduced
deterministically through a workspace: each block's partial, then the last block adds
them in a fixed order and resets the ticket for the next replay. A bias gradient (the
column sum of dlogits, where the head had a bias) follows as a reduce_sum launch.
"""

from __future__ import annotations

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import CudaKernelError, Launch, kernel_launch
from aicfc.runtime.cuda.launchers.common import (
    Buffers,
    LoadContext,
    Params,
    cdiv,
    expect_numel,
    rows_shape,
)
from aicfc.runtime.cuda.launchers.layernorm import pow2_at_least
from aicfc.runtime.cuda.launchers.reduce import launch_reduce_sum
from aicfc.runtime.registry import KernelSpec

MAX_TEAM = 1024


def cross_entropy_block(v: int) -> tuple[int, int]:
    """(team, rows per block): about 32 classes a thread, a team of 32 to 1024."""
    team = min(MAX_TEAM, max(32, pow2_at_least(cdiv(v, 32))))
    return team, max(1, 256 // team)


def cross_entropy_grid(n: int, v: int) -> tuple[int]:
    return (max(1, cdiv(n, cross_entropy_block(v)[1])),)


def cross_entropy_workspace(n: int, v: int) -> int:
    """Bytes: the ticket, then one float partial per block from byte 256."""
    return 256 + 4 * cross_entropy_grid(n, v)[0]


def launch_softmax_cross_entropy(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """(logits [..., V], labels [...], dloss []) -> (loss [], dlogits [..., V][, dbias [V]])."""
    logits, labels, dloss = ins
    n, v = rows_shape(spec, "logits", logits)
    if n * v > 2**31 - 1 or n < 1:
        raise CudaKernelError(f'kernel "{spec.name}": {n} rows of {v} classes do not fit int32')
    dbias = outs[2] if len(outs) > 2 else None
    expect_numel(spec, n, labels=labels)
    expect_numel(spec, 1, dloss=dloss, loss=outs[0])
    expect_numel(spec, n * v, dlogits=outs[1])
    expect_numel(spec, v, dbias=dbias)
    ws = ctx.workspace(cross_entropy_workspace(n, v))
    fused = kernel_launch(
        spec,
        cross_entropy_grid(n, v),
        cross_entropy_block(v),
        [logits, labels, dloss, outs[0], outs[1], ws],
        {"N": n, "V": v},
        keepalive=[ws],
    )
    if dbias is None:
        return [fused]
    reduce = registry.get("cuda.reduce_sum_f32")
    rows = {"axes": tuple(range(len(outs[1].shape) - 1))}  # every dim but the classes
    return [fused, *launch_reduce_sum(reduce, [outs[1]], [dbias], rows, ctx)]
