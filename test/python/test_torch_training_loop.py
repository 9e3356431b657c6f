"""PyTorch as the oracle for the training loop around the optimizer: schedules, clipping,
gradient accumulation (aicfc/training.py, dialects/autodiff/training.py).

- 200 updates of the digits MLP with AdamW, a warm-up-then-cosine SequentialLR,
  clip_grad_norm_(1.0) and 2 micro-batches per update follow torch on the CPU (the
  loop torch users write: loss / k, backward, clip, step, scheduler.step, zero_grad):
  every parameter and Adam state within a max relative difference of 1e-4 on the NumPy
  backend (1e-3 on the GPU: other summation orders, and Adam's m / sqrt(v) amplifies
  them for near-zero gradients), every micro-batch's loss and every update's pre-clip
  norm too.
- The learning rate that `autodiff.lr_schedule` computes over 1,000 updates, run as a
  compiled function on the NumPy backend, equals torch.optim.lr_scheduler's to float32
  rounding for each offered scheduler and for SequentialLR.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import aicfc
from aicfc import nn, optim
from aicfc.execute import LoadedFunction
from aicfc.optim import lr_scheduler as ours_lr
from gpu.gpu_support import gpu
from support import rel_err, single_threaded_blas  # noqa: F401  (autouse: one BLAS thread)

TOL = 1e-4
MICRO = 32
ACCUMULATE = 2
UPDATES = 200
WARMUP = 20


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def mlp(seed: int) -> nn.Sequential:
    aicfc.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)
    )


def torch_twin(model: nn.Sequential) -> torch.nn.Sequential:
    t = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    )
    t.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    return t


def micro_batches(x: np.ndarray, y: np.ndarray, count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        idx = rng.choice(len(x), MICRO, replace=False)
        yield x[idx], y[idx]


@pytest.mark.parametrize(
    ("backend", "tol"), [("numpy", TOL), pytest.param("cupy", 1e-3, marks=gpu)]
)
def test_adamw_warmup_cosine_clip_accumulation_200_updates_match_torch(digits, backend, tol):
    model = mlp(10)
    schedule = ours_lr.SequentialLR(
        [
            ours_lr.LinearLR(start_factor=0.1, total_iters=WARMUP),
            ours_lr.CosineAnnealingLR(T_max=UPDATES - WARMUP, eta_min=1e-5),
        ],
        milestones=[WARMUP],
    )
    prog = aicfc.compile(
        model,
        optimizer=optim.AdamW(lr=3e-3, weight_decay=0.05),
        backend=backend,
        lr_scheduler=schedule,
        clip_grad_norm=1.0,
        accumulate=ACCUMULATE,
    )
    tmodel = torch_twin(model)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=3e-3, weight_decay=0.05)
    tsched = torch.optim.lr_scheduler.SequentialLR(
        topt,
        [
            torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.1, total_iters=WARMUP),
            torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=UPDATES - WARMUP, eta_min=1e-5),
        ],
        milestones=[WARMUP],
    )
    clipped = 0
    for i, (x, y) in enumerate(micro_batches(*digits, UPDATES * ACCUMULATE)):
        ours = prog.step(x, y)
        ref = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y))
        (ref / ACCUMULATE).backward()
        assert abs(ours - ref.item()) <= tol * abs(ref.item()), f"loss of micro-batch {i}"
        if (i + 1) % ACCUMULATE:
            continue
        norm = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 1.0).item()
        clipped += norm > 1.0
        got = prog.last_grad_norm
        assert got is not None and abs(got - norm) <= tol * norm, f"grad norm of update {i // 2}"
        topt.step()
        tsched.step()
        topt.zero_grad()
    assert clipped > 10, f"only {clipped} updates were clipped: the test would not see clipping"
    state = prog.state_dict()
    assert int(state["lr_scheduler.last_epoch"]) == UPDATES
    assert int(state["grad_accum.micro_step"]) == 0
    for name, p in tmodel.named_parameters():
        err = rel_err(state[name], p.detach().numpy())
        assert err <= tol, f"{name}: max rel diff {err:.2e} after {UPDATES} updates"
        for key, value in topt.state[p].items():
            want = value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)
            err = rel_err(state[f"{name}.{key}"], want)
            assert err <= tol, f"{name}.{key}: max rel diff {err:.2e}"
    # The next update's lr is torch's after the last scheduler.step().
    assert prog.next_lr() == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)


# --- the lr trajectory of autodiff.lr_schedule over 1,000 updates ----------------------

STEPS = 1000
BASE = 0.1

SCHEDULE_FUNC = """
func.func @sched(%e: tensor<i64> {{aicfc.role = "state", aicfc.name = "e"}},
                 %b: tensor<f64> {{aicfc.role = "state", aicfc.name = "b"}})
    -> (tensor<f64> {{aicfc.name = "lr"}}, tensor<i64> {{aicfc.name = "e"}}) {{
  %one = graph.constant dense<1.0> : tensor<f32>
  %e1, %lr = autodiff.lr_schedule %e, %one, %b kinds = "{kinds}" milestones = [{milestones}]
      coefficients = [{coefficients}] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  func.return %lr, %e1 : tensor<f64>, tensor<i64>
}}
"""


def device_trajectory(schedule: ours_lr.LRScheduler, steps: int) -> np.ndarray:
    """The lr of each update, as the compiled autodiff.lr_schedule computes it (NumPy)."""
    kinds, milestones, coefficients = schedule.properties()
    text = SCHEDULE_FUNC.format(
        kinds=kinds,
        milestones=", ".join(str(m) for m in milestones),
        coefficients=", ".join(f"{c:.17e}" for c in coefficients),
    )
    loaded = LoadedFunction.load(aicfc.parse(text), "sched", "numpy")
    loaded.set_values({"e": np.zeros((), np.int64), "b": np.asarray(BASE, np.float64)})
    return np.array([float(loaded.run({})["lr"]) for _ in range(steps)])


def torch_trajectory(make, steps: int) -> np.ndarray:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE)
    sched = make(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return np.array(lrs)


T = torch.optim.lr_scheduler
CASES = {
    "constant": (
        ours_lr.ConstantLR(factor=0.25, total_iters=37),
        lambda o: T.ConstantLR(o, factor=0.25, total_iters=37),
    ),
    "linear": (
        ours_lr.LinearLR(start_factor=0.01, end_factor=0.7, total_iters=333),
        lambda o: T.LinearLR(o, start_factor=0.01, end_factor=0.7, total_iters=333),
    ),
    "step": (ours_lr.StepLR(step_size=97, gamma=0.5), lambda o: T.StepLR(o, 97, gamma=0.5)),
    "exponential": (ours_lr.ExponentialLR(gamma=0.995), lambda o: T.ExponentialLR(o, 0.995)),
    "cosine": (
        ours_lr.CosineAnnealingLR(T_max=400, eta_min=1e-4),
        lambda o: T.CosineAnnealingLR(o, T_max=400, eta_min=1e-4),
    ),
    "warmup-cosine": (
        ours_lr.SequentialLR(
            [
                ours_lr.LinearLR(start_factor=0.001, total_iters=100),
                ours_lr.CosineAnnealingLR(T_max=900, eta_min=1e-5),
            ],
            milestones=[100],
        ),
        lambda o: T.SequentialLR(
            o,
            [
                T.LinearLR(o, start_factor=0.001, total_iters=100),
                T.CosineAnnealingLR(o, T_max=900, eta_min=1e-5),
            ],
            milestones=[100],
        ),
    ),
    "three-segments": (
        ours_lr.SequentialLR(
            [
                ours_lr.ConstantLR(factor=0.5, total_iters=50),
                ours_lr.StepLR(step_size=60, gamma=0.8),
                ours_lr.ExponentialLR(gamma=0.999),
            ],
            milestones=[200, 600],
        ),
        lambda o: T.SequentialLR(
            o,
            [
                T.ConstantLR(o, factor=0.5, total_iters=50),
                T.StepLR(o, 60, 0.8),
                T.ExponentialLR(o, 0.999),
            ],
            milestones=[200, 600],
        ),
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's SequentialLR/step(epoch) notices
@pytest.mark.parametrize("case", list(CASES))
def test_lr_trajectory_over_1000_updates_equals_torch_to_fp32_rounding(case):
    ours, theirs = CASES[case]
    want = torch_trajectory(theirs, STEPS)
    got = device_trajectory(ours, STEPS)
    host = np.array([ours.lr(BASE, t) for t in range(STEPS)])
    assert np.array_equal(got, host), "the compiled op and LRScheduler.lr agree exactly"
    # fp32 rounding: within one float32 ulp of torch's value, step by step.
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    worst = int(np.argmax(np.abs(got - want) / ulp))
    assert np.all(np.abs(got - want) <= ulp), (
        f"{case}: update {worst}: {got[worst]!r} vs torch {want[worst]!r}"
    )
    assert len(set(want.tolist())) >= 2, "the schedule really changes the lr"
