"""PyTorch as the oracle: the compiled train step follows torch.optim step for step.

From the same initial weights (ours, copied into a torch.nn.Sequential) and the
same batches of scikit-learn's digits, N optimizer steps on aicfc's NumPy backend
(the whole pipeline: fuse, expand-backward, lower-exec, fold-inplace,
plan-memory) must match torch.optim on the CPU.

Metric, per tensor: max|ours - torch| / max|torch| (the error relative to the
tensor's scale, so entries that pass through zero do not blow it up), asserted
< 1e-4 for every parameter and optimizer state, and for every step's loss.
Both sides compute in float32; the differences come only from summation order.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import aicfc
from aicfc import nn, optim
from support import rel_err, single_threaded_blas  # noqa: F401  (autouse: one BLAS thread)

TOL = 1e-4
BATCH = 64


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def batches(x: np.ndarray, y: np.ndarray, steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        idx = rng.choice(len(x), BATCH, replace=False)
        yield x[idx], y[idx]


def mlp(seed: int, act: type[nn.Module] = nn.ReLU, out: int = 10) -> nn.Sequential:
    aicfc.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 128), act(), nn.Linear(128, 128), act(), nn.Linear(128, out))


TORCH_ACT = {
    nn.ReLU: torch.nn.ReLU,
    nn.GELU: torch.nn.GELU,
    nn.Tanh: torch.nn.Tanh,
    nn.SiLU: torch.nn.SiLU,
}


def torch_twin(model: nn.Sequential, act: type[nn.Module] = nn.ReLU) -> torch.nn.Sequential:
    """The same architecture in torch with our initial weights (names match)."""
    t = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        TORCH_ACT[act](),
        torch.nn.Linear(128, 128),
        TORCH_ACT[act](),
        torch.nn.Linear(128, model[4].out_features),
    )
    t.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    return t


def check_against_torch(prog, tmodel, topt, data, loss_fn, steps: int) -> None:
    for i, (x, y) in enumerate(batches(*data, steps)):
        ours = prog.step(x, y)
        topt.zero_grad()
        ref = loss_fn(tmodel(torch.from_numpy(x)), torch.from_numpy(y))
        ref.backward()
        topt.step()
        assert abs(ours - ref.item()) <= TOL * abs(ref.item()), f"loss of step {i}"
    ours_state = prog.state_dict()
    tparams = dict(tmodel.named_parameters())
    for name, p in tparams.items():
        err = rel_err(ours_state[name], p.detach().numpy())
        assert err < TOL, f"{name}: max rel diff {err:.2e} after {steps} steps"
        for key, value in topt.state[p].items():
            ref_state = value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)
            err = rel_err(ours_state[f"{name}.{key}"], ref_state)
            assert err < TOL, f"{name}.{key}: max rel diff {err:.2e} after {steps} steps"


def test_adam_50_steps_match_torch(digits):
    model = mlp(0)
    prog = aicfc.compile(model, optimizer=optim.Adam(lr=1e-3), backend="numpy")
    tmodel = torch_twin(model)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
    check_against_torch(prog, tmodel, topt, digits, torch.nn.functional.cross_entropy, 50)
    # The state was really compared: Adam's per-param step counter reached 50.
    assert float(prog.state_dict()["0.weight.step"]) == 50.0


def test_sgd_momentum_50_steps_match_torch(digits):
    model = mlp(1)
    prog = aicfc.compile(model, optimizer=optim.SGD(lr=0.05, momentum=0.9), backend="numpy")
    tmodel = torch_twin(model)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.05, momentum=0.9)
    check_against_torch(prog, tmodel, topt, digits, torch.nn.functional.cross_entropy, 50)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (
            optim.Adam(lr=1e-3, weight_decay=1e-2),
            lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=1e-2),
        ),
        (
            optim.AdamW(lr=1e-3, weight_decay=1e-1),
            lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-1),
        ),
        (
            optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True),
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True),
        ),
    ],
    ids=["adam-l2", "adamw", "sgd-nesterov-wd"],
)
def test_weight_decay_matches_torch(digits, ours, theirs):
    model = mlp(2)
    prog = aicfc.compile(model, optimizer=ours, backend="numpy")
    tmodel = torch_twin(model)
    check_against_torch(
        prog, tmodel, theirs(tmodel.parameters()), digits, torch.nn.functional.cross_entropy, 30
    )


@pytest.mark.parametrize("act", [nn.GELU, nn.Tanh], ids=["gelu", "tanh"])
def test_mse_regression_matches_torch(digits, act):
    """MSE on a 4-dim target, through GELU (exact erf) or Tanh hidden layers."""
    x, _ = digits
    rng = np.random.default_rng(3)
    target = (x @ rng.standard_normal((64, 4)).astype(np.float32) * 0.1).astype(np.float32)
    model = mlp(3, act, out=4)
    prog = aicfc.compile(model, loss="mse", optimizer=optim.Adam(lr=1e-3), backend="numpy")
    tmodel = torch_twin(model, act)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
    check_against_torch(prog, tmodel, topt, (x, target), torch.nn.functional.mse_loss, 30)


def test_silu_mlp_adam_50_steps_match_torch(digits):
    """SiLU hidden layers (fused into gemm_epilogue act = silu, backward epilogue_grad) train
    as torch.nn.SiLU does: losses, parameters and Adam's state after 50 steps."""
    model = mlp(4, nn.SiLU)
    prog = aicfc.compile(model, optimizer=optim.Adam(lr=1e-3), backend="numpy")
    kernels = prog.mlir("exec", batch_size=BATCH)
    assert kernels.count('act = "silu"') >= 4, "both layers, forward and backward, are fused"
    tmodel = torch_twin(model, nn.SiLU)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
    check_against_torch(prog, tmodel, topt, digits, torch.nn.functional.cross_entropy, 50)


