"""aicfc-plan-memory: tmp buffers whose lifetimes do not overlap share one arena.

The launches and copies of `exec.graph` run in a fixed order (and are replayed
in that order), so a tmp buffer's lifetime is the closed interval of
positions from its first use (the first write) to its last use (the last
read); a buffer that an `exec.output` reads lives to the end of the step
(docs/design.md#memory-planning). Two buffers may share bytes only when their
intervals are disjoint. Closed intervals mean a launch's inputs never share
storage with its outputs unless the IR aliases them explicitly.

Placement is a greedy best fit by decreasing size (the strategy of XLA's
GlobalDecreasingSizeBestFitHeap): buffers are placed largest first (ties:
earliest first use); each goes into the smallest gap, between the buffers
already placed whose lifetimes overlap its own, that holds it at an
`alignment`-byte offset, else after the last of them. Every offset is a
multiple of `alignment`; the arena size is the largest end rounded up to
`alignment`. This is sound (no two live buffers overlap) but not optimal
(optimal offset assignment is NP-hard).

Sets each `exec.alloc`'s `offset` and the program's `arena_size` (bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from aicfc.dialects import exec as ex


def _align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def plan(sizes: list[int], spans: list[tuple[int, int]], alignment: int) -> tuple[list[int], int]:
    """Offsets of buffers of `sizes` bytes live over `spans`, and the arena size (module doc)."""
    order = sorted(range(len(sizes)), key=lambda k: (-sizes[k], spans[k][0], k))
    offsets: dict[int, int] = {}
    for k in order:
        first, last = spans[k]
        busy = sorted(
            (off, off + sizes[j])
            for j, off in offsets.items()
            if spans[j][0] <= last and first <= spans[j][1]
        )
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for start, stop in busy:
            if start - cursor >= sizes[k] and (best is None or start - cursor < best[0]):
                best = (start - cursor, cursor)
            cursor = max(cursor, _align_up(stop, alignment))
        offsets[k] = best[1] if best is not None else cursor
    top = max((offsets[k] + sizes[k] for k in offsets), default=0)
    return [offsets[k] for k in range(len(sizes))], _align_up(top, alignment)


def plan_program(program: ex.ProgramOp, alignment: int) -> None:
    """Set every exec.alloc's offset and the program's arena_size.

    Lifetimes follow the exec dialect's rule (`tmp_lifetimes`), the one its verifier
    checks every planned program against.
    """
    spans = ex.tmp_lifetimes(program)
    allocs = list(spans)
    sizes = [ex.buffer_type(a.result).nbytes() for a in allocs]
    offsets, arena = plan(sizes, [spans[a] for a in allocs], alignment)
    for a, off in zip(allocs, offsets, strict=True):
        a.offset = IntegerAttr(off, i64)
    program.arena_size = IntegerAttr(arena, i64)


@dataclass(frozen=True)
class AicfcPlanMemoryPass(ModulePass):
    """Give tmp buffers offsets into one arena. enable=false: do nothing."""

    name = "aicfc-plan-memory"

    enable: bool = True
    alignment: int = 256

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
            plan_program(program, self.alignment)
