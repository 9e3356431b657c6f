"""kernels/mlp_fused.cu on the CPU: the whole MLP train step in one persistent kernel,
emulated behind its real launcher with every block alive at once (cuda_emu.py's
cooperative mode: the kernel's grid barrier needs all blocks resident).

Against the NumPy reference (runtime/reference.py mlp_train_step: the unfused ops) over
two steps in place, at ragged shapes (widths 10, 100, 255, 256; batches 1, 7, 33,
128) and with a grid of 2 to 4 blocks, so that every phase hands tiles to several
blocks and the barrier is crossed 2 L - 1 times a step. The products sum in another
order than NumPy's, so values are compared by the norm-wise relative error against
F32_TOL (1e-5); step counters exactly. apply = 0 must leave every parameter and state
bit-identical; the barrier's counters must come back zeroed after every launch (the
next replay starts from them).
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from gpu import cuda_emu
from gpu.cuda_emu import EmuArray, EmuContext, EmuFunction, NullStream
from gpu.gpu_support import F32_TOL, rel_err
from gpu.mlp_step_cases import HEAD, operands, reference_steps

REASON = cuda_emu.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

KERNEL = "cuda.mlp_train_step_f32"


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setattr(
        cuda_abi,
        "get_function",
        lambda spec: EmuFunction(
            cuda_emu.build(spec.source), spec.symbol, cooperative="grid_sync" in spec.flags
        ),
    )


def run_in_place(ops, params, blocks, steps):
    """`steps` launches with every param and state updated in place; (outputs, ctx)."""
    ins = [EmuArray(a) for a in ops]
    outs = [EmuArray(np.zeros((), np.float32)), *ins[HEAD:]]
    ctx = EmuContext()
    ctx.sm_count = blocks
    launches = launches_for(registry.get(KERNEL), ins, outs, params, ctx)
    assert len(launches) == 1 and launches[0].grid == (blocks,)
    for _ in range(steps):
        launches[0](NullStream())
        assert not ctx.keep[-1].array.any(), "the grid barrier's counters were left non-zero"
    return [o.array.reshape(o.shape) for o in outs]


CASES = [
    # (batch, widths, acts, weight_decay, decoupled, grad_scale, blocks)
    (7, (10, 100, 10), "relu,none", 0.0, False, 1.0, 3),
    (1, (255, 256, 10), "gelu,none", 0.01, False, 1.0, 4),
    (33, (100, 255, 10), "tanh,none", 0.1, True, 0.5, 2),
    (128, (10, 10, 100, 10), "relu,silu,none", 0.0, False, 1.0, 4),
    (7, (256, 10), "none", 0.0, False, 1.0, 2),
]


@pytest.mark.parametrize(
    ("batch", "widths", "acts", "weight_decay", "decoupled", "grad_scale", "blocks"),
    CASES,
    ids=[f"{c[0]}x{'-'.join(map(str, c[1]))}-{c[2].replace(',', '-')}" for c in CASES],
)
def test_two_steps_in_place_match_the_reference(
    batch, widths, acts, weight_decay, decoupled, grad_scale, blocks
):
    rng = np.random.default_rng(batch * 1000 + sum(widths))
    ops = operands(rng, batch, widths, weight_decay, grad_scale, step=4.0)
    params = {"acts": acts, "bias": (1,) * (len(widths) - 1)}
    if decoupled:
        params["decoupled_weight_decay"] = True
    want = reference_steps(ops, params, 2)
    got = run_in_place(ops, params, blocks, 2)
    assert rel_err(got[0], want[0]) <= F32_TOL, "loss"
    for k, (g, w) in enumerate(zip(got[1:], want[1:], strict=True)):
        if w.ndim == 0:  # a step counter: 4 + 2
            assert g == w == np.float32(6.0), f"step counter of result #{k + 1}"
        else:
            assert rel_err(g, w) <= F32_TOL, f"result #{k + 1} {w.shape}"


def test_apply_zero_leaves_every_param_and_state_bit_identical():
    rng = np.random.default_rng(5)
    ops = operands(rng, 9, (12, 40, 6), weight_decay=0.1, apply=0.0, step=2.0)
    before = [a.copy() for a in ops[HEAD:]]
    got = run_in_place(ops, {"acts": "relu,none", "bias": (1, 1)}, 3, 2)
    for k, (g, b) in enumerate(zip(got[1:], before, strict=True)):
        np.testing.assert_array_equal(g, b, err_msg=f"result #{k + 1}")
    assert (
        rel_err(got[0], reference_steps(ops, {"acts": "relu,none", "bias": (1, 1)}, 1)[0])
        <= F32_TOL
    )


def test_a_label_outside_the_classes_makes_the_loss_nan():
    rng = np.random.default_rng(6)
    ops = operands(rng, 5, (8, 16, 4))
    ops[1][2] = 4
    got = run_in_place(ops, {"acts": "relu,none", "bias": (1, 1)}, 2, 1)
    assert np.isnan(got[0])


def test_the_launcher_refuses_a_width_past_256():
    rng = np.random.default_rng(8)
    ops = operands(rng, 4, (8, 257, 4))
    ins = [EmuArray(a) for a in ops]
    outs = [EmuArray(np.zeros((), np.float32)), *ins[HEAD:]]
    with pytest.raises(cuda_abi.CudaKernelError, match="at most 256 outputs"):
        launches_for(
            registry.get(KERNEL), ins, outs, {"acts": "relu,none", "bias": (1, 1)}, EmuContext()
        )
