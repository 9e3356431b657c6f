"""The captured graph's parallel branches on the GPU (runtime/schedule.py, capture.py).

- The branched graph computes exactly what the one-chain graph computes (the
  kernels are deterministic): the small benchmark step, fp32 and TF32, with
  host and device batches, bit for bit.
- Hazards: two hand-built programs put a write-after-read (an in-place update
  of a param that a slow product on another branch still reads) and a
  write-after-write / write-after-read on shared arena bytes where a missing
  edge would let the writer run early. With the real schedule every replay is
  right; with a schedule built from read-after-write edges only (what a
  data-flow-only graph would do) the same programs come out wrong, which
  shows the tests can see a missing edge.

Tolerances: bit-identical (==) between the branched and the chained graph and
for elementwise results; a float32 product against a float64 one: 1e-5
norm-wise (F32_TOL), while a race changes the result by O(1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.program import Program
from aicfc.runtime.plan import BufferSpec, ExecPlan, LaunchStep
from aicfc.runtime.schedule import Access, direct, schedule
from gpu.gpu_support import F32_TOL, gpu, per_layer, randn, rel_err

pytestmark = gpu

F32 = np.dtype(np.float32)
N = 1024


def backend(**options: Any) -> Any:
    from aicfc.runtime.cuda.backend import CupyBackend

    return CupyBackend(**options)


def small_program(streams: int, tf32: bool) -> Program:
    aicfc.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    prog = Program(
        model, "cross_entropy", optim.Adam(lr=1e-3), backend(graph_streams=streams, tf32=tf32)
    )
    return per_layer(prog)  # the per-layer kernels' branches (the fused step is one node)


@pytest.mark.parametrize("tf32", [False, True])
def test_branched_graph_is_bit_identical_to_the_chain(tf32):
    import cupy

    rng = np.random.default_rng(3)
    data = [(randn(rng, 128, 784), rng.integers(0, 10, 128).astype(np.int32)) for _ in range(8)]
    branched, chain = small_program(4, tf32), small_program(1, tf32)
    losses = {}
    for name, prog in (("branched", branched), ("chain", chain)):
        got = [prog.step(x, y) for x, y in data[:4]]  # host batches (pinned copies)
        got += [float(prog.step(cupy.asarray(x), cupy.asarray(y))) for x, y in data[4:]]
        losses[name] = got
    assert losses["branched"] == losses["chain"]
    sb, sc = branched.state_dict(), chain.state_dict()
    assert sorted(sb) == sorted(sc)
    for k in sb:
        np.testing.assert_array_equal(sb[k], sc[k], err_msg=k)
    eb, ec = branched.executable(), chain.executable()
    assert eb.replays == ec.replays == len(data) - 1
    # The per-layer updates (aicfc-hoist-updates) and the weight gradients run beside the
    # backward chain: 13 nodes on all four streams (test_schedule.py has the edges).
    assert eb.schedule.branched and eb.schedule.streams == 4
    assert not ec.schedule.branched
    assert len(eb.nodes) == 13


def raw_only(accesses: list[Access]) -> list[frozenset[int]]:
    """Read-after-write edges only: the graph a data-flow-only capture would build."""
    return [
        frozenset(
            i
            for i in range(j)
            if any(w.overlaps(r) for w in accesses[i].writes for r in accesses[j].reads)
        )
        for j in range(len(accesses))
    ]


def load(plan: ExecPlan, state: dict[str, np.ndarray], war_edges: bool) -> Any:
    be = backend()
    store = be.create_store()
    exe = be.load(plan, store)
    store.load_state_dict(state)
    if not war_edges:
        exe.schedule = schedule(direct(raw_only(exe.accesses)), be.graph_streams)
    return exe


# 0 G: z = p q            (1024 x 1024 x 16: fast)
# 1 R: r = w q2           (1024^3: slow, reads the param w all along; no input of G)
# 2 B: w = z + w          (in place: RAW on G, WAR on R)
IN_PLACE = ExecPlan(
    "in_place",
    (
        BufferSpec(0, "p", "input", (N, 16), F32),
        BufferSpec(1, "q", "input", (16, N), F32),
        BufferSpec(2, "q2", "input", (N, N), F32),
        BufferSpec(3, "w", "param", (N, N), F32),
        BufferSpec(4, "%z", "tmp", (N, N), F32),
        BufferSpec(5, "%r", "tmp", (N, N), F32),
    ),
    (
        LaunchStep("cuda.matmul_f32_s64_nn", (0, 1), (4,), {}),
        LaunchStep("cuda.matmul_f32_s64_nn", (3, 2), (5,), {}),
        LaunchStep("cuda.add_f32", (4, 3), (3,), {}),
    ),
    (("z", 4), ("r", 5)),
)


def in_place_mismatches(war_edges: bool, runs: int = 6) -> list[str]:
    rng = np.random.default_rng(7)
    p, q, q2, w = randn(rng, N, 16), randn(rng, 16, N), randn(rng, N, N), randn(rng, N, N)
    exe = load(IN_PLACE, {"w": w}, war_edges)
    if war_edges:  # the WAR edge is a cross-stream event: B follows G's stream, waits for R
        issues = {i.node: i for i in exe.schedule.issues}
        assert issues[1].stream != issues[2].stream and 1 in issues[2].waits
    bad = []
    for k in range(runs):
        out = exe.run({"p": p, "q": q, "q2": q2})
        w_next = exe.backend.to_numpy(exe.buffer("w"))
        if rel_err(out["r"], w.astype(np.float64) @ q2) > F32_TOL:
            bad.append(f"run {k}: r read an updated w")
        if not np.array_equal(w_next, out["z"] + w):
            bad.append(f"run {k}: w' != z + w")
        w = w_next
    assert exe.captured and exe.replays == runs - 1
    return bad


def test_an_in_place_update_waits_for_a_slow_reader_on_another_branch():
    assert in_place_mismatches(war_edges=True) == []


def test_without_the_war_edge_the_in_place_program_races():
    """The control: the same program and checks, the WAR edge left out of the schedule."""
    assert in_place_mismatches(war_edges=False) != []


# 0 S: t1 = m q2          (slow; t1 at arena bytes [0, 4 MB))
# 1 X: a = relu(v)        (fast, independent)
# 2 U: y = t1 + t1        (RAW on S)
# 3 Y: y2 = relu(y)       (so that U is no stream's last launch when V is issued)
# 4 V: t2 = relu(a)       (t2 at the same arena bytes: WAW on S, WAR on U; RAW on X)
ARENA_REUSE = ExecPlan(
    "arena_reuse",
    (
        BufferSpec(0, "m", "input", (N, N), F32),
        BufferSpec(1, "q2", "input", (N, N), F32),
        BufferSpec(2, "v", "param", (N, N), F32),
        BufferSpec(3, "%t1", "tmp", (N, N), F32, offset=0),
        BufferSpec(4, "%a", "tmp", (N, N), F32),
        BufferSpec(5, "%y", "tmp", (N, N), F32),
        BufferSpec(6, "%y2", "tmp", (N, N), F32),
        BufferSpec(7, "%t2", "tmp", (N, N), F32, offset=0),
    ),
    (
        LaunchStep("cuda.matmul_f32_s64_nn", (0, 1), (3,), {}),
        LaunchStep("cuda.relu_f32", (2,), (4,), {}),
        LaunchStep("cuda.add_f32", (3, 3), (5,), {}),
        LaunchStep("cuda.relu_f32", (5,), (6,), {}),
        LaunchStep("cuda.relu_f32", (4,), (7,), {}),
    ),
    (("y", 5), ("y2", 6), ("t2", 7)),
    arena_size=4 * N * N,
)


def arena_mismatches(war_edges: bool, runs: int = 6) -> list[str]:
    rng = np.random.default_rng(11)
    m, q2, v = randn(rng, N, N), randn(rng, N, N), randn(rng, N, N)
    exe = load(ARENA_REUSE, {"v": v}, war_edges)
    if war_edges:  # V runs after X on X's stream and waits for U's event
        issues = {i.node: i for i in exe.schedule.issues}
        assert issues[4].stream == issues[1].stream != issues[2].stream
        assert 2 in issues[4].waits
    ref = 2.0 * (m.astype(np.float64) @ q2)
    bad = []
    for k in range(runs):
        out = exe.run({"m": m, "q2": q2})
        if rel_err(out["y"], ref) > F32_TOL:
            bad.append(f"run {k}: y read t1 after t2 overwrote it")
        if not np.array_equal(out["y2"], np.maximum(out["y"], 0)):
            bad.append(f"run {k}: y2 != relu(y)")
        if not np.array_equal(out["t2"], np.maximum(v, 0)):
            bad.append(f"run {k}: t2 was overwritten by t1's writer")
    assert exe.captured and exe.replays == runs - 1
    return bad


def test_a_write_into_reused_arena_bytes_waits_for_their_last_reader():
    assert arena_mismatches(war_edges=True) == []


def test_without_the_war_and_waw_edges_the_arena_program_races():
    assert arena_mismatches(war_edges=False) != []
