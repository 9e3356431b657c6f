"""The training loop of a Program on the NumPy backend: hyperparameters as state, schedules,
accumulation, gradients out, train/eval modes, evaluate(), checkpoints and their errors.

Expected values come from torch (CPU), from an uninterrupted run of the same Program, or
from float64 NumPy written here; never from the code under test.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import aicfc
from aicfc import nn, optim
from aicfc.checkpoint import CheckpointError
from aicfc.optim import lr_scheduler
from support import rel_err

IN, HIDDEN, OUT = 12, 16, 5


def make_model(seed: int = 0, dropout: float = 0.0) -> nn.Sequential:
    aicfc.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(IN, HIDDEN), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(HIDDEN, OUT))


def batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, IN)).astype(np.float32), rng.integers(0, OUT, n)


def warmup_cosine() -> lr_scheduler.SequentialLR:
    return lr_scheduler.SequentialLR(
        [
            lr_scheduler.LinearLR(start_factor=0.1, total_iters=4),
            lr_scheduler.CosineAnnealingLR(T_max=12),
        ],
        milestones=[4],
    )


def full_setup(seed: int = 0) -> aicfc.Program:
    return aicfc.compile(
        make_model(0, dropout=0.25),
        optimizer=optim.AdamW(lr=1e-2),
        backend="numpy",
        lr_scheduler=warmup_cosine(),
        clip_grad_norm=0.5,
        accumulate=3,
    )


# --- hyperparameters as state ---------------------------------------------------


def test_param_groups_lr_takes_effect_on_every_compiled_batch_shape():
    """SGD without momentum: param' = param - lr * grad, so the update scales with lr; the
    lr set after shapes 8 and 5 compiled is used by both."""
    prog = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.1), backend="numpy")
    for n in (8, 5):
        prog.step(*batch(n))
    assert prog.param_groups[0]["lr"] == 0.1
    prog.param_groups[0]["lr"] = 0.0
    assert prog.param_groups[0]["lr"] == 0.0
    for n in (8, 5):
        before = prog.parameters()
        prog.step(*batch(n, seed=n))
        after = prog.parameters()
        assert all(np.array_equal(before[k], after[k]) for k in before), f"batch {n}"
    prog.param_groups[0]["lr"] = 0.05
    twin = aicfc.compile(make_model(), optimizer=optim.SGD(lr=0.05), backend="numpy")
    twin.load_state_dict({**prog.state_dict(), "optim.0.lr": np.asarray(0.05)})
    prog.step(*batch(8, seed=1))
    twin.step(*batch(8, seed=1))
    assert all(np.array_equal(prog.parameters()[k], v) for k, v in twin.parameters().items())


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_a_negative_or_nan_lr_is_refused_before_anything_is_written(bad):
    prog = aicfc.compile(make_model(), optimizer=optim.Adam(lr=1e-3), backend="numpy")
    prog.step(*batch(8))
    before = prog.state_dict()
    with pytest.raises(ValueError, match=r"param_groups\[0\]: lr must be >= 0 and finite"):
        prog.param_groups[0]["lr"] = bad
    with pytest.raises(ValueError, match=r"betas\[1\] must be in \[0, 1\)"):
        prog.param_groups[0]["betas"] = (0.9, 1.5)
    after = prog.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_reassigning_the_optimizer_applies_to_every_group_or_is_refused():
    prog = aicfc.compile(make_model(), optimizer=optim.Adam(lr=1e-3), backend="numpy")
    prog.step(*batch(8))
    prog.optimizer = optim.Adam(lr=5e-4, betas=(0.8, 0.99))
    assert prog.param_groups[0]["lr"] == 5e-4
    assert prog.param_groups[0]["betas"] == (0.8, 0.99)
    before = prog.state_dict()
    with pytest.raises(ValueError, match="cannot replace"):
        prog.optimizer = optim.SGD(lr=0.1)
    assert isinstance(prog.optimizer, optim.Adam)
    assert all(np.array_equal(before[k], v) for k, v in prog.state_dict().items())


def test_a_schedule_with_nonsense_arguments_is_a_clear_value_error():
    with pytest.raises(ValueError, match="T_max must be a whole number >= 1, got -5"):
        lr_scheduler.CosineAnnealingLR(T_max=-5)
    with pytest.raises(ValueError, match="start_factor must be in"):
        lr_scheduler.LinearLR(start_factor=0.0)
    with pytest.raises(ValueError, match="milestones must be positive and increasing"):
        lr_scheduler.SequentialLR(
            [lr_scheduler.LinearLR(), lr_scheduler.CosineAnnealingLR(T_max=3)], milestones=[0]
        )
    with pytest.raises(NotImplementedError, match="runs no Python"):
        lr_scheduler.LambdaLR(None, lambda e: 1.0)


def test_a_scheduled_lr_is_read_only_and_initial_lr_moves_the_whole_schedule():
    prog = aicfc.compile(
        make_model(),
        optimizer=optim.SGD(lr=0.2),
        backend="numpy",
        lr_scheduler=lr_scheduler.StepLR(step_size=2, gamma=0.5),
    )
    for _ in range(3):
        prog.step(*batch(8))
    assert prog.param_groups[0]["lr"] == pytest.approx(0.2 * 0.5)  # after 3 updates: 3 // 2
    with pytest.raises(ValueError, match="initial_lr"):
        prog.param_groups[0]["lr"] = 0.1
    prog.param_groups[0]["initial_lr"] = 0.4
    assert prog.param_groups[0]["lr"] == pytest.approx(0.4 * 0.5)


# --- gradient accumulation, gradients out ----------------------------------------


def test_k_micro_batches_equal_one_batch_k_times_as_large():
    x, y = batch(24, seed=3)
    big = aicfc.compile(make_model(1), optimizer=optim.Adam(lr=1e-2), backend="numpy")
    acc = aicfc.compile(make_model(1), optimizer=optim.Adam(lr=1e-2), backend="numpy", accumulate=3)
    for _ in range(2):
        big.step(x, y)
        for k in range(3):
            before = acc.parameters()
            acc.step(x[8 * k : 8 * (k + 1)], y[8 * k : 8 * (k + 1)])
            if k < 2:  # no update inside the window
                assert all(np.array_equal(before[n], v) for n, v in acc.parameters().items())
    ours, want = acc.parameters(), big.parameters()
    for n in want:
        assert rel_err(ours[n], want[n]) <= 1e-5, n
    assert float(acc.state_dict()["0.weight.step"]) == 2.0


def test_gradients_out_equal_torch_and_are_off_by_default():
    model = make_model(2)
    prog = aicfc.compile(model, optimizer=optim.SGD(lr=0.1), backend="numpy", keep_gradients=True)
    tmodel = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)
    )
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    x, y = batch(8, seed=4)
    prog.step(x, y)
    torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    grads = prog.gradients()
    for name, p in tmodel.named_parameters():
        assert rel_err(grads[name], p.grad.numpy()) <= 1e-5, name
    assert not any(k.endswith(".grad") for k in prog.state_dict())
    plain = aicfc.compile(make_model(2), optimizer=optim.SGD(lr=0.1), backend="numpy")
    with pytest.raises(ValueError, match="keep_gradients=True"):
        plain.gradients()


# --- modes and evaluate ------------------------------------------------------------


def test_eval_mode_runs_no_dropout_and_train_mode_restores_it():
    x, y = batch(8)
    drop = aicfc.compile(make_model(3, dropout=0.5), optimizer=optim.SGD(lr=0.1), backend="numpy")
    aicfc.manual_seed(3)  # the same layers and draws, with a dropout that drops nothing
    same = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Dropout(0.0), nn.Linear(HIDDEN, OUT))
    plain = aicfc.compile(same, optimizer=optim.SGD(lr=0.1), backend="numpy")
    drop.eval()
    assert not drop.training
    assert drop.step(x, y) == plain.step(x, y)
    offset = int(drop.state_dict()["rng.offset"])
    drop.train()
    assert drop.step(x, y) != plain.step(x, y)
    assert int(drop.state_dict()["rng.offset"]) == offset + 1


def test_evaluate_is_the_mean_loss_and_accuracy_over_all_rows_without_an_update():
    prog = aicfc.compile(make_model(4, dropout=0.3), optimizer=optim.Adam(), backend="numpy")
    x, y = batch(37, seed=5)
    before = prog.state_dict()
    result = prog.evaluate(x, y, batch_size=10)
    assert all(np.array_equal(before[k], v) for k, v in prog.state_dict().items())
    p = {k: v.astype(np.float64) for k, v in prog.parameters().items()}
    logits = np.maximum(x @ p["0.weight"].T + p["0.bias"], 0.0) @ p["3.weight"].T + p["3.bias"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    assert result.rows == 37
    assert result.loss == pytest.approx(-logp[np.arange(37), y].mean(), rel=1e-5)
    assert result.accuracy == np.mean(logits.argmax(axis=1) == y)


# --- checkpoints ------------------------------------------------------------------


def run_steps(prog: aicfc.Program, start: int, count: int) -> list[float]:
    return [prog.step(*batch(8, seed=100 + i)) for i in range(start, start + count)]


@pytest.mark.parametrize("split", [4, 7], ids=["window-boundary", "mid-accumulation"])
def test_a_checkpoint_resumes_bit_identically_under_another_manual_seed(tmp_path, split):
    """Dropout, a schedule, clipping and 3 micro-batches per update: 7 steps are mid-window
    (7 % 3 = 1) and mid-warm-up; the resumed Program is built under another seed (other
    initial weights, other dropout streams) and continues exactly as the uninterrupted one."""
    whole = full_setup()
    want = run_steps(whole, 0, 14)
    first = full_setup()
    run_steps(first, 0, split)
    path = tmp_path / "ckpt.safetensors"
    first.save(path)
    aicfc.manual_seed(12345)
    resumed = aicfc.compile(
        make_model(99, dropout=0.25),
        optimizer=optim.AdamW(lr=1e-2),
        backend="numpy",
        lr_scheduler=warmup_cosine(),
        clip_grad_norm=0.5,
        accumulate=3,
    )
    assert not np.array_equal(resumed.parameters()["0.weight"], first.parameters()["0.weight"])
    resumed.load(path)
    got = run_steps(resumed, split, 14 - split)
    assert got == want[split:]
    ours, theirs = resumed.state_dict(), whole.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)


def test_a_truncated_or_corrupt_checkpoint_is_an_error_and_leaves_the_program_unchanged(
    tmp_path,
):
    prog = full_setup()
    run_steps(prog, 0, 2)
    path = tmp_path / "ckpt.safetensors"
    prog.save(path)
    data = path.read_bytes()
    target = full_setup()
    before = target.state_dict()
    damaged = {
        "truncated": data[: len(data) // 2],
        "corrupt": data[:8] + b"\xff" * 32 + data[40:],
        "empty": b"",
    }
    for what, content in damaged.items():
        bad = tmp_path / f"{what}.safetensors"
        bad.write_bytes(content)
        with pytest.raises(CheckpointError, match=f"checkpoint '{bad}'"):
            target.load(bad)
        after = target.state_dict()
        assert all(np.array_equal(before[k], after[k]) for k in before), what
    with pytest.raises(CheckpointError, match="no such file"):
        target.load(tmp_path / "missing.safetensors")


def test_a_checkpoint_of_another_model_or_a_newer_version_says_so(tmp_path):
    from safetensors.numpy import load_file, save_file

    prog = full_setup()
    path = tmp_path / "ckpt.safetensors"
    prog.save(path)
    other = aicfc.compile(
        nn.Sequential(nn.Linear(IN, 7), nn.ReLU(), nn.Linear(7, OUT)),
        optimizer=optim.AdamW(lr=1e-2),
        backend="numpy",
    )
    with pytest.raises(CheckpointError, match=r"of another model: .*0\.weight is float32"):
        other.load(path)
    setup = aicfc.compile(make_model(0, dropout=0.25), optimizer=optim.AdamW(), backend="numpy")
    with pytest.raises(CheckpointError, match="another training setup"):
        setup.load(path)
    meta = aicfc.load(path).metadata
    newer = tmp_path / "newer.safetensors"
    save_file(load_file(path), newer, metadata={**meta, "format_version": "99"})
    with pytest.raises(CheckpointError, match="format version 99 was written by a newer aicfc"):
        prog.load(newer)


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path):
    prog = full_setup()
    path = tmp_path / "ckpt.safetensors"
    prog.save(path)
    first = path.read_bytes()
    run_steps(prog, 0, 1)
    prog.save(path)
    assert path.read_bytes() != first
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    ckpt = aicfc.load(path)
    assert ckpt.version == 1
    assert int(ckpt.state["grad_accum.micro_step"]) == 1


def test_warmup_cosine_is_linear_warmup_then_cosine_as_torch_gives_it():
    """lr_scheduler.warmup_cosine(100): LinearLR(0.01, 5) then CosineAnnealingLR(95), the
    lr of each of 100 updates equal to torch's SequentialLR of the two (base lr 1.0)."""
    from aicfc.optim import lr_scheduler

    ours = lr_scheduler.warmup_cosine(100)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    theirs = torch.optim.lr_scheduler.SequentialLR(
        opt,
        [
            torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=5),
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=95),
        ],
        milestones=[5],
    )
    for t in range(100):
        assert abs(ours.lr(1.0, t) - opt.param_groups[0]["lr"]) <= 1e-12, t
        opt.step()
        theirs.step()
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="warmup_cosine: updates must be an integer >= 1"):
            lr_scheduler.warmup_cosine(bad)  # type: ignore[arg-type]


