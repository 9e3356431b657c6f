"""Launch dependencies of an exec program, and a schedule of them over a few streams.

A captured CUDA graph orders its nodes only by its edges. Captured from one
stream, the step is a chain: each launch waits for the one before it, even
where they share no memory (a layer's dX and dW products both only read dZ).
Here the edges come from memory instead, the hazards of a pipeline (Hennessy
and Patterson's RAW, WAR, WAW):

- launch j depends on an earlier launch i when j reads bytes that i writes
  (read-after-write), writes bytes that i reads (write-after-read) or writes
  bytes that i writes (write-after-write);
- bytes are `Region`s, byte ranges of one memory space: a param or state is
  its store buffer, a planned tmp buffer its range of the arena (two planned
  buffers that share bytes conflict, whatever their names), any other buffer
  its own allocation. An in-place output is the same slot as its input, hence
  the same region;
- hidden scratch memory that several launches share (cuBLASLt's one workspace
  per backend) is a region too, written by each launch that uses it.

`dependencies` gives, for each launch, every earlier launch it conflicts with;
`direct` keeps the edges that are not implied by others (the transitive
reduction; the graph needs no more). `schedule` then assigns launches, in
program order, to at most `max_streams` streams and says which completion
events each launch waits for, so that issuing them with event record/wait
(runtime/cuda/capture.py, `issue_schedule`) orders every conflicting pair, and only
those, plus whatever stream order adds when streams run out. The program order
is always a valid topological order (dependencies point backwards), so one
stream reproduces the sequential step exactly.

Pure Python over plain data (runtime/plan.py's ExecPlan): no GPU needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from aicfc.runtime.plan import ExecPlan, LaunchStep, PlanStep

ARENA = "arena"
"""The memory space of planned tmp buffers (exec.alloc with an offset)."""


@dataclass(frozen=True)
class Region:
    """Bytes [start, stop) of one memory space (an allocation, the arena, a scratch buffer)."""

    space: str
    start: int
    stop: int

    def overlaps(self, other: Region) -> bool:
        """True when both regions hold a common byte (an empty region holds none)."""
        return self.space == other.space and self.start < other.stop and other.start < self.stop


@dataclass(frozen=True)
class Access:
    """What one launch (or a group of launches issued together) reads and writes."""

    reads: tuple[Region, ...]
    writes: tuple[Region, ...]

    def conflicts_after(self, earlier: Access) -> bool:
        """True when this access must wait for `earlier` (RAW, WAR or WAW)."""
        return (
            _meets(earlier.writes, self.reads)
            or _meets(earlier.reads, self.writes)
            or _meets(earlier.writes, self.writes)
        )

    @staticmethod
    def union(accesses: Iterable[Access], extra_writes: Sequence[Region] = ()) -> Access:
        """One access covering `accesses` (a group issued as one node) plus `extra_writes`."""
        items = list(accesses)
        return Access(
            tuple(r for a in items for r in a.reads),
            tuple(r for a in items for r in a.writes) + tuple(extra_writes),
        )


def _meets(a: Sequence[Region], b: Sequence[Region]) -> bool:
    return any(x.overlaps(y) for x in a for y in b)


def buffer_regions(plan: ExecPlan) -> tuple[Region, ...]:
    """The region of every buffer of `plan`, by slot.

    params and state: their store buffer (`store:<name>`; the store keeps one
    array per name). Planned tmp buffers: `[offset, offset + nbytes)` of the
    arena. Anything else (inputs, constants, unplanned tmp buffers): its own
    allocation (`slot:<slot>`).
    """
    out = []
    for b in plan.buffers:
        if b.role in ("param", "state"):
            out.append(Region(f"store:{b.name}", 0, b.nbytes))
        elif b.role == "tmp" and b.offset is not None:
            out.append(Region(ARENA, b.offset, b.offset + b.nbytes))
        else:
            out.append(Region(f"slot:{b.slot}", 0, b.nbytes))
    return tuple(out)


def step_access(step: PlanStep, regions: Sequence[Region]) -> Access:
    """The regions that one exec step reads (its inputs, a copy's source, a collective's
    tensors) and writes (its outputs, a copy's dest, a collective's tensors and bucket)."""
    return Access(tuple(regions[i] for i in step.reads()), tuple(regions[o] for o in step.writes()))


def plan_accesses(plan: ExecPlan) -> list[Access]:
    """`step_access` of every step of `plan`, in program order."""
    regions = buffer_regions(plan)
    return [step_access(s, regions) for s in plan.steps]


def scratch_region(name: str) -> Region:
    """The region of shared scratch memory `name` (a cuBLASLt workspace): every launch
    that names it writes all of it."""
    return Region(f"scratch:{name}", 0, 1)


def node_access(
    plan: ExecPlan,
    indices: Sequence[int],
    regions: Sequence[Region],
    scratch: Iterable[str] = (),
) -> Access:
    """What a node issuing steps `indices` of `plan` together (a multi-tensor group, or
    one step) reads and writes, with the shared scratch its launches name."""
    return Access.union(
        (step_access(plan.steps[i], regions) for i in indices),
        [scratch_region(name) for name in sorted(set(scratch))],
    )


def dependencies(accesses: Sequence[Access]) -> list[frozenset[int]]:
    """For each launch, every earlier launch it conflicts with (RAW, WAR or WAW)."""
    return [
        frozenset(i for i in range(j) if accesses[j].conflicts_after(accesses[i]))
        for j in range(len(accesses))
    ]


def ancestors(deps: Sequence[Iterable[int]]) -> list[int]:
    """For each launch, the bit set (bit i = launch i) of launches it transitively waits for."""
    out: list[int] = []
    for j, ds in enumerate(deps):
        bits = 0
        for i in ds:
            if not 0 <= i < j:
                raise ValueError(f"launch {j} depends on launch {i}, which is not earlier")
            bits |= out[i] | (1 << i)
        out.append(bits)
    return out


def direct(deps: Sequence[Iterable[int]]) -> list[frozenset[int]]:
    """The transitive reduction: the dependencies not implied through another dependency."""
    anc = ancestors(deps)
    out = []
    for ds in deps:
        ds = frozenset(ds)
        implied = 0
        for i in ds:
            implied |= anc[i]
        out.append(frozenset(i for i in ds if not implied >> i & 1))
    return out


def longest_chain(deps: Sequence[Iterable[int]]) -> int:
    """The most launches on one dependency path (the graph's critical path, in nodes)."""
    depth: list[int] = []
    for ds in deps:
        depth.append(1 + max((depth[i] for i in ds), default=0))
    return max(depth, default=0)


@dataclass(frozen=True)
class Issue:
    """One launch of a schedule, issued in this order.

    stream: 0 is the origin (the capturing stream), 1.. the forked ones.
    fork:   the first launch of a forked stream: that stream first waits for the
            fork event recorded on the origin before any launch.
    waits:  launches whose completion events this one waits for first.
    record: record this launch's completion event after it (a later launch on
            another stream, or the final join, waits for it).
    """

    node: int
    stream: int
    fork: bool
    waits: tuple[int, ...]
    record: bool


@dataclass(frozen=True)
class Schedule:
    """Launches in program order with their streams and waits; `joins`: the launches
    whose events the origin waits for at the end (the last launch of each forked stream
    the origin does not already follow). `streams` counts the streams used."""

    issues: tuple[Issue, ...]
    joins: tuple[int, ...]
    streams: int

    @property
    def branched(self) -> bool:
        return self.streams > 1


def schedule(deps: Sequence[Iterable[int]], max_streams: int = 4) -> Schedule:
    """Assign launches (in program order) to at most `max_streams` streams.

    Each launch goes, in this preference: on a stream whose last launch is one
    of its dependencies (no event needed for that one); else on a stream whose
    last launch it transitively waits for anyway; else on an unused stream;
    else on the stream whose last launch is earliest (an edge the program does
    not need, but a correct one). It then waits for the events of the
    dependencies that its stream is not already known to follow. With
    max_streams=1 everything is one chain in program order.
    """
    if max_streams < 1:
        raise ValueError(f"max_streams must be at least 1, got {max_streams}")
    deps = [frozenset(d) for d in deps]
    anc = ancestors(deps)
    need = direct(deps)
    tails: list[int | None] = [None] * max_streams
    known = [0] * max_streams  # bit set of launches each stream is known to follow
    events = [0] * len(deps)  # what a launch's completion event covers (itself and before)
    plan: list[tuple[int, int, bool, tuple[int, ...]]] = []
    recorded: set[int] = set()
    for n, ds in enumerate(need):
        s = _pick(n, ds, anc[n], tails)
        fork = s > 0 and tails[s] is None
        waits = tuple(sorted(d for d in ds if not known[s] >> d & 1))
        for d in waits:
            known[s] |= events[d]
            recorded.add(d)
        known[s] |= 1 << n
        events[n] = known[s]
        tails[s] = n
        plan.append((n, s, fork, waits))
    joins = []
    for s in range(1, max_streams):
        t = tails[s]
        if t is not None and not known[0] >> t & 1:
            joins.append(t)
            known[0] |= events[t]
            recorded.add(t)
    issues = tuple(Issue(n, s, f, w, n in recorded) for n, s, f, w in plan)
    used = sum(t is not None for t in tails) or 1
    return Schedule(issues, tuple(joins), used)


def _pick(n: int, ds: frozenset[int], anc: int, tails: list[int | None]) -> int:
    for s, t in enumerate(tails):
        if t is not None and t in ds:
            return s
    for s, t in enumerate(tails):
        if t is not None and anc >> t & 1:
            return s
    if tails[0] is None:
        return 0
    for s, t in enumerate(tails):
        if t is None:
            return s
    return min(range(len(tails)), key=lambda s: tails[s] or 0)


def view_aliases(plan: ExecPlan, is_view: Callable[[LaunchStep], bool]) -> dict[int, int]:
    """Result slot -> the slot whose bytes it may share, for the launches `is_view` names
    (a reshape: the same bytes read with another shape), where that is safe.

    Launch s making Y from X qualifies when Y is a tmp buffer that only s writes, and no
    step after s, up to the last read of Y (the end, for a program output), writes bytes
    of X's storage (X itself in place, a param's update, an arena buffer planned into the
    same bytes after X's last use). Y then names X's storage (the storage X itself
    shares, along a chain of views), so the copy is not needed; `aliased_regions` makes
    the schedule see it there.
    """
    regions = buffer_regions(plan)
    steps = plan.steps
    writers: dict[int, list[int]] = {}
    last_read: dict[int, int] = {}
    for k, step in enumerate(steps):
        for slot in step.writes():
            writers.setdefault(slot, []).append(k)
        for slot in step.reads():
            last_read[slot] = k
    for _, slot in plan.outputs:
        last_read[slot] = len(steps)
    base: dict[int, int] = {}
    for k, step in enumerate(steps):
        if not isinstance(step, LaunchStep) or len(step.inputs) != 1 or not is_view(step):
            continue
        (x,), (y,) = step.inputs, step.outputs
        if plan.buffers[y].role != "tmp" or writers.get(y) != [k]:
            continue
        root = base.get(x, x)
        if plan.buffers[root].nbytes != plan.buffers[y].nbytes:
            continue
        until = last_read.get(y, k)
        storage = regions[root]
        clobbered = any(
            regions[slot].overlaps(storage)
            for t in range(k + 1, min(until, len(steps) - 1) + 1)
            for slot in steps[t].writes()
        )
        if not clobbered:
            base[y] = root
    return base


def aliased_regions(regions: Sequence[Region], aliases: dict[int, int]) -> tuple[Region, ...]:
    """`regions` with each aliased slot's region replaced by its storage's."""
    return tuple(regions[aliases.get(s, s)] for s in range(len(regions)))
