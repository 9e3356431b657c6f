"""Launch dependencies and the multi-stream schedule (runtime/schedule.py), on the CPU.

The dependency sets of a hand-written exec program are written out by hand
below, from the program's buffers and offsets: they are not computed by the
code under test. The schedule is checked by issuing it on fake streams and
events that record the happens-before relation the CUDA rules give (stream
order; a wait orders after the event's record), then asking, for every pair
of conflicting launches, whether the earlier one happens before the later one.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest

from aicfc.runtime.cuda.capture import issue_schedule
from aicfc.runtime.plan import BufferSpec, CopyStep, ExecPlan, LaunchStep
from aicfc.runtime.schedule import (
    ARENA,
    Access,
    Region,
    aliased_regions,
    ancestors,
    buffer_regions,
    dependencies,
    direct,
    plan_accesses,
    schedule,
    step_access,
    view_aliases,
)

# The program, as exec IR would read (ExecPlan is that IR as plain data):
#
#   %a = exec.alloc offset 0 : !exec.buffer<4xf32, tmp>     arena bytes [0, 16)
#   %b = exec.alloc offset 16 : !exec.buffer<4xf32, tmp>    [16, 32)
#   %c = exec.alloc offset 32 : !exec.buffer<4xf32, tmp>    [32, 48)
#   %e = exec.alloc offset 48 : !exec.buffer<4xf32, tmp>    [48, 64)
#   %d = exec.alloc offset 16 : !exec.buffer<2xf32, tmp>    [16, 24): b's first half, b dead after 3
#   0: relu(%x) -> %a
#   1: relu(%w) -> %b
#   2: add(%a, %w) -> %c
#   3: relu(%b) -> %e
#   4: relu(%c) -> %d
#   5: add(%w, %e) -> %w          (in place: %w is param "w")
#   6: exec.copy %e -> %s         (%s is state "s")
#   exec.output "d" %d
X, W, S, A, B, C, E, D = range(8)


def hand_plan() -> ExecPlan:
    f32 = np.dtype(np.float32)
    buffers = (
        BufferSpec(X, "x", "input", (4,), f32),
        BufferSpec(W, "w", "param", (4,), f32),
        BufferSpec(S, "s", "state", (4,), f32),
        BufferSpec(A, "%a", "tmp", (4,), f32, offset=0),
        BufferSpec(B, "%b", "tmp", (4,), f32, offset=16),
        BufferSpec(C, "%c", "tmp", (4,), f32, offset=32),
        BufferSpec(E, "%e", "tmp", (4,), f32, offset=48),
        BufferSpec(D, "%d", "tmp", (2,), f32, offset=16),
    )
    steps = (
        LaunchStep("numpy.relu", (X,), (A,), {}),
        LaunchStep("numpy.relu", (W,), (B,), {}),
        LaunchStep("numpy.add", (A, W), (C,), {}),
        LaunchStep("numpy.relu", (B,), (E,), {}),
        LaunchStep("numpy.relu", (C,), (D,), {}),
        LaunchStep("numpy.add", (W, E), (W,), {}),
        CopyStep(E, S),
    )
    return ExecPlan("p", buffers, steps, (("d", D),), arena_size=64)


EXPECTED_ALL = [
    set(),  # 0 a = relu(x)
    set(),  # 1 b = relu(w): b's bytes [16, 32) only touch a's [0, 16); w is only read
    {0},  # 2 c = a + w: reads a (RAW); reads w, which 1 also only reads
    {1},  # 3 e = relu(b): reads b (RAW)
    {1, 2, 3},  # 4 d = relu(c): RAW c; d's bytes are b's: WAW with 1, WAR with 3
    {1, 2, 3},  # 5 w = w + e in place: RAW e; WAR on w with its readers 1 and 2
    {3},  # 6 s <- e: RAW e; nothing else touches s
]
EXPECTED_DIRECT = [set(), set(), {0}, {1}, {2, 3}, {2, 3}, {3}]
"""Launch 4 waits for 3 only because %d reuses %b's bytes (an arena overlap), and
launch 5 waits for 2 only because it updates %w in place after 2 read it."""


def test_regions_follow_the_plan_offsets_and_the_store():
    plan = hand_plan()
    regions = {b.name: r for b, r in zip(plan.buffers, buffer_regions(plan), strict=True)}
    assert regions["w"] == Region("store:w", 0, 16)
    assert regions["s"] == Region("store:s", 0, 16)
    assert regions["x"].space.startswith("slot:") and regions["x"].stop == 16
    arena = sorted((r.start, r.stop) for r in regions.values() if r.space == ARENA)
    assert arena == [(0, 16), (16, 24), (16, 32), (32, 48), (48, 64)]


def test_hand_written_program_has_exactly_the_expected_dependencies():
    accesses = plan_accesses(hand_plan())
    deps = dependencies(accesses)
    assert [set(d) for d in deps] == EXPECTED_ALL
    assert [set(d) for d in direct(deps)] == EXPECTED_DIRECT


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        ((0, 16), (16, 32), False),  # adjacent bytes
        ((0, 16), (15, 16), True),  # one shared byte
        ((4, 8), (0, 64), True),  # contained
        ((0, 0), (0, 64), False),  # an empty buffer holds no byte
    ],
)
def test_arena_overlap_is_by_byte_range(first, second, conflict):
    one, two = Region(ARENA, *first), Region(ARENA, *second)
    assert Access((two,), ()).conflicts_after(Access((), (one,))) is conflict  # RAW
    assert Access((), (two,)).conflicts_after(Access((one,), ())) is conflict  # WAR
    assert Access((), (two,)).conflicts_after(Access((), (one,))) is conflict  # WAW
    assert one.overlaps(two) is two.overlaps(one) is conflict
    other = Access((Region("slot:9", *second),), ())
    assert not other.conflicts_after(Access((), (one,)))  # another allocation: no overlap


def test_reads_alone_never_conflict():
    r = Region("store:w", 0, 16)
    assert not Access((r,), ()).conflicts_after(Access((r,), ()))


class FakeEvent:
    def __init__(self) -> None:
        self.covers: set[int] | None = None

    def record(self, stream: FakeStream) -> None:
        self.covers = set(stream.done)


class FakeStream:
    """Records what this stream's next launch is ordered after (CUDA's rules)."""

    def __init__(self, log: dict[int, set[int]], forked: bool):
        self.done: set[int] = set()
        self.log = log
        self.joined = not forked  # a forked stream joins the capture through the fork event

    def wait_event(self, event: FakeEvent) -> None:
        assert event.covers is not None, "waited for an event that was never recorded"
        self.done |= event.covers
        self.joined = True

    def launch(self, node: int) -> None:
        assert self.joined, f"launch {node} on a forked stream that never joined the capture"
        assert node not in self.log, f"launch {node} issued twice"
        self.log[node] = set(self.done)
        self.done.add(node)


def run_schedule(deps: list[frozenset[int]], max_streams: int) -> tuple[dict[int, set[int]], Any]:
    """Issue `schedule(direct(deps))` on fake streams; returns each launch's happens-before
    set and the origin stream (whose `done` is what the step's end is ordered after)."""
    plan = schedule(direct(deps), max_streams)
    log: dict[int, set[int]] = {}
    origin = FakeStream(log, forked=False)
    branches = [FakeStream(log, forked=True) for _ in range(plan.streams - 1)]
    events = [FakeEvent() for _ in deps]
    nodes = [lambda stream, n=n: stream.launch(n) for n in range(len(deps))]
    issue_schedule(plan, nodes, origin, branches, events, FakeEvent())
    return log, origin


def assert_respects(deps: list[frozenset[int]], max_streams: int) -> None:
    log, origin = run_schedule(deps, max_streams)
    assert sorted(log) == list(range(len(deps)))
    for j, ds in enumerate(deps):
        for i in ds:
            assert i in log[j], f"launch {j} conflicts with {i} but may run before it finishes"
    assert origin.done == set(range(len(deps))), "a forked stream was not joined at the end"


def test_hand_written_program_schedule_orders_every_conflict():
    deps = dependencies(plan_accesses(hand_plan()))
    for streams in (1, 2, 4):
        assert_respects(deps, streams)
    log, _ = run_schedule(deps, 4)
    # Independent work overlaps: launch 1 does not wait for launch 0, nor 3 for 2.
    assert 0 not in log[1] and 2 not in log[3] and 3 not in log[2]


def test_the_war_and_arena_edges_are_in_the_issued_order():
    """Launch 5 (in-place update of w) must follow launch 2 (a read of w), and launch 4
    (writing b's bytes) must follow launch 3 (a read of b), though no data flows."""
    log, _ = run_schedule(dependencies(plan_accesses(hand_plan())), 4)
    assert 2 in log[5]
    assert 3 in log[4]


def test_one_stream_is_the_sequential_chain():
    plan = schedule(direct(dependencies(plan_accesses(hand_plan()))), 1)
    assert [i.node for i in plan.issues] == list(range(7))
    assert {i.stream for i in plan.issues} == {0}
    assert not plan.branched and plan.joins == ()
    assert all(i.waits == () and not i.record and not i.fork for i in plan.issues)


def test_a_layer_backward_forks_dx_and_dw_and_joins_for_the_optimizer():
    """dZ feeds dX and dW; the next layer's backward needs dX, the optimizer needs both."""
    deps = [frozenset(), frozenset({0}), frozenset({0}), frozenset({1}), frozenset({2, 3})]
    plan = schedule(deps, 4)
    streams = {i.node: i.stream for i in plan.issues}
    assert streams[1] != streams[2]  # dX and dW on different streams
    assert plan.streams == 2
    assert_respects(deps, 4)


def random_deps(rng: random.Random, n: int) -> list[frozenset[int]]:
    """Conflicts of random launches over a few random byte ranges of one arena."""
    accesses = []
    for _ in range(n):
        regions = [
            Region(ARENA, s, s + rng.randint(1, 8))
            for s in (rng.randint(0, 24) for _ in range(rng.randint(1, 3)))
        ]
        k = rng.randint(0, len(regions) - 1)
        accesses.append(Access(tuple(regions[:k]), tuple(regions[k:])))
    return dependencies(accesses)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_never_reorder_conflicting_launches(seed):
    rng = random.Random(seed)
    deps = random_deps(rng, rng.randint(1, 24))
    for streams in (1, 2, 3, 8):
        assert_respects(deps, streams)


def test_direct_keeps_only_edges_not_implied_by_others():
    deps = [frozenset(), frozenset({0}), frozenset({0, 1}), frozenset({0, 1, 2})]
    assert direct(deps) == [frozenset(), frozenset({0}), frozenset({1}), frozenset({2})]
    assert ancestors(deps)[3] == 0b111


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="max_streams must be at least 1"):
        schedule([], 0)
    with pytest.raises(ValueError, match="launch 1 depends on launch 1"):
        ancestors([frozenset(), frozenset({1})])