def test_adamw_without_decay_below_rank_2_matches_torchs_two_param_groups(digits):
    """weight_decay_min_rank=2 (nanoGPT's grouping) trains as torch.optim.AdamW with the
    matrices in a group of weight_decay 0.5 and the biases in one of weight_decay 0; the
    updates are emitted group by group (the matrices' first), each with its own decay."""
    model = mlp(5)
    ours = optim.AdamW(lr=1e-3, weight_decay=0.5, weight_decay_min_rank=2)
    prog = aicfc.compile(model, optimizer=ours, backend="numpy")
    graph = prog.mlir("graph", batch_size=BATCH)
    steps = [line for line in graph.splitlines() if "autodiff.adam_step" in line]
    groups = [re.search(r"weight_decay\(%optim\.(\d)\.weight_decay\)", line) for line in steps]
    assert [m and m.group(1) for m in groups] == ["0"] * 3 + ["1"] * 3, steps
    assert prog.param_groups[0]["weight_decay"] == 0.5
    assert prog.param_groups[1]["weight_decay"] == 0.0
    tmodel = torch_twin(model)
    matrices = [p for p in tmodel.parameters() if p.dim() >= 2]
    vectors = [p for p in tmodel.parameters() if p.dim() < 2]
    topt = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.5}, {"params": vectors, "weight_decay": 0.0}],
        lr=1e-3,
    )
    check_against_torch(prog, tmodel, topt, digits, torch.nn.functional.cross_entropy, 30)
    # the grouping mattered: decaying the biases too gives other biases
    plain = aicfc.compile(mlp(5), optimizer=optim.AdamW(lr=1e-3, weight_decay=0.5), backend="numpy")
    for x, y in batches(*digits, 30):
        plain.step(x, y)
    assert rel_err(plain.state_dict()["0.bias"], prog.state_dict()["0.bias"]) > 1e-3


def test_weight_decay_min_rank_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="AdamW: weight_decay_min_rank must be an integer"):
            optim.AdamW(weight_decay_min_rank=bad)
    with pytest.raises(ValueError, match="shorthand for two param_groups; give one or the other"):
        optim.AdamW(weight_decay_min_rank=2, param_groups=(optim.ParamGroup(),))
