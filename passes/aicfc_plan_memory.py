"""aicfc-plan-memory: tmp buffers whose lifetimes do not overlap share one arena.

The launches and copies of `exec.graph` run in a fixed order (and are replayed
in that order), so a tmp buffer's lifetime is the closed interval of
positions from its first use (the first write) to its last use (the last
read); a buffer that an `exec.output` reads lives to the end of the step
(docs/design.md#memory-planning). Two buffers may share bytes only when their
intervals are disjoint. Closed intervals mean a launch's inputs never share
storage with its outputs unless the IR aliases them explicitly.

Disjoint in program order is not enough for a branched CUDA graph
(runtime/schedule.py): a buffer written into bytes that a launch on a parallel
branch last read adds a write-after-read wait between the branches, an edge
that the data flow does not have (the small MLP's dW2 product held its
layer's dW1 back this way). So, with `branches=true` (the default), a later
buffer may reuse an earlier one's bytes only when the data flow already
orders every use of the earlier buffer before every use of the later one:
the hazards (read-after-write, write-after-read, write-after-write) of the
launches on the buffers themselves, as if no two buffers shared a byte, and
their transitive closure. Reuse then adds no edge to the graph. `branches=false`
reuses by program-order lifetimes only (a smaller arena, for a one-stream
chain).

Placement is a greedy best fit by decreasing size (the strategy of XLA's
GlobalDecreasingSizeBestFitHeap): buffers are placed largest first (ties:
earliest first use); each goes into the smallest gap, between the buffers
already placed whose lifetimes overlap its own, that holds it at an
`alignment`-byte offset, else after the last of them. Every offset is a
multiple of `alignment`; the arena size is the largest end rounded up to
`alignment`. This is sound (no two live buffers overlap) but not optimal
(optimal offset assignment is NP-hard).

A reshape's result is its operand's bytes read with another shape: the two form a view
group (exec.view_groups: the reshape is the result's only writer and nothing writes the
group while the result lives) and are placed as one buffer, live from the first use of
either to the last, so the backends read the operand's bytes instead of copying them
(runtime/schedule.py view_aliases). Without that, the operand's bytes were free for reuse
right after the reshape and the runtime had to copy (nanoGPT's step: 24 of 50 copied).

Sets each `exec.alloc`'s `offset` and the program's `arena_size` (bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import exec as ex
from aicfc.runtime.schedule import Access, Region, ancestors, dependencies


def _align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def plan(
    sizes: list[int],
    spans: list[tuple[int, int]],
    alignment: int,
    ordered: Callable[[int, int], bool] | None = None,
) -> tuple[list[int], int]:
    """Offsets of buffers of `sizes` bytes live over `spans`, and the arena size (module doc).

    ordered(a, b), for buffers a and b with disjoint spans, a's before b's: whether b may
    reuse a's bytes (None: always).
    """
    order = sorted(range(len(sizes)), key=lambda k: (-sizes[k], spans[k][0], k))
    offsets: dict[int, int] = {}

    def apart(j: int, k: int) -> bool:
        (fj, lj), (fk, lk) = spans[j], spans[k]
        if fj <= lk and fk <= lj:
            return False
        return ordered is None or (ordered(j, k) if lj < fk else ordered(k, j))

    for k in order:
        busy = sorted((off, off + sizes[j]) for j, off in offsets.items() if not apart(j, k))
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for start, stop in busy:
            if start - cursor >= sizes[k] and (best is None or start - cursor < best[0]):
                best = (start - cursor, cursor)
            cursor = max(cursor, _align_up(stop, alignment))
        offsets[k] = best[1] if best is not None else cursor
    top = max((offsets[k] + sizes[k] for k in offsets), default=0)
    return [offsets[k] for k in range(len(sizes))], _align_up(top, alignment)


def data_order(program: ex.ProgramOp) -> list[int]:
    """For each position of the capture region, the bit set (bit i: position i) of the
    positions it follows through hazards on its buffers, each buffer its own memory
    (runtime/schedule.py's rules, with no two buffers sharing a byte)."""
    index: dict[SSAValue, int] = {}

    def region(v: SSAValue) -> Region:
        return Region(f"buffer:{index.setdefault(v, len(index))}", 0, 1)

    accesses = []
    for op in ex.launches(program):
        if isinstance(op, ex.LaunchOp):
            reads: Sequence[SSAValue] = op.inputs
            writes: Sequence[SSAValue] = op.outputs
        elif isinstance(op, ex.CopyOp):
            reads, writes = (op.source,), (op.dest,)
        else:
            reads = writes = ()
        accesses.append(Access(tuple(region(v) for v in reads), tuple(region(v) for v in writes)))
    return ancestors(dependencies(accesses))


def uses_of(alloc: ex.AllocOp, positions: dict[int, int], end: int) -> list[int]:
    """The capture-region positions (`positions`: by id of op) that use `alloc`'s buffer
    (an exec.output: `end`)."""
    return [positions.get(id(u.operation), end) for u in alloc.result.uses]


def plan_program(program: ex.ProgramOp, alignment: int, branches: bool = True) -> None:
    """Set every exec.alloc's offset and the program's arena_size.

    Lifetimes follow the exec dialect's rule (`tmp_lifetimes`), the one its verifier
    checks every planned program against; the members of a view group (`view_groups`:
    a reshape's result and its operand) are placed as one buffer live over the union of
    their lifetimes; `branches`: reuse only what the data flow orders (module doc).
    """
    lifetimes = ex.tmp_lifetimes(program)
    views = ex.view_groups(program)
    group: dict[ex.AllocOp, list[ex.AllocOp]] = {}
    for a in lifetimes:
        group.setdefault(views.get(a, a), []).append(a)
    allocs = list(group)
    live = [[lifetimes[m] for m in group[a] if lifetimes[m][0] >= 0] for a in allocs]
    spans = [(min(f for f, _ in ms), max(t for _, t in ms)) if ms else (-1, -1) for ms in live]
    sizes = [ex.buffer_type(a.result).nbytes() for a in allocs]
    ordered = None
    if branches:
        ops = ex.launches(program)
        positions = {id(op): k for k, op in enumerate(ops)}
        anc = data_order(program)
        uses = [[u for m in group[a] for u in uses_of(m, positions, len(ops))] for a in allocs]
        masks = [sum(1 << u for u in set(us) if u < len(ops)) for us in uses]

        def ordered(a: int, b: int) -> bool:
            # every use of a is an ancestor of every launch that uses b (an output reads
            # b after the whole step; a buffer an output reads lives to the end)
            if any(u >= len(ops) for u in uses[a]):
                return False
            return all(v >= len(ops) or anc[v] & masks[a] == masks[a] for v in uses[b])

    offsets, arena = plan(sizes, spans, alignment, ordered)
    for a, off in zip(allocs, offsets, strict=True):
        for m in group[a]:
            m.offset = IntegerAttr(off, i64)
    program.arena_size = IntegerAttr(arena, i64)


@dataclass(frozen=True)
class AicfcPlanMemoryPass(ModulePass):
    """Give tmp buffers offsets into one arena. enable=false: do nothing; branches=false:
    reuse bytes by program-order lifetimes alone (module doc)."""

    name = "aicfc-plan-memory"

    enable: bool = True
    alignment: int = 256
    branches: bool = True

    def __post_init__(self) -> None:
        # A bad option is a command-line mistake: refuse it before any IR is read.
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise ValueError(
                f"aicfc-plan-memory: alignment must be a power of two, got {self.alignment}"
            )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.enable:
            return
        for program in ex.programs(op):
            plan_program(program, self.alignment, self.branches)