def test_every_pair_of_a_chain_is_ordered_on_any_stream_count():
    n = 6
    deps = [frozenset(range(j)) for j in range(n)]
    for streams in (1, 4):
        log, _ = run_schedule(deps, streams)
        for i, j in itertools.combinations(range(n), 2):
            assert i in log[j]


# ----------------------------------------------------------------------------
# The small benchmark step (batch 128, 784-256-256-10) as the CuPy backend groups it
# ----------------------------------------------------------------------------

H200 = {"arch": 90, "tensor_core": True, "cublaslt": True, "device": "NVIDIA H200 sm_90"}


def small_step_nodes(
    tf32: bool, branches: bool = True, first_graph: bool = False
) -> tuple[list[str], list[frozenset[int]]]:
    """(the first kernel of each node, the nodes' dependencies) of the small step lowered
    for an H200, grouped and given cuBLASLt workspaces as CupyExecutable does;
    `branches`: aicfc-plan-memory's option (False: reuse by program order alone);
    `first_graph`: the pipeline of the first measured graph (no gemm_epilogue_grad
    fusion, no aicfc-hoist-updates). Without aicfc-fuse-train-step: the per-layer
    kernels (the fused step is one node, test/python/passes/test_fuse_train_step.py)."""
    from xdsl.dialects.builtin import ModuleOp

    from aicfc import nn, optim
    from aicfc.builder import build_train_step
    from aicfc.context import make_context
    from aicfc.dialects import exec as ex
    from aicfc.passes.pipelines import Step, run_steps, train_pipeline
    from aicfc.runtime import registry
    from aicfc.runtime.cuda.launch import group_steps
    from aicfc.runtime.schedule import node_access

    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    fn = build_train_step(model, "cross_entropy", optim.Adam(), (128, 784), np.float32)
    module = ModuleOp([fn])
    steps = train_pipeline("cupy", True, {**H200, "tf32": tf32})
    steps = tuple(s for s in steps if s.stage != "fused-step")
    assert steps[-1].passes == "aicfc-plan-memory"
    option = "true" if branches else "false"
    steps = (*steps[:-1], Step("planned", f"aicfc-plan-memory{{branches={option}}}"))
    if first_graph:
        steps = tuple(
            Step(s.stage, "aicfc-fuse{exclude=gemm_epilogue_grad}")
            if s.stage == "fused-backward"
            else s
            for s in steps
            if s.stage != "hoisted"
        )
    run_steps(make_context(), module, steps)
    program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
    plan = ExecPlan.from_program(program)
    specs = [registry.get(s.kernel) if isinstance(s, LaunchStep) else None for s in plan.steps]
    params = [s.params if isinstance(s, LaunchStep) else {} for s in plan.steps]
    regions = buffer_regions(plan)
    names, accesses, turn = [], [], 0
    for group in group_steps(specs, params):
        spec = specs[group.indices[0]]
        scratch = []
        if spec is not None and "cublaslt" in spec.flags:  # runtime/cuda/cublaslt.py's turns
            scratch, turn = [f"cublaslt-workspace:{turn % 2}"], turn + 1
        names.append(spec.name if spec is not None else "exec.copy")
        accesses.append(node_access(plan, group.indices, regions, scratch))
    return names, dependencies(accesses)


