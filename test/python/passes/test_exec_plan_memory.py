"""aicfc-plan-memory soundness: no two tmp buffers whose lifetimes overlap share a byte.

Lifetimes are recomputed here from the IR (first to last use over the launch
order, program outputs live to the end), independently of the pass. Checked on
the differential train step and on random programs, which also run on the
NumPy runtime against the interpreter (relative error <= 1e-6).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from aicfc.backends import get_backend
from aicfc.dialects import exec as ex
from aicfc.ir import parse_module
from aicfc.passes.aicfc_plan_memory import plan
from aicfc.runtime.interpreter import find_func, run_func
from support import exec_program

TRAIN_STEP = (Path(__file__).parent / "test_exec_train_step.mlir").read_text()


def assert_sound(program: ex.ProgramOp, alignment: int) -> int:
    """Check offsets against independently computed lifetimes; returns the peak live bytes."""
    ops = list(program.graph().block.ops)
    end = len(ops)
    allocs = [op for op in program.block.ops if isinstance(op, ex.AllocOp)]
    arena = program.arena_size.value.data
    spans, ranges = [], []
    for a in allocs:
        at = [ops.index(u.operation) if u.operation in ops else end for u in a.result.uses]
        spans.append((min(at), max(at)) if at else None)
        off = a.offset.value.data
        size = ex.buffer_type(a.result).nbytes()
        assert off % alignment == 0 and off + size <= arena
        ranges.append((off, off + size))
    for i in range(len(allocs)):
        for j in range(i + 1, len(allocs)):
            if spans[i] is None or spans[j] is None:
                continue
            live_together = spans[i][0] <= spans[j][1] and spans[j][0] <= spans[i][1]
            share_bytes = ranges[i][0] < ranges[j][1] and ranges[j][0] < ranges[i][1]
            assert not (live_together and share_bytes), (
                f"{allocs[i].result} and {allocs[j].result} are live together at "
                f"{spans[i]} / {spans[j]} but share bytes {ranges[i]} / {ranges[j]}"
            )
    return max(
        (
            sum(r[1] - r[0] for s, r in zip(spans, ranges, strict=True) if s and s[0] <= k <= s[1])
            for k in range(end + 1)
        ),
        default=0,
    )


@pytest.mark.parametrize("fold", [False, True], ids=["lowered", "folded"])
@pytest.mark.parametrize("alignment", [1, 64, 256])
def test_train_step_plan_is_sound(fold, alignment):
    program = exec_program(TRAIN_STEP, fold, alignment=alignment)
    peak = assert_sound(program, alignment)
    arena = program.arena_size.value.data
    assert peak <= arena  # no plan beats the bytes live at the busiest launch
    sizes = [
        ex.buffer_type(op.result).nbytes() for op in program.walk() if isinstance(op, ex.AllocOp)
    ]
    assert arena < sum((n + alignment - 1) // alignment * alignment for n in sizes)


@pytest.mark.parametrize("seed", range(12))
def test_plan_function_is_sound_on_random_lifetimes(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    sizes = [rng.choice([0, 4, 12, 64, 256, 1000, 4096]) for _ in range(n)]
    spans = []
    for _ in range(n):
        a = rng.randint(-1, 30)
        spans.append((a, a + rng.randint(0, 10)) if a >= 0 else (-1, -1))
    alignment = rng.choice([1, 16, 256])
    offsets, arena = plan(sizes, spans, alignment)
    assert arena % alignment == 0
    for i in range(n):
        assert offsets[i] % alignment == 0 and offsets[i] + sizes[i] <= arena
        for j in range(i + 1, n):
            live = spans[i][0] <= spans[j][1] and spans[j][0] <= spans[i][1]
            overlap = offsets[i] < offsets[j] + sizes[j] and offsets[j] < offsets[i] + sizes[i]
            assert not (live and overlap and sizes[i] and sizes[j])


# --- random programs: lower, fold, plan, run, compare with the interpreter ---

SHAPES = {"m": (4, 8), "v": (8,), "t": (8, 4)}
ARG_KINDS = (("x", "m"), ("b", "v"), ("xt", "t"))  # the inputs; "w" (kind m) is the param


def tt(kind: str) -> str:
    return "tensor<" + "x".join(map(str, SHAPES[kind])) + "xf32>"


def random_program(rng: random.Random) -> str:
    args = [("x", "m", "input"), ("w", "m", "param"), ("b", "v", "input"), ("xt", "t", "input")]
    pool = [(f"%{n}", k) for n, k, _ in args]
    lines = []
    for i in range(rng.randint(4, 18)):
        name = f"%v{i}"
        pick = lambda kind: rng.choice([v for v, k in pool if k == kind])  # noqa: E731
        choice = rng.randrange(6)
        kind = rng.choice(["m", "m", "v", "t"])
        if choice == 0:
            op = rng.choice(["tanh", "relu", "gelu"])
            lines.append(f"{name} = graph.{op} {pick(kind)} : {tt(kind)}")
        elif choice == 1:
            op = rng.choice(["add", "sub", "mul"])
            lines.append(f"{name} = graph.{op} {pick(kind)}, {pick(kind)} : {tt(kind)}")
        elif choice == 2:
            kind = "v"
            lines.append(
                f"{name} = graph.reduce_sum {pick('m')} axes = [0] : {tt('m')} -> {tt('v')}"
            )
        elif choice == 3:
            kind = "m"
            types = f"({tt('m')}, {tt('v')}) -> {tt('m')}"
            lines.append(f"{name} = graph.bias_add {pick('m')}, {pick('v')} : {types}")
        elif choice == 4:
            src, kind = ("m", "t") if kind != "t" else ("t", "m")
            lines.append(
                f"{name} = graph.transpose {pick(src)} perm = [1, 0] : {tt(src)} -> {tt(kind)}"
            )
        else:
            kind = "m"
            lines.append(f"{name} = graph.broadcast_to {pick('v')} : {tt('v')} -> {tt('m')}")
        pool.append((name, kind))
    made = [(v, k) for v, k in pool if v.startswith("%v")]
    outs = [made[-1], *rng.sample(made[:-1], k=min(len(made) - 1, rng.randint(0, 3)))]
    results = [(v, tt(k), f'{{aicfc.name = "out{j}"}}') for j, (v, k) in enumerate(outs)]
    next_w = [v for v, k in made if k == "m"]
    if next_w:
        results.append((rng.choice(next_w), tt("m"), '{aicfc.name = "w"}'))
    arg_text = ", ".join(
        f'%{n}: {tt(k)} {{aicfc.role = "{r}", aicfc.name = "{n}"}}' for n, k, r in args
    )
    res_types = ", ".join(f"{t} {a}" for _, t, a in results)
    body = "\n  ".join(lines)
    ret = (
        f"func.return {', '.join(v for v, _, _ in results)} : {', '.join(t for _, t, _ in results)}"
    )
    return f"func.func @f({arg_text}) -> ({res_types}) {{\n  {body}\n  {ret}\n}}\n"


def launch_order(program: ex.ProgramOp, planned: bool) -> list[int]:
    """For each launch, the bit set of launches it transitively waits for in a branched
    graph (runtime/schedule.py): with the planned arena offsets, or with every buffer its
    own allocation (the data flow alone)."""
    from aicfc.runtime.plan import ExecPlan
    from aicfc.runtime.schedule import Region, ancestors, buffer_regions, dependencies, step_access

    plan = ExecPlan.from_program(program)
    regions = buffer_regions(plan)
    if not planned:
        regions = tuple(Region(f"own:{k}", 0, r.stop - r.start) for k, r in enumerate(regions))
    return ancestors(dependencies([step_access(s, regions) for s in plan.steps]))


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_plan_adds_no_wait_between_branches(seed):
    """Reused arena bytes never order two launches that the data flow leaves unordered
    (branches=true); reuse by program order alone does add such waits somewhere."""
    text = random_program(random.Random(seed))
    program = exec_program(text, fold=True, alignment=256)
    assert launch_order(program, planned=True) == launch_order(program, planned=False)


def test_program_order_reuse_adds_waits_on_the_train_step():
    program = exec_program(TRAIN_STEP, fold=True)
    assert launch_order(program, planned=True) == launch_order(program, planned=False)
    module = program.parent_op()
    assert module is not None
    from aicfc.context import make_context
    from aicfc.passes.aicfc_plan_memory import AicfcPlanMemoryPass

    AicfcPlanMemoryPass(branches=False).apply(make_context(), module)  # re-plan in place
    assert launch_order(program, planned=True) != launch_order(program, planned=False)
    assert_sound(program, 256)


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_plan_soundly_and_run_like_the_interpreter(seed):
    rng = random.Random(seed)
    text = random_program(rng)
    program = exec_program(text, fold=True, alignment=256)
    assert_sound(program, 256)

    nrng = np.random.default_rng(seed)
    fn = find_func(parse_module(text), "f")
    inputs = {n: nrng.standard_normal(SHAPES[k]).astype(np.float32) for n, k in ARG_KINDS}
    w = nrng.standard_normal((4, 8)).astype(np.float32)
    backend = get_backend("numpy")
    store = backend.create_store()
    exe = backend.load(program, store)
    store.load_state_dict({"w": w})
    state_w = w
    for _ in range(2):
        want = run_func(fn, {**inputs, "w": state_w})
        got = exe.run(inputs)
        for j, name in enumerate(exe.outputs):
            assert name == f"out{j}"
            np.testing.assert_allclose(got[name], want[j], rtol=1e-6, atol=1e-7)
        if len(want) > len(exe.outputs):
            state_w = want[-1]
        np.testing.assert_allclose(store["w"], state_w, rtol=1e-6, atol=1e-7)
