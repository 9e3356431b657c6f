"""The NumPy backend's bound steps: the `_out` kernels train exactly as the reference does.

A whole training step on the bound kernels gives bitwise the params, state and losses
of the same program run on the reference (`NumpyBackend(reference=True)`), step after
step; every launch of an MLP step runs its bound kernel; a launch whose outputs overlap
its inputs in a way its alias policy does not allow runs the reference; a warmed-up step
allocates no array (tracemalloc); BLAS threads stay the user's.
"""

# ruff: noqa: E501  (embedded MLIR keeps one op per line)

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from aicfc import nn, optim
from aicfc.backends import get_backend
from aicfc.dialects import exec as ex
from aicfc.execute import find_program, run_pipeline
from aicfc.ir import parse_module
from aicfc.program import Program
from aicfc.runtime.numpy.backend import NumpyBackend
from aicfc.runtime.plan import BufferSpec, ExecPlan, LaunchStep

STEPS = 6

MODELS = {
    "relu_adam_cross_entropy": (
        lambda rng: nn.Sequential(
            nn.Linear(12, 16, rng=rng),
            nn.ReLU(),
            nn.Linear(16, 16, rng=rng),
            nn.ReLU(),
            nn.Linear(16, 5, rng=rng),
        ),
        "cross_entropy",
        optim.Adam(lr=1e-2),
    ),
    "gelu_tanh_adamw_cross_entropy": (
        lambda rng: nn.Sequential(
            nn.Linear(12, 16, rng=rng),
            nn.GELU(),
            nn.Linear(16, 8, rng=rng),
            nn.Tanh(),
            nn.Linear(8, 5, rng=rng),
        ),
        "cross_entropy",
        optim.AdamW(lr=1e-2, weight_decay=0.05),
    ),
    "adam_l2_mse": (
        lambda rng: nn.Sequential(nn.Linear(12, 16, rng=rng), nn.ReLU(), nn.Linear(16, 5, rng=rng)),
        "mse",
        optim.Adam(lr=1e-2, weight_decay=0.05),
    ),
    "sgd_nesterov_mse_f64": (
        lambda rng: nn.Sequential(
            nn.Linear(12, 16, rng=rng, dtype=np.float64),
            nn.GELU(),
            nn.Linear(16, 5, rng=rng, dtype=np.float64),
        ),
        "mse",
        optim.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    ),
    "sgd_dropout": (
        lambda rng: nn.Sequential(
            nn.Linear(12, 16, rng=rng),
            nn.ReLU(),
            nn.Dropout(0.25, seed=7),
            nn.Linear(16, 5, rng=rng),
        ),
        "cross_entropy",
        optim.SGD(lr=0.1),
    ),
}


def programs(name: str) -> tuple[Program, Program]:
    build, loss, opt = MODELS[name]
    fast = Program(build(np.random.default_rng(0)), loss, opt, NumpyBackend())
    ref = Program(build(np.random.default_rng(0)), loss, opt, NumpyBackend(reference=True))
    return fast, ref


def batch(rng: np.random.Generator, loss: str, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((10, 12)).astype(dtype)
    y = (
        rng.integers(0, 5, 10)
        if loss == "cross_entropy"
        else rng.standard_normal((10, 5)).astype(dtype)
    )
    return x, y


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bound_kernels_train_bitwise_as_the_reference(name):
    fast, ref = programs(name)
    dtype = np.float64 if name.endswith("f64") else np.float32
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        x, y = batch(rng, MODELS[name][1], dtype)
        assert fast.step(x, y) == ref.step(x, y), f"{name}: loss differs at step {step}"
    got, want = fast.state_dict(), ref.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name}: {key}", strict=True)
    x, _ = batch(rng, MODELS[name][1], dtype)
    np.testing.assert_array_equal(fast.predict(x), ref.predict(x), strict=True)
    # the comparison means something: the fast program ran bound kernels, the other none
    assert set(ref.executable().runs) <= {"reference", "copy"}
    assert sum(r not in ("reference", "copy") for r in fast.executable().runs) >= 5