@pytest.mark.parametrize("tf32", [False, True])
def test_small_step_graph_runs_each_layers_dx_and_dw_side_by_side(tf32):
    from aicfc.runtime.schedule import longest_chain

    names, deps = small_step_nodes(tf32, first_graph=True)
    assert len(names) == 12
    assert names[-1] == "cuda.adam_step_multi_tensor_f32"
    anc = ancestors(deps)
    assert anc[-1] == (1 << 11) - 1  # the optimizer follows every other node
    # The 10-wide layer's dX (K = 10) and dW (M = 10) are nodes 4 and 5, the next
    # layer's dX and dW nodes 7 and 8: neither of a pair waits for the other.
    assert names[4] == "cuda.matmul_skinny_nn" and names[5] == "cuda.matmul_skinny_tn"
    assert "cublaslt" in names[8]
    for dx, dw in ((4, 5), (7, 8)):
        assert not anc[dw] >> dx & 1 and not anc[dx] >> dw & 1
    plan = schedule(direct(deps), 4)
    streams = {i.node: i.stream for i in plan.issues}
    assert streams[4] != streams[5] and streams[7] != streams[8]
    # dW3 (5) is joined only by the optimizer, so dW2 (8) takes a third stream.
    assert plan.streams == 3
    # 12 nodes, 10 on the longest path: dW3 and dW2 left it.
    assert longest_chain(deps) == 10
    assert_respects(deps, 4)


