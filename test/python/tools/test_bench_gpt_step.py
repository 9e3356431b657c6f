"""tools/bench_gpt_step.py on the CPU: its weights load into aicfc's GPT by name (every
parameter, nothing left over), its torch module is nanoGPT's (the same loss as aicfc's
NumPy backend from those weights), its FLOP count is nanoGPT's formula, and its driver
refuses unknown names and skips rows the deadline leaves too little time."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from aicfc import optim
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.program import Program
from aicfc.runtime.numpy.backend import NumpyBackend
from aicfc.tools import bench_gpt_step as bench


@pytest.mark.parametrize("name", list(bench.CONFIGS))
def test_the_weights_are_the_gpts_parameters_by_name_and_shape(name):
    c = bench.CONFIGS[name]
    gpt = GPT(GPTConfig(c.vocab, c.block, c.layers, c.heads, c.d_model, 0.0, True))
    params = {k: v.shape for k, v in gpt.named_parameters()}
    assert {k: v.shape for k, v in bench.init_weights(c).items()} == params


def test_flops_are_nanogpts_estimate():
    c = bench.CONFIGS["gpt-tiny"]
    n_params = 2 * (12 * 128 * 128 + 13 * 128) + 65 * 128 + 2 * 128  # wpe not counted
    per_token = 6 * n_params + 12 * 2 * 64 * 128
    assert c.flops() == 32 * 64 * per_token
    assert 5.3e9 < c.flops() < 5.5e9 and 1.1e12 < bench.CONFIGS["nanogpt-char"].flops() < 1.2e12


def test_the_torch_peer_computes_aicfcs_loss(monkeypatch):
    monkeypatch.setattr(torch.nn.Module, "cuda", lambda self: self)  # CPU torch here
    c = bench.Config(layers=1, d_model=32, heads=2, block=8, batch=3)
    model = bench.torch_gpt(c, 0.0)
    x, y = bench.make_batch(c)
    theirs = float(
        model(torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64)))
    )
    gpt = GPT(GPTConfig(c.vocab, c.block, c.layers, c.heads, c.d_model, 0.0, True))
    prog = Program(gpt, "cross_entropy", optim.AdamW(lr=1e-3), NumpyBackend(), cache_dir=False)
    prog.load_state_dict(bench.init_weights(c), strict=False)
    assert prog.step(x, y) == pytest.approx(theirs, rel=1e-5)


def test_an_unknown_peer_config_or_precision_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--peers", "aicfc,torch-jit", "--configs", "gpt-huge", "--precisions", "int8"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown torch-jit, gpt-huge, int8: peers are aicfc, torch-graph" in err


def test_a_row_is_skipped_when_the_deadline_leaves_it_too_little_time(tmp_path):
    """A torch.compile row of gpt-tiny needs 35 s of --deadline: with 30 s it is skipped
    (nothing runs, no GPU needed here), and the JSON says so."""
    out = tmp_path / "rows.json"
    args = ["--peers", "torch-compile", "--configs", "gpt-tiny", "--precisions", "fp32"]
    assert bench.main([*args, "--deadline", "30", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["peer"] == "torch-compile" and "seconds" not in row
    assert row["error"].startswith("skipped: 30 s left of the 30 s deadline")
