"""Regression: a module used twice (weight tying) was trained as two independent copies.

`Sequential(l, Tanh(), l, ...)` listed l's weight under "0.weight" and "2.weight",
so the train step had two params, two Adam/SGD states and two different
updates, while PyTorch (and the model) have one shared tensor. Now a shared
parameter is one function argument under its first name; every use reads it,
its gradient is the sum over the uses, and the trajectory equals torch.autograd's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import aicfc
from aicfc import nn, optim
from support import single_threaded_blas  # noqa: F401  (autouse: one BLAS thread)

TOL = 2e-5  # float32, three steps of a tiny MLP (one reduction order difference)


def tied_model() -> tuple[nn.Sequential, nn.Linear, nn.Linear]:
    aicfc.manual_seed(3)
    shared, head = nn.Linear(4, 4), nn.Linear(4, 3)
    return nn.Sequential(shared, nn.Tanh(), shared, nn.ReLU(), head), shared, head


def torch_copy(shared: nn.Linear, head: nn.Linear) -> tuple[torch.nn.Module, torch.nn.Linear]:
    ts, th = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)
    with torch.no_grad():
        for t, a in ((ts, shared), (th, head)):
            t.weight.copy_(torch.from_numpy(a.weight.data))
            t.bias.copy_(torch.from_numpy(a.bias.data))  # type: ignore[union-attr]
    return torch.nn.Sequential(ts, torch.nn.Tanh(), ts, torch.nn.ReLU(), th), ts


def test_a_shared_module_is_one_parameter():
    model, _, _ = tied_model()
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "4.weight", "4.bias"]
    # torch.nn.Module.state_dict() keeps every name of a tied tensor; so does ours
    assert sorted(model.state_dict()) == sorted(torch_copy(*tied_model()[1:])[0].state_dict())
    prog = aicfc.compile(model, optimizer=optim.Adam(), backend="numpy")
    assert [n for n in prog.state_dict() if n.count(".") == 1] == [
        "0.weight",
        "0.bias",
        "4.weight",
        "4.bias",
    ]
    ir = prog.mlir("graph", batch_size=2)
    assert '"2.weight"' not in ir and ir.count('aicfc.name = "0.weight"}') == 2  # arg + result


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (optim.SGD(lr=0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
        (optim.Adam(lr=1e-2), lambda p: torch.optim.Adam(p, lr=1e-2)),
    ],
    ids=["sgd_momentum", "adam"],
)
def test_tied_weights_train_like_torch(ours, theirs):
    model, shared, head = tied_model()
    tmodel, tshared = torch_copy(shared, head)
    prog = aicfc.compile(model, optimizer=ours, backend="numpy")
    topt = theirs(tmodel.parameters())
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        y = rng.integers(0, 3, 5)
        loss = prog.step(x, y)
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y))
        tloss.backward()  # type: ignore[no-untyped-call]
        topt.step()
        assert abs(loss - tloss.item()) <= TOL * abs(tloss.item())
    got, want = prog.parameters()["0.weight"], tshared.weight.detach().numpy()
    assert np.abs(got - want).max() <= TOL * np.abs(want).max()
    x = rng.standard_normal((2, 4)).astype(np.float32)
    pred, tpred = prog.predict(x), tmodel(torch.from_numpy(x)).detach().numpy()
    assert np.abs(pred - tpred).max() <= TOL * np.abs(tpred).max()