# The direct edges of the small step (node: the nodes it waits for), read off its exec IR:
#   0 h1 = relu(x W1^T + b1)   1 h2 = relu(h1 W2^T + b2)   2 logits = h2 W3^T + b3
#   3 loss, dZ3, db3           4 dY2 = dZ3 W3 (dX3)        5 dW3 = dZ3^T h2
#   6 dZ2, db2 = epilogue_grad(dY2, h2)                    7 dY1 = dZ2 W2 (dX2)
#   8 dW2 = dZ2^T h1           9 dZ1, db1 = epilogue_grad(dY1, h1)
#   10 dW1 = dZ1^T x           11 Adam of all six tensors (one multi-tensor launch)
DATA_FLOW_EDGES = [set(), {0}, {1}, {2}, {3}, {3}, {4}, {6}, {6}, {7}, {9}, {5, 8, 10}]
"""The data flow alone: dW3 (5) and dW2 (8) are only waited for by the optimizer."""
PROGRAM_ORDER_EDGES = [set(), {0}, {1}, {2}, {3}, {3}, {4, 5}, {6}, {6}, {7}, {8, 9}, {10}]
"""With reuse by program-order lifetimes (aicfc-plan-memory{branches=false}), the two
write-after-read waits of the first measured graph: dZ2 (6) is written into the bytes of
dZ3, which dW3 (5) reads, and dW1 (10) into bytes over h1, which dW2 (8) reads; the
transitive reduction then drops 10's wait for 9 and the optimizer's for 5 and 8."""


