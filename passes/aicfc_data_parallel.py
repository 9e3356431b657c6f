"""aicfc-data-parallel: average the gradients over the ranks before the optimizer steps.

Data-parallel training runs the same train step on every rank, each on its own
shard of the batch; if every rank applies the optimizer to the MEAN of the ranks'
gradients, the ranks stay identical and together equal one step on the whole batch
(the loss is a mean over the batch, so its gradient is the mean of the shards'
gradients when the shards are equal in size). This pass makes that exec IR:

    %g = launch ...(...) outs(%g)             # backward, per rank
    launch adam_step(%p, %g, ...)             # optimizer
  ->
    %world = exec.communicator "world" world_size = N
    %g = launch ...(...) outs(%g)
    exec.all_reduce "mean" %world tensors(%g, ...) bucket(%bucket0)
    launch adam_step(%p, %g, ...)

What it does, as PyTorch's DistributedDataParallel does (its `Reducer`):

- the gradients are the `grad` operands of the program's optimizer launches (a
  launch whose kernel's op carries `IS_OPTIMIZER`: the registry names the op, its
  IRDL definition says which operand is `grad`);
- they are packed, in reverse parameter order (the backward produces the last
  layer's gradients first), into buckets of at least `bucket_mb` MiB each (a bucket
  closes when it reaches the size, so the last tensor may overshoot it; one bucket
  per element type), and each bucket is one `exec.all_reduce`: one NCCL call for
  many small gradients;
- each all-reduce goes right after the last launch that writes or reads one of its
  gradients, and before the first optimizer launch that reads one: a bucket is
  reduced as soon as it is ready, so on the GPU it overlaps the backward of the
  earlier layers (the launches it does not depend on; runtime/schedule.py), and
  the optimizer waits only for its own buckets.

It runs on exec IR after aicfc-lower-exec and before aicfc-fold-inplace and
aicfc-plan-memory (the buckets are tmp buffers those plan). A program without an
optimizer launch (@predict) is left as it is. Errors: a program that already has
a communicator "world" (the pass ran twice), an optimizer launch with too few inputs
to hold its gradient, a gradient that is not a tmp buffer,
or a gradient used again after an optimizer launch read it (the reduced value
would leak into it) raise OpError naming the op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass

from aicfc.dialects import exec as ex
from aicfc.dialects.diagnostics import OpError, copy_location
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.tensors import numel
from aicfc.runtime import registry

COMMUNICATOR = "world"
"""The name of the communicator the pass declares (the runtime binds it by this name)."""

MIB = 1 << 20
"""A bucket size of 1 MB means 2**20 bytes, as DDP's bucket_cap_mb."""


def grad_operand(ctx: Context, launch: ex.LaunchOp) -> int | None:
    """The input index of the gradient of an optimizer launch, or None for any other launch
    (and for kernels the registry does not know)."""
    try:
        spec = registry.get(launch.kernel_name)
    except registry.UnknownKernelError:
        return None
    cls = ctx.get_optional_op(spec.op)
    if cls is None or not issubclass(cls, IRDLOperation):
        return None
    if not static_flags(cls) & OpFlag.IS_OPTIMIZER:
        return None
    names = [name for name, _ in cls.get_irdl_definition().operands]
    if "grad" not in names:
        raise OpError(launch, f"optimizer op {spec.op} has no operand named grad")
    at = names.index("grad")
    if at >= len(launch.inputs):
        raise OpError(
            launch,
            f"{launch.kernel_name} has {len(launch.inputs)} input(s); its gradient is input "
            f"{at} (operand grad of {spec.op})",
        )
    return at


def buckets(grads: list[SSAValue], cap_bytes: float) -> list[list[SSAValue]]:
    """`grads` (in the order given) in buckets of one element type each; a bucket closes
    once it holds at least `cap_bytes` (DDP's `compute_bucket_assignment_by_size`)."""
    open_: dict[Attribute, list[SSAValue]] = {}
    size: dict[Attribute, int] = {}
    done: list[list[SSAValue]] = []
    for g in grads:
        t = ex.buffer_type(g)
        key = t.element_type
        open_.setdefault(key, []).append(g)
        size[key] = size.get(key, 0) + t.nbytes()
        if size[key] >= cap_bytes:
            done.append(open_.pop(key))
            size[key] = 0
    done.extend(open_.values())
    return done


