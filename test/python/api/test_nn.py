"""aicfc.nn and aicfc.optim: names, layouts and initialisation as in torch.nn / torch.optim."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import aicfc
from aicfc import nn, optim


def test_sequential_names_match_torch():
    aicfc.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 2, bias=False))
    theirs = torch.nn.Sequential(
        torch.nn.Linear(4, 8),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(8, 2, bias=False),
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in ours.state_dict().items():
        assert v.shape == tuple(theirs.state_dict()[k].shape), k
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})


def test_sequential_from_ordered_dict_and_kwargs():
    a = nn.Sequential(OrderedDict(fc1=nn.Linear(3, 4), act=nn.GELU(), fc2=nn.Linear(4, 1)))
    assert [n for n, _ in a.named_parameters()] == [
        "fc1.weight",
        "fc1.bias",
        "fc2.weight",
        "fc2.bias",
    ]
    b = nn.Sequential(enc=nn.Linear(3, 4), out=nn.Tanh())
    assert [n for n, _ in b.named_children()] == ["enc", "out"]
    assert isinstance(a["act"], nn.GELU) and isinstance(a[2], nn.Linear) and len(a) == 3


def test_sequential_rejects_non_modules():
    with pytest.raises(TypeError, match="child '1' is int"):
        nn.Sequential(nn.ReLU(), 3)  # type: ignore[arg-type]


def test_linear_init_is_torch_default_uniform():
    """kaiming_uniform_(a=sqrt(5)) => U(-1/sqrt(in), 1/sqrt(in)): bound, mean 0, std b/sqrt(3)."""
    aicfc.manual_seed(0)
    layer = nn.Linear(256, 512)
    bound = 1 / np.sqrt(256)
    w, b = layer.weight.data, layer.bias.data  # type: ignore[union-attr]
    assert w.shape == (512, 256) and w.dtype == np.float32 and b.shape == (512,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert abs(w.mean()) < 0.01 * bound
    assert np.abs(w).max() > 0.99 * bound


def test_manual_seed_and_rng_make_weights_reproducible():
    aicfc.manual_seed(3)
    a = nn.Linear(5, 5).weight.data
    aicfc.manual_seed(3)
    b = nn.Linear(5, 5).weight.data
    c = nn.Linear(5, 5).weight.data
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)
    d = nn.Linear(5, 5, rng=np.random.default_rng(3)).weight.data
    e = nn.Linear(5, 5, rng=np.random.default_rng(3)).weight.data
    np.testing.assert_array_equal(d, e)


def test_linear_rejects_a_wrong_input_width():
    with pytest.raises(nn.ShapeError, match=r"\[N, 4\].*\[2, 5\]"):
        nn.Linear(4, 3).output_shape((2, 5))


def test_dropout_p_range():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        nn.Dropout(1.0)


def test_module_load_state_dict_checks():
    m = nn.Sequential(nn.Linear(2, 3))
    with pytest.raises(KeyError, match="missing"):
        m.load_state_dict({"0.weight": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match=r"'0\.bias' expects float32\[3\]"):
        m.load_state_dict(
            {"0.weight": np.zeros((3, 2), np.float32), "0.bias": np.zeros(4, np.float32)}
        )


@pytest.mark.parametrize(
    ("opt", "states"),
    [
        (optim.Adam(), ("exp_avg", "exp_avg_sq", "step")),
        (optim.AdamW(), ("exp_avg", "exp_avg_sq", "step")),
        (optim.SGD(lr=0.1, momentum=0.9), ("momentum_buffer",)),
        (optim.SGD(lr=0.1), ()),
    ],
)
def test_optimizer_state_names_follow_torch(opt, states):
    assert opt.state_names() == states
    init = opt.init_state(np.ones((2, 3), np.float32))
    assert tuple(init) == states
    for v in init.values():
        assert not v.any()


def test_adamw_defaults_match_torch():
    t = torch.optim.AdamW([torch.zeros(1)]).defaults
    o = optim.AdamW()
    assert (o.lr, o.betas, o.eps, o.weight_decay) == (
        t["lr"],
        t["betas"],
        t["eps"],
        t["weight_decay"],
    )
    assert o.decoupled_weight_decay


def test_optimizer_defaults_are_torchs_and_written_once_on_the_op_classes():
    import inspect

    from aicfc.dialects import autodiff
    from aicfc.runtime import reference

    t = torch.optim.Adam([torch.zeros(1)]).defaults
    adam = autodiff.AdamStepOp.DEFAULTS
    assert (adam["beta1"], adam["beta2"]) == t["betas"]
    assert (adam["eps"], adam["weight_decay"]) == (t["eps"], t["weight_decay"])
    o = optim.Adam()
    assert (o.lr, o.betas, o.eps, o.weight_decay) == (t["lr"], t["betas"], t["eps"], 0.0)
    s = torch.optim.SGD([torch.zeros(1)]).defaults
    sgd = autodiff.SgdStepOp.DEFAULTS
    assert (sgd["momentum"], sgd["weight_decay"]) == (s["momentum"], s["weight_decay"])
    # every hyperparameter is an operand of the reference (read from device state), and
    # the initial values of those states are the op classes' defaults
    for fn, op in (
        (reference.adam_step, autodiff.AdamStepOp),
        (reference.sgd_step, autodiff.SgdStepOp),
    ):
        params = inspect.signature(fn).parameters
        assert all(params[k].kind == params[k].POSITIONAL_OR_KEYWORD for k in op.HYPERPARAMETERS)
    assert optim.Adam().to_state(optim.Adam().defaults()) == {"lr": t["lr"], **adam}
    assert (optim.SGD().momentum, optim.SGD().weight_decay) == (0.0, 0.0)


def test_sgd_nesterov_needs_momentum():
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD(lr=0.1, nesterov=True)