def test_every_launch_of_an_mlp_step_runs_its_bound_kernel():
    fast, _ = programs("relu_adam_cross_entropy")
    fast.step(*batch(np.random.default_rng(2), "cross_entropy", np.float32))
    exe = fast.executable()
    launches = [s for s in exe.plan.steps if hasattr(s, "kernel")]
    assert all(s.kernel.endswith("_out") for s in launches)
    assert "reference" not in exe.runs and "copy" not in exe.runs  # folded in place
    assert exe.runs.count("optim:adam_step") == 6


def test_a_gpt_step_runs_only_bound_kernels_and_trains_bitwise_as_the_reference():
    """A 2-layer GPT (heads of width 16 over a context of 16: the scores' work arrays
    have the shape of q, k and v) with AdamW: every launch is bound (attention, layer
    norm, the [B, T, D] products with their GELU, embedding, split, concat) and four
    steps give the reference's losses and parameters bit for bit."""
    from aicfc.models.gpt import GPT, GPTConfig

    config = GPTConfig(vocab_size=33, block_size=16, n_layer=2, n_head=4, n_embd=64)
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
    fast, ref = (
        Program(GPT(config, rng=np.random.default_rng(0)), "cross_entropy", opt, backend)
        for backend in (NumpyBackend(), NumpyBackend(reference=True))
    )
    rng = np.random.default_rng(3)
    for step in range(4):
        x, y = (rng.integers(0, 33, (3, 16)).astype(np.int32) for _ in range(2))
        assert fast.step(x, y) == ref.step(x, y), f"loss differs at step {step}"
    runs = fast.executable().runs
    assert "reference" not in runs and "copy" not in runs, sorted(set(runs))
    assert {"attention:packed_qkv_attention_grad", "norm:layer_norm_grad"} <= set(runs)
    got, want = fast.state_dict(), ref.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key, strict=True)


IN_PLACE = """
exec.program @p {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %c = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh_out"(%x) outs(%c) : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.tanh_out"(%c) outs(%c) : (!exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.relu_out"(%c) outs(%c) alias = "out0_in0" : (!exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "c" %c : !exec.buffer<8xf32, tmp>
}
"""


def test_an_in_place_launch_without_its_alias_policy_runs_the_reference():
    program = parse_module(IN_PLACE).body.block.first_op
    assert isinstance(program, ex.ProgramOp)
    backend = get_backend("numpy")
    exe = backend.load(program, backend.create_store())
    assert exe.runs == ("elementwise:tanh", "reference", "elementwise:relu")
    x = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    want = np.maximum(np.tanh(np.tanh(x)), 0)
    np.testing.assert_array_equal(exe.run({"x": x})["c"], want)


def test_outputs_sharing_bytes_with_inputs_run_the_reference():
    """A plan (not verified exec IR, which refuses it) whose %b overlaps %a, the input of
    the launch that writes %b, by half: the bound kernel would read elements it already
    wrote; the reference reads all of %a before the copy."""
    f32 = np.dtype(np.float32)
    plan = ExecPlan(
        "p",
        (
            BufferSpec(0, "x", "input", (8,), f32),
            BufferSpec(1, "%a", "tmp", (8,), f32, offset=0),
            BufferSpec(2, "%b", "tmp", (8,), f32, offset=16),
        ),
        (
            LaunchStep("numpy.relu_out", (0,), (1,), {}),
            LaunchStep("numpy.tanh_out", (1,), (2,), {}),
        ),
        (("b", 2),),
        arena_size=256,
    )
    backend = get_backend("numpy")
    exe = backend.load(plan, backend.create_store())
    assert exe.runs == ("elementwise:relu", "reference")
    x = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(exe.run({"x": x})["b"], np.tanh(np.maximum(x, 0)))