def test_a_gpt_checkpoint_resumes_bit_identically_under_another_manual_seed(tmp_path):
    """A GPT with attention and residual dropout (its layers keyed by their names, as
    nn.Dropout is), AdamW's two weight-decay groups, a schedule and clipping: saved after 3
    steps and loaded into a GPT built under another seed, it continues exactly as the
    uninterrupted run (losses and every state bitwise)."""
    from aicfc.models.gpt import GPT, GPTConfig

    def gpt_setup(seed: int) -> aicfc.Program:
        aicfc.manual_seed(seed)
        return aicfc.compile(
            GPT(GPTConfig(17, 8, 1, 2, 16, 0.2, True)),
            optimizer=optim.AdamW(lr=1e-2, weight_decay=0.1, weight_decay_min_rank=2),
            backend="numpy",
            lr_scheduler=warmup_cosine(),
            clip_grad_norm=0.5,
        )

    def tokens(i: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.random.default_rng(200 + i).integers(0, 17, (2, 9))
        return ids[:, :-1], ids[:, 1:]

    whole = gpt_setup(0)
    want = [whole.step(*tokens(i)) for i in range(6)]
    first = gpt_setup(0)
    for i in range(3):
        first.step(*tokens(i))
    path = tmp_path / "gpt.safetensors"
    first.save(path)
    resumed = gpt_setup(4321)
    assert not np.array_equal(resumed.state_dict()["rng.offset"], first.state_dict()["rng.offset"])
    resumed.load(path)
    assert [resumed.step(*tokens(i)) for i in range(3, 6)] == want[3:]
    ours, theirs = resumed.state_dict(), whole.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)
