"""aicfc-fold-weight-casts through the API: the optimizer writes each weight's bf16 copy.

The fold must not change what a step computes: K steps of a bf16 program with the fold
and of the same program without it (the pipeline minus its "weight-copies" step) give
bitwise-equal losses and state on the NumPy backend, including gradient accumulation,
state-dict loads and checkpoints; after every step each copy is exactly its master
rounded to bf16 (ml_dtypes' astype, round to nearest even). The copies are derived state:
never in a state dict, refilled from the masters whenever those are written. The lowered
CUDA step loses one cast launch per parameter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import aicfc
from aicfc import nn, optim

STAGE = "weight-copies"
BF16 = np.dtype(ml_dtypes.bfloat16)


def model() -> nn.Sequential:
    aicfc.manual_seed(5)
    return nn.Sequential(
        nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24), nn.GELU(), nn.Linear(24, 5)
    )


def compile_(fold: bool = True, precision: str = "bf16", **kw: object) -> aicfc.Program:
    prog = aicfc.compile(
        model(),
        optimizer=optim.Adam(lr=1e-2),
        backend="numpy",
        precision=precision,
        cache_dir=False,
        **kw,  # type: ignore[arg-type]
    )
    if not fold:  # the same pipeline without the fold: every step casts the masters
        prog._steps = tuple(s for s in prog._steps if s.stage != STAGE)
        prog.stages = tuple(s for s in prog.stages if s != STAGE)
    return prog


def batches(n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16).astype(np.int64))
        for _ in range(n)
    ]


def copies(prog: aicfc.Program) -> dict[str, np.ndarray]:
    """Each param's bf16 copy; every param has one but the logits' bias, which the last
    gemm_epilogue reads in f32 (aicfc-fold-casts: its product writes f32 logits)."""
    state = prog.store.state_dict()
    assert [n for n in prog.param_names if f"{n}.bf16" not in state] == [prog.param_names[-1]]
    return {n: state[f"{n}.bf16"] for n in prog.param_names if f"{n}.bf16" in state}


def assert_copies_are_the_masters(prog: aicfc.Program) -> None:
    for name, copy in copies(prog).items():
        assert copy.dtype == BF16
        master = prog.parameters()[name]
        assert copy.tobytes() == master.astype(BF16).tobytes(), name


def assert_same_state(a: aicfc.Program, b: aicfc.Program) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].tobytes() == sb[k].tobytes(), k


def test_the_fold_trains_bitwise_like_the_casts() -> None:
    folded, casting = compile_(), compile_(fold=False)
    for x, y in batches(6):
        assert folded.step(x, y) == casting.step(x, y)
        assert_copies_are_the_masters(folded)
    assert_same_state(folded, casting)
    assert not any(n.endswith(".bf16") for n in casting.store.names())
    for x, _ in batches(1, seed=9):  # predict casts the current masters
        assert folded.predict(x).tobytes() == casting.predict(x).tobytes()


def test_the_forward_reads_the_copy_and_the_update_writes_it() -> None:
    prog = compile_()
    x, y = batches(1)[0]
    prog.step(x, y)
    ir = prog.mlir(STAGE)
    assert "graph.cast %_0.weight " not in ir and "graph.cast %x" in ir
    assert "low_copy(%_0.weight_bf16 : tensor<24x12xbf16>)" in ir
    assert '{aicfc.role = "state", aicfc.name = "0.weight.bf16"}' in ir
    assert "low_copy" not in prog.mlir(STAGE, "predict", batch_size=4)


def test_copies_are_not_state_and_follow_every_write_of_the_masters(tmp_path: Path) -> None:
    folded, casting = compile_(), compile_(fold=False)
    data = batches(5)
    for x, y in data[:2]:
        folded.step(x, y)
    assert not any(n.endswith(".bf16") for n in folded.state_dict())
    other = compile_()  # different masters: a state dict load must refill the copies
    rng = np.random.default_rng(4)
    fresh = {
        k: (rng.standard_normal(v.shape).astype(v.dtype) if k in other.param_names else v)
        for k, v in other.state_dict().items()
    }
    for prog in (folded, casting):
        prog.load_state_dict(fresh)
    assert_copies_are_the_masters(folded)
    for x, y in data[2:4]:
        assert folded.step(x, y) == casting.step(x, y)
    # a checkpoint of an fp32 program loads into the bf16 one, and back
    fp32 = compile_(precision="fp32")
    fp32.step(*data[4])
    path = tmp_path / "fp32.safetensors"
    fp32.save(path)
    for prog in (folded, casting):
        prog.load(path)
    assert_copies_are_the_masters(folded)
    assert folded.step(*data[0]) == casting.step(*data[0])
    assert_same_state(folded, casting)
    folded.save(tmp_path / "bf16.safetensors")
    fp32.load(tmp_path / "bf16.safetensors")
    assert_same_state(fp32, casting)


def test_accumulation_changes_the_copy_only_with_the_master() -> None:
    folded, casting = compile_(accumulate=3), compile_(fold=False, accumulate=3)
    folded.executable("train_step", batch_size=16)  # compiled: the copies exist
    assert_copies_are_the_masters(folded)
    before = copies(folded)
    for k, (x, y) in enumerate(batches(7)):
        assert folded.step(x, y) == casting.step(x, y)
        assert_copies_are_the_masters(folded)
        now = copies(folded)
        changed = any(now[n].tobytes() != before[n].tobytes() for n in now)
        assert changed == (k % 3 == 2), k  # the update applies on every 3rd micro-batch
        before = now
    assert_same_state(folded, casting)


def test_fp16_loss_scaling_keeps_its_casts() -> None:
    """The update's results pass through amp_select there: the fold leaves the step as it
    was (passes/aicfc_fold_weight_casts.py), and it trains as before."""
    prog = compile_(precision="fp16")
    x, y = batches(1)[0]
    assert np.isfinite(prog.step(x, y))
    assert "low_copy" not in prog.mlir(STAGE)
    assert not any(n.endswith((".f16", ".bf16")) for n in prog.store.names())


def test_sgd_keeps_its_casts() -> None:
    prog = aicfc.compile(
        model(), optimizer=optim.SGD(lr=0.1), backend="numpy", precision="bf16", cache_dir=False
    )
    x, y = batches(1)[0]
    prog.step(x, y)
    assert "graph.cast %_0.weight " in prog.mlir(STAGE)


@pytest.mark.parametrize("fold", [True, False])
def test_the_lowered_bf16_step_casts_no_parameter(fold: bool, monkeypatch) -> None:
    """The bf16 MLP step 784-256-256-10 as lowered for an sm_90 device with cuBLASLt: with
    the fold no cast_f32_bf16 reads a parameter (5 fewer launches than without it; the
    logits' bias is read in f32 either way, aicfc-fold-casts)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "gpu"))
    from test_abi_lowered_cpu import lowered_plans

    from aicfc.passes import pipelines
    from aicfc.runtime.plan import LaunchStep

    mlp = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    real = pipelines.train_pipeline
    if not fold:

        def without(*a: object, **k: object) -> tuple[pipelines.Step, ...]:
            return tuple(s for s in real(*a, **k) if s.stage != STAGE)  # type: ignore[arg-type]

        monkeypatch.setattr(pipelines, "train_pipeline", without)
    plans = lowered_plans(mlp, "cross_entropy", optim.Adam(lr=1e-3), 128, True, True, "bf16")
    plan = next(p for p in plans if p.name == "train_step")
    launches = [s for s in plan.steps if isinstance(s, LaunchStep)]
    params = {i for i, b in enumerate(plan.buffers) if b.role == "param"}
    param_casts = [
        s for s in launches if s.kernel == "cuda.cast_f32_bf16" and set(s.inputs) & params
    ]
    assert len(param_casts) == (0 if fold else 5)
    assert len(launches) == (18 if fold else 23)


def test_data_parallel_ranks_keep_equal_copies_of_the_broadcast_masters() -> None:
    """Two ranks (threads) initialised differently: the copies come from rank 0's broadcast
    masters, and after steps on different shards both ranks hold equal state and copies
    that are their masters rounded."""
    import threading

    from aicfc.distributed import DataParallel
    from aicfc.runtime.collectives import ThreadGroup

    group = ThreadGroup(2, timeout=30)
    progs: list[aicfc.Program] = [None, None]  # type: ignore[list-item]
    data = batches(4)

    def work(rank: int) -> None:
        aicfc.manual_seed(rank)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
        dp = DataParallel(group.communicators[rank], bucket_mb=1.0)
        prog = aicfc.compile(
            model, backend="numpy", precision="bf16", data_parallel=dp, cache_dir=False
        )
        for x, y in data:
            prog.step(x[rank::2], y[rank::2])
        progs[rank] = prog

    threads = [threading.Thread(target=work, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p0, p1 = progs
    assert_same_state(p0, p1)
    for prog in progs:
        assert_copies_are_the_masters(prog)
        assert "low_copy" in prog.mlir(STAGE)