def test_float16_launches_select_the_reference_kernels():
    model = nn.Sequential(nn.Linear(4, 3))
    prog = Program(model, "mse", optim.SGD(lr=0.1), NumpyBackend())
    prog.step(np.ones((2, 4), np.float32), np.ones((2, 3), np.float32))
    assert all(r != "reference" for r in prog.executable().runs)
    text = """
func.func @f(%x: tensor<4xf16> {aicfc.role = "input", aicfc.name = "x"}) -> (tensor<4xf16> {aicfc.name = "y"}) {
  %y = graph.relu %x : tensor<4xf16>
  func.return %y : tensor<4xf16>
}
"""
    module = parse_module(text)
    run_pipeline(module, "aicfc-train-pipeline{backend=numpy}")
    program = find_program(module, "f")
    assert [op.kernel_name for op in ex.launches(program)] == ["numpy.relu"]
    backend = get_backend("numpy")
    exe = backend.load(program, backend.create_store())
    assert exe.runs == ("reference",)
    x = np.array([-1, 2, -3, 4], np.float16)
    np.testing.assert_array_equal(exe.run({"x": x})["y"], np.array([0, 2, 0, 4], np.float16))


ALLOCATION_BOUND = 48 * 1024
"""NumPy's iterator buffer of a broadcasting ufunc (8192 elements, freed inside the call),
the run's input and output dicts and the loss's output copy; the reference step allocates
MBs at this size."""


def test_a_warmed_up_step_allocates_no_array():
    def mlp(rng: np.random.Generator) -> nn.Module:
        return nn.Sequential(
            nn.Linear(784, 256, rng=rng),
            nn.ReLU(),
            nn.Linear(256, 256, rng=rng),
            nn.ReLU(),
            nn.Linear(256, 10, rng=rng),
        )

    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128).astype(np.int32)
    peaks = {}
    for reference in (False, True):
        prog = Program(
            mlp(np.random.default_rng(0)), "cross_entropy", optim.Adam(), NumpyBackend(reference)
        )
        prog.step(x, y)
        exe = prog.executable()
        inputs = {"x": x, "y": y}
        exe.run(inputs)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            start, _ = tracemalloc.get_traced_memory()
            exe.run(inputs)
            end, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        peaks[reference] = peak - start
        if not reference:
            assert end - start <= 1024, f"a step kept {end - start} bytes"
    assert peaks[False] <= ALLOCATION_BOUND, f"a warmed-up step allocated {peaks[False]} bytes"
    assert peaks[True] >= 1 << 20, "the reference step was expected to allocate MBs"


def test_the_backend_leaves_blas_threads_as_the_user_set_them():
    def blas_threads() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    with threadpool_limits(limits=1, user_api="blas"):
        before = blas_threads()
        prog, _ = programs("relu_adam_cross_entropy")
        prog.step(*batch(np.random.default_rng(5), "cross_entropy", np.float32))
        assert blas_threads() == before == [1] * len(before)


@pytest.mark.parametrize("name", ["gelu_tanh_adamw_cross_entropy", "sgd_nesterov_mse_f64"])
def test_bound_kernels_train_bitwise_as_the_reference_with_the_training_loop(name):
    """A schedule, clipping and 2 micro-batches per update (the optimizer kernels read the
    scheduled lr, grad_scale and the apply flag from their operands at every step), and an
    lr set between steps through param_groups: bitwise the reference backend's."""
    from aicfc.optim import lr_scheduler
    from aicfc.training import TrainingOptions

    build, loss, opt = MODELS[name]
    schedule = lr_scheduler.warmup_cosine(STEPS)
    options = TrainingOptions(lr_scheduler=schedule, clip_grad_norm=0.05, accumulate=2)
    fast, ref = (
        Program(build(np.random.default_rng(0)), loss, opt, backend, options=options)
        for backend in (NumpyBackend(), NumpyBackend(reference=True))
    )
    dtype = np.float64 if name.endswith("f64") else np.float32
    rng = np.random.default_rng(3)
    for step in range(2 * STEPS):
        if step == STEPS:
            for prog in (fast, ref):
                prog.param_groups[0]["initial_lr"] = 0.5 * prog.param_groups[0]["initial_lr"]
        x, y = batch(rng, loss, dtype)
        assert fast.step(x, y) == ref.step(x, y), f"{name}: loss differs at step {step}"
        assert fast.last_grad_norm == ref.last_grad_norm
    got, want = fast.state_dict(), ref.state_dict()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name}: {key}", strict=True)
    runs = fast.executable().runs
    assert sum(r.startswith("optim:") for r in runs) == len(fast.param_names)