@pytest.mark.parametrize("tf32", [False, True])
def test_small_step_memory_plan_adds_no_wait_between_branches(tf32):
    from aicfc.runtime.schedule import longest_chain

    names, before = small_step_nodes(tf32, branches=False, first_graph=True)
    _, after = small_step_nodes(tf32, branches=True, first_graph=True)
    assert len(names) == 12
    assert [set(d) for d in direct(before)] == PROGRAM_ORDER_EDGES
    assert [set(d) for d in direct(after)] == DATA_FLOW_EDGES
    # The same 12 nodes and 10 on the longest chain (0-1-2-3-4-6-7-9-10-11), but dW3
    # and dW2 now overlap the rest of the backward instead of delaying it.
    assert longest_chain(before) == longest_chain(after) == 10
    assert sum(map(len, direct(after))) == sum(map(len, direct(before)))
    anc = ancestors(after)
    assert not anc[6] >> 5 & 1 and not anc[10] >> 8 & 1
    assert_respects(after, 4)


# The small step as the pipeline compiles it now: each layer's dX product carries the
# backward epilogue below it (gemm_epilogue_grad), and each Adam update follows its
# gradients (aicfc-hoist-updates), grouped where consecutive:
#   0 h1   1 h2   2 logits   3 loss, dZ3, db3   4 Adam(b3)   5 dW3
#   6 dZ2, db2 = gemm_epilogue_grad(dZ3, W3, h2)   7 Adam(b2, W3)   8 dW2
#   9 dZ1, db1 = gemm_epilogue_grad(dZ2, W2, h1)   10 Adam(b1, W2)   11 dW1   12 Adam(W1)
STEP_EDGES = [set(), {0}, {1}, {2}, {3}, {3}, {3}, {5, 6}, {6}, {6}, {8, 9}, {9}, {11}]
"""Adam(b2, W3) waits for dW3 and for the product that last reads W3 (6); Adam(b1, W2)
likewise for dW2 and 9."""


