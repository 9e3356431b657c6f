"""kernels/optim.cu on the CPU, emulated behind the real launchers (cuda_emu.py).

The optimizer updates read every hyperparameter, the gradient scale and the apply flag
from device buffers; the bookkeeping kernels (lr_schedule, clip_grad_norm,
accumulation_step, accumulate_grad) compute what the NumPy reference does. The
emulator runs the kernels' float32 arithmetic in the same order as the reference, so
the updates are compared bit for bit; a skipped update (apply = 0) must leave params
and state bit-identical, in place and not. The schedule is run over 1,000 epochs and
compared with the reference (float64; cos and pow may differ in the last bit) and,
the reference being checked against torch.optim.lr_scheduler elsewhere
(test/python/api/test_lr_scheduler.py), with nothing else.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from aicfc.runtime import reference, reference_optim, registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from aicfc.runtime.cuda.launchers.optim import launch_adam_group
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import randn, rel_err

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi, "get_function", lambda spec: EmuFunction(cuda_emu.build(spec.source), spec.symbol)
    )


def run(kernel, ins, outs, params, ctx=None, times=1):
    launches = launches_for(registry.get(kernel), ins, outs, params, ctx or EmuContext())
    for _ in range(times):
        for la in launches:
            la(NullStream())


def item(a: EmuArray) -> float:
    """The value of an emulated scalar (EmuArray holds a 0-d array as [1])."""
    return a.array.reshape(-1)[0].item()


def f64(x: float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def f32(x: float) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


ADAM_GROUPS = [
    {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0},
    {"lr": 3e-3, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1},
]


def adam_case(rng, n, step, group, scale, apply):
    p, g, m = randn(rng, n), randn(rng, n), randn(rng, n, scale=0.1)
    v = np.abs(randn(rng, n, scale=0.01))
    hyper = [f64(group[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay")]
    return [p, g, m, v, f32(step), *hyper, f32(scale), f32(apply)]


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("apply", [1.0, 0.0])
def test_multi_tensor_adam_reads_each_tensors_hyperparameters_and_flags(decoupled, in_place, apply):
    rng = np.random.default_rng(21)
    cases = [
        adam_case(rng, 5000, 0.0, ADAM_GROUPS[0], 0.37, apply),
        adam_case(rng, 37, 5.0, ADAM_GROUPS[1], 1.0, apply),
        adam_case(rng, 1024 * 9 + 3, 41.0, ADAM_GROUPS[1], 0.5, apply),
    ]
    group, expected = [], []
    for args in cases:
        ins = [EmuArray(a) for a in args]
        if in_place:
            outs = [ins[0], ins[2], ins[3], ins[4]]
        else:
            outs = [EmuArray(np.full(a.shape, np.nan, np.float32)) for a in args[:1] + args[2:5]]
        group.append((ins, outs))
        expected.append(reference.adam_step(*args, decoupled_weight_decay=decoupled))
    params = {"decoupled_weight_decay": True} if decoupled else {}
    ctx = EmuContext()
    (la,) = launch_adam_group(registry.get("cuda.adam_step_multi_tensor_f32"), group, params, ctx)
    la(NullStream())
    for (_, outs), want, args in zip(group, expected, cases, strict=True):
        for got, ref in zip(outs, want, strict=True):
            assert got.array.tobytes() == np.asarray(ref, np.float32).tobytes()
        if apply == 0.0:  # bit-identical to the inputs
            for got, before in zip(outs, [args[0], *args[2:5]], strict=True):
                assert got.array.tobytes() == before.tobytes()
    assert not ctx.keep[-1].array[:4].any()  # the ticket counter is back at zero


@pytest.mark.parametrize("low", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("apply", [1.0, 0.0])
def test_multi_tensor_adam_writes_the_low_precision_copy(low, in_place, apply):
    """Tensors with a bf16/f16 copy and one without share the launch; the copy's next value
    is the reference's param' rounded to nearest even (astype), bit for bit, and a skipped
    update leaves the copy as it was."""
    rng = np.random.default_rng(23)
    cases = [
        adam_case(rng, 4099, 3.0, ADAM_GROUPS[0], 1.0, apply),
        adam_case(rng, 37, 0.0, ADAM_GROUPS[1], 0.5, apply),
        adam_case(rng, 1024 * 3 + 1, 7.0, ADAM_GROUPS[1], 1.0, apply),
    ]
    group, expected, copies = [], [], []
    for k, args in enumerate(cases):
        copy = None if k == 1 else args[0].astype(low)  # the middle tensor has no copy
        ins = [EmuArray(a) for a in args] + ([EmuArray(copy)] if copy is not None else [])
        if in_place:
            outs = [ins[0], ins[2], ins[3], ins[4], *ins[12:]]
        else:
            outs = [EmuArray(np.full(a.shape, np.nan, np.float32)) for a in args[:1] + args[2:5]]
            if copy is not None:
                outs.append(EmuArray(np.full(copy.shape, np.nan, low)))
        group.append((ins, outs))
        copies.append(copy)
        extra = [] if copy is None else [copy.copy()]
        expected.append(reference.adam_step(*args, *extra))
    ctx = EmuContext()
    (la,) = launch_adam_group(registry.get("cuda.adam_step_multi_tensor_f32"), group, {}, ctx)
    la(NullStream())
    for (_, outs), want, copy in zip(group, expected, copies, strict=True):
        assert len(outs) == len(want)
        for got, ref in zip(outs, want, strict=True):
            assert got.array.dtype == np.asarray(ref).dtype
            assert got.array.tobytes() == np.asarray(ref).tobytes()
        if copy is not None:
            # independent of the reference's low_copy path: the fp32 result, rounded
            assert outs[4].array.tobytes() == np.asarray(want[0]).astype(low).tobytes()
            if apply == 0.0:
                assert outs[4].array.tobytes() == copy.tobytes()


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("apply", [1.0, 0.0])
@pytest.mark.parametrize("in_place", [True, False])
def test_sgd_reads_its_hyperparameters_and_flags(momentum, apply, in_place):
    rng = np.random.default_rng(22)
    n = 777
    p, g, buf = randn(rng, n), randn(rng, n), randn(rng, n)
    hyper = [f64(0.05), f64(momentum), f64(0.01), f32(0.25), f32(apply)]
    args = [p, g, *hyper] + ([buf] if momentum else [])
    ins = [EmuArray(a) for a in args]
    if in_place:
        outs = [ins[0]] + ([ins[7]] if momentum else [])
    else:
        outs = [EmuArray(np.full(n, np.nan, np.float32)) for _ in range(2 if momentum else 1)]
    params = {"nesterov": True} if momentum else {}
    want = reference.sgd_step(*args, **params)
    run("cuda.sgd_step_f32", ins, outs, params)
    for got, ref in zip(outs, want, strict=True):
        assert got.array.tobytes() == np.asarray(ref, np.float32).tobytes()
    if apply == 0.0:
        assert outs[0].array.tobytes() == p.tobytes()


SCHEDULES = [
    ("linear,cosine", (10,), (0.1, 1.0, 10.0, 0.0, 190.0, 1e-5, 0.0, 0.0)),
    ("constant,step,exponential", (7, 300), (0.25, 7.0, 0, 0, 30.0, 0.5, 0, 0, 0.99, 0, 0, 0)),
    ("cosine", (), (50.0, 0.0, 0.0, 0.0)),
]


@pytest.mark.parametrize(("kinds", "milestones", "coefficients"), SCHEDULES)
def test_lr_schedule_follows_the_reference_for_1000_epochs(kinds, milestones, coefficients):
    params = {"kinds": kinds, "milestones": milestones, "coefficients": coefficients}
    epoch = EmuArray(np.zeros((), np.int64))
    apply = EmuArray(f32(1.0))
    initial = [EmuArray(f64(3e-4)), EmuArray(f64(0.1))]
    lrs = [EmuArray(f64(math.nan)) for _ in initial]
    ctx = EmuContext()
    launches = launches_for(
        registry.get("cuda.lr_schedule"), [epoch, apply, *initial], [epoch, *lrs], params, ctx
    )
    worst = 0.0
    for t in range(1000):
        for la in launches:
            la(NullStream())
        assert item(epoch) == t + 1  # advanced in place
        for base, lr in zip((3e-4, 0.1), lrs, strict=True):
            want = reference_optim.schedule_lr(base, t, kinds, milestones, coefficients)
            worst = max(worst, abs(item(lr) - want) / max(abs(want), 1e-300))
    assert worst < 1e-14


def test_lr_schedule_holds_the_epoch_when_the_step_does_not_apply():
    kinds, milestones, coefficients = SCHEDULES[0]
    params = {"kinds": kinds, "milestones": milestones, "coefficients": coefficients}
    epoch, new_epoch = EmuArray(np.asarray(12, np.int64)), EmuArray(np.asarray(-1, np.int64))
    lr = EmuArray(f64(math.nan))
    run(
        "cuda.lr_schedule", [epoch, EmuArray(f32(0.0)), EmuArray(f64(1.0))], [new_epoch, lr], params
    )
    assert item(new_epoch) == 12
    assert item(lr) == pytest.approx(reference_optim.schedule_lr(1.0, 12, *SCHEDULES[0]), 1e-15)


@pytest.mark.parametrize("sizes", [[5000, 37, 9219], [3], [70_000, 1]])
def test_clip_grad_norm_is_deterministic_and_matches_the_reference(sizes):
    rng = np.random.default_rng(23)
    grads = [randn(rng, n, scale=0.3) for n in sizes]
    ctx = EmuContext()
    norm, coef = EmuArray(f32(math.nan)), EmuArray(f32(math.nan))
    launches = launches_for(
        registry.get("cuda.clip_grad_norm_f32"),
        [EmuArray(g) for g in grads],
        [norm, coef],
        {"max_norm": 1.0},
        ctx,
    )
    seen = set()
    for _ in range(3):  # replays: the tickets reset, the same bits each time
        for la in launches:
            la(NullStream())
        seen.add((norm.array.tobytes(), coef.array.tobytes()))
    assert len(seen) == 1
    want_norm, want_coef = reference.clip_grad_norm(*grads, max_norm=1.0)
    exact = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    assert abs(item(norm) - exact) <= 2**-23 * exact
    assert rel_err(norm.array, want_norm) <= 2**-23 and rel_err(coef.array, want_coef) <= 2**-22
    assert item(coef) == min(
        1.0, float(np.float32(1.0) / (np.float32(item(norm)) + np.float32(1e-6)))
    )


def test_clip_grad_norm_of_a_non_finite_gradient_is_not_finite():
    g = np.ones(100, np.float32)
    g[17] = np.inf
    norm, coef = EmuArray(f32(0.0)), EmuArray(f32(0.0))
    run("cuda.clip_grad_norm_f32", [EmuArray(g)], [norm, coef], {"max_norm": 1.0})
    ref_norm, ref_coef = reference.clip_grad_norm(g, max_norm=1.0)
    assert np.isinf(norm.array) and np.isinf(ref_norm)
    assert item(coef) == float(ref_coef) == 0.0


def test_accumulation_step_counts_windows_in_place():
    count, apply = EmuArray(np.zeros((), np.int64)), EmuArray(f32(math.nan))
    ctx = EmuContext()
    launches = launches_for(
        registry.get("cuda.accumulation_step"), [count], [count, apply], {"every": 3}, ctx
    )
    flags = []
    for _ in range(7):
        for la in launches:
            la(NullStream())
        flags.append(item(apply))
    assert flags == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert item(count) == 1


@pytest.mark.parametrize("reset", [0.0, 1.0])
def test_accumulate_grad_in_place_matches_the_reference(reset):
    rng = np.random.default_rng(24)
    g, acc = randn(rng, 1003), randn(rng, 1003)
    want = reference.accumulate_grad(g, acc, f32(reset), every=3)
    ins = [EmuArray(g), EmuArray(acc), EmuArray(f32(reset))]
    run("cuda.accumulate_grad_f32", ins, [ins[0], ins[1]], {"every": 3})
    assert ins[0].array.tobytes() == want[0].tobytes()
    assert ins[1].array.tobytes() == want[1].tobytes()
    assert (not ins[1].array.any()) == (reset == 1.0)
