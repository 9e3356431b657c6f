"""Reshapes as views: aicfc-plan-memory places a reshape's result at its operand's bytes
(exec.view_groups), so the runtimes read those bytes instead of copying them.

Checked on a GPT train step (its reshapes sit between the [N, T, D] layers and the [N T, D]
products): on the NumPy runtime the program with view groups trains bitwise as the one
without (every reshape a copy into bytes of its own, view_groups patched out) in a smaller
arena; for the CUDA kernel family every reshape of the lowered fp32 and bf16 steps is one
the CuPy runtime may skip (runtime/schedule.py view_aliases), where 19 and 24 of the 50 of
nanoGPT-char's step were copies before."""

from __future__ import annotations

import numpy as np
import pytest

from aicfc import optim
from aicfc.dialects import exec as ex
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.program import Program
from aicfc.runtime import registry
from aicfc.runtime.numpy.backend import NumpyBackend
from aicfc.runtime.plan import LaunchStep
from aicfc.runtime.schedule import view_aliases
from gpu.test_abi_lowered_cpu import lowered_plans

CONFIG = GPTConfig(vocab_size=33, block_size=16, n_layer=2, n_head=4, n_embd=64)


def train(monkeypatch: pytest.MonkeyPatch, views: bool) -> tuple[list[float], dict, int, int]:
    """(losses, state dict, arena bytes, reshapes whose result shares its operand's offset)."""
    with monkeypatch.context() as m:
        if not views:
            m.setattr(ex, "view_groups", lambda program: {})
        opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
        prog = Program(
            GPT(CONFIG, rng=np.random.default_rng(0)), "cross_entropy", opt, NumpyBackend()
        )
        rng = np.random.default_rng(3)
        losses = []
        for _ in range(3):
            x, y = (rng.integers(0, 33, (3, 16)).astype(np.int32) for _ in range(2))
            losses.append(prog.step(x, y))
        plan = prog.executable().plan
    shared = sum(
        1
        for s in plan.steps
        if isinstance(s, LaunchStep)
        and s.kernel == "numpy.reshape_out"
        and plan.buffers[s.inputs[0]].offset == plan.buffers[s.outputs[0]].offset
    )
    return losses, prog.state_dict(), plan.arena_size, shared


def test_views_train_bitwise_as_copies_in_a_smaller_arena(monkeypatch):
    with_views = train(monkeypatch, views=True)
    copies = train(monkeypatch, views=False)
    assert with_views[0] == copies[0]
    assert with_views[1].keys() == copies[1].keys()
    for key, want in copies[1].items():
        np.testing.assert_array_equal(with_views[1][key], want, err_msg=key, strict=True)
    assert copies[3] == 0  # without groups no result shares its operand's bytes
    assert with_views[3] > 0
    assert with_views[2] < copies[2], (with_views[2], copies[2])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_every_reshape_of_the_cuda_gpt_step_is_a_view(precision):
    gpt = GPT(GPTConfig(65, 64, 2, 4, 128, 0.0, True))
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
    (plan,) = [
        p
        for p in lowered_plans(
            gpt,
            "cross_entropy",
            opt,
            8,
            cublaslt=True,
            autocast=None if precision == "fp32" else precision,
        )
        if p.name == "train_step"
    ]

    def is_view(step: LaunchStep) -> bool:
        spec = registry.KERNELS_BY_NAME.get(step.kernel)
        return spec is not None and spec.view

    reshapes = [k for k, s in enumerate(plan.steps) if isinstance(s, LaunchStep) and is_view(s)]
    assert len(reshapes) >= 10  # the step has them: per layer around attention and the MLP
    viewed = view_aliases(plan, is_view)
    assert sorted(viewed) == sorted(plan.steps[k].outputs[0] for k in reshapes)