def _label(v: SSAValue) -> str:
    if isinstance(v.owner, ex.BufferOp):
        return f'"{v.owner.buffer_name.data}"'
    return f"%{v.name_hint}" if v.name_hint else f"of type {v.type}"


def insert_all_reduces(
    ctx: Context, program: ex.ProgramOp, world_size: int, cap_bytes: float
) -> int:
    """Insert the communicator, the buckets and their all-reduces; returns the bucket count."""
    graph = program.graph()
    ops = list(graph.block.ops)
    pos = {id(op): k for k, op in enumerate(ops)}
    optimizers: dict[int, int] = {}  # position -> grad input index
    grads: list[SSAValue] = []
    first_read: dict[SSAValue, int] = {}
    for k, op in enumerate(ops):
        if not isinstance(op, ex.LaunchOp):
            continue
        at = grad_operand(ctx, op)
        if at is None:
            continue
        optimizers[k] = at
        g = op.inputs[at]
        if not isinstance(g.owner, ex.AllocOp):
            raise OpError(op, f"the gradient {_label(g)} is not a tmp buffer; cannot all-reduce it")
        if g not in first_read:
            grads.append(g)
            first_read[g] = k
    if not grads:
        return 0
    for c in program.communicators():
        if c.comm_name.data == COMMUNICATOR:
            raise OpError(
                c,
                f'the program already has a communicator "{COMMUNICATOR}" (was '
                "aicfc-data-parallel applied twice?)",
            )
    comm = ex.CommunicatorOp(COMMUNICATOR, world_size)
    comm.result.name_hint = COMMUNICATOR
    program.block.insert_op_before(comm, graph)
    after: dict[int, Operation] = {}  # the last op inserted after each position
    groups = buckets(list(reversed(grads)), cap_bytes)
    for n, group in enumerate(groups):
        first = min(first_read[g] for g in group)
        last = -1
        for g in group:
            for use in g.uses:
                u = pos.get(id(use.operation))
                if u is None or u in optimizers:
                    continue
                if u > first:
                    raise OpError(
                        use.operation,
                        f"uses the gradient {_label(g)} after the optimizer launch at position "
                        f"{first} read it; the all-reduced value would change what it computes",
                    )
                last = max(last, u)
        elem = ex.buffer_type(group[0]).element_type
        total = sum(numel(ex.buffer_type(g).get_shape()) for g in group)
        alloc = ex.AllocOp(ex.BufferType((total,), elem, ex.BufferRole.TMP))
        alloc.result.name_hint = f"bucket{n}"
        program.block.insert_op_before(alloc, graph)
        reduce = ex.AllReduceOp(comm.result, group, alloc.result, ex.ReduceOp.MEAN)
        copy_location(ops[first], reduce)
        anchor: Operation | None = after.get(last) or (ops[last] if last >= 0 else None)
        if anchor is None:
            graph.block.insert_op_before(reduce, ops[first])
        else:
            graph.block.insert_op_after(reduce, anchor)
        after[last] = reduce
    return len(groups)


@dataclass(frozen=True)
class AicfcDataParallelPass(ModulePass):
    """Mean all-reduce of the gradients over `world_size` ranks, in `bucket_mb` MiB buckets."""

    name = "aicfc-data-parallel"

    world_size: int = 1
    bucket_mb: float = 25.0

    def __post_init__(self) -> None:
        # A bad option is a command-line mistake: refuse it before any IR is read.
        if isinstance(self.world_size, bool) or self.world_size < 1:
            raise ValueError(
                f"aicfc-data-parallel: world_size must be a positive integer, got {self.world_size}"
            )
        if not (math.isfinite(self.bucket_mb) and self.bucket_mb > 0):
            raise ValueError(
                f"aicfc-data-parallel: bucket_mb must be a positive number of MiB, "
                f"got {self.bucket_mb}"
            )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in ex.programs(op):
            insert_all_reduces(ctx, program, self.world_size, self.bucket_mb * MIB)