@pytest.mark.parametrize("tf32", [False, True])
def test_small_step_keeps_epilogues_and_updates_off_the_critical_path(tf32):
    from aicfc.runtime.schedule import longest_chain

    first, before = small_step_nodes(tf32, first_graph=True)
    names, deps = small_step_nodes(tf32)
    assert [set(d) for d in direct(deps)] == STEP_EDGES
    assert names[6] == names[9] == "cuda.gemm_epilogue_grad_splitk_nn"
    assert "cuda.epilogue_grad_f32" in first and "cuda.epilogue_grad_f32" not in names
    assert [n for n in names if "adam" in n] == ["cuda.adam_step_multi_tensor_f32"] * 4
    # 12 nodes and 10 on the longest chain before; 13 and 8 now
    # (0-1-2-3-6-9-11-12: the forward, the loss, two dX products, dW1, its update).
    assert (len(first), longest_chain(before)) == (12, 10)
    assert (len(names), longest_chain(deps)) == (13, 8)
    assert_respects(deps, 4)


# --- reshapes as views ------------------------------------------------------------------
#
#   0: relu(%x) -> %a            arena [0, 16)
#   1: reshape(%a) -> %v         [16, 32): may read %a's bytes
#   2: reshape(%v) -> %u         [32, 48): a view of a view, %a's bytes again
#   3: reshape(%w) -> %p         [48, 64): the param w, updated in place at 5
#   4: relu(%u) -> %b            [64, 80)
#   5: add(%w, %b) -> %w         (in place)
#   6: relu(%p) -> %c            [80, 96): reads %p after w changed: %p must stay a copy
#   7: reshape(%b) -> %q         [96, 112)
#   8: relu(%x) -> %d            [64, 80): planned into %b's bytes after %b's last read (7)
#   exec.output "q" %q           %q would read %d's bytes: it must stay a copy


def view_plan() -> ExecPlan:
    f32 = np.dtype(np.float32)
    names = ["x", "w", "%a", "%v", "%u", "%p", "%b", "%c", "%q", "%d"]
    x, w, a, v, u, p, b, c, q, d = range(len(names))
    offsets = {a: 0, v: 16, u: 32, p: 48, b: 64, c: 80, q: 96, d: 64}
    roles = {x: "input", w: "param"}
    buffers = tuple(
        BufferSpec(
            i, n, roles.get(i, "tmp"), (4,) if i != u else (2, 2), f32, offset=offsets.get(i)
        )
        for i, n in enumerate(names)
    )
    steps = (
        LaunchStep("cuda.relu_f32", (x,), (a,), {}),
        LaunchStep("cuda.reshape", (a,), (v,), {}),
        LaunchStep("cuda.reshape", (v,), (u,), {}),
        LaunchStep("cuda.reshape", (w,), (p,), {}),
        LaunchStep("cuda.relu_f32", (u,), (b,), {}),
        LaunchStep("cuda.add_f32", (w, b), (w,), {}),
        LaunchStep("cuda.relu_f32", (p,), (c,), {}),
        LaunchStep("cuda.reshape", (b,), (q,), {}),
        LaunchStep("cuda.relu_f32", (x,), (d,), {}),
    )
    return ExecPlan("views", buffers, steps, (("q", q),), arena_size=112)


def test_a_reshape_shares_its_inputs_bytes_only_while_nothing_writes_them():
    plan = view_plan()
    aliases = view_aliases(plan, lambda step: step.kernel == "cuda.reshape")
    assert aliases == {3: 2, 4: 2}  # %v and %u read %a's bytes; %p and %q stay copies
    regions = aliased_regions(buffer_regions(plan), aliases)
    assert regions[3] == regions[4] == regions[2] == Region(ARENA, 0, 16)
    # The schedule then orders a writer of %a's bytes after the readers of its views.
    deps = dependencies([step_access(s, regions) for s in plan.steps])
    assert 0 in deps[4]  # %u is %a's bytes, written by step 0: read-after-write
