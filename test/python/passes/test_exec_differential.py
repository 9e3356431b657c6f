"""Differential tests of the execution half: interpreter(func) == NumPy runtime(lowered program),
with and without aicfc-fold-inplace and aicfc-plan-memory, over several training steps.

Inputs, params and optimizer state are fresh random values (not zeros). Every
output and every final param/state is compared with the interpreter's by
relative error <= 1e-6 (both run the same reference kernels in float32, so any
difference is a buffer, alias or lifetime bug, not rounding).
"""

# ruff: noqa: E501  (embedded MLIR keeps one op per line)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from aicfc.backends import get_backend
from aicfc.dialects import exec as ex
from aicfc.dialects.roles import result_names
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, run_func
from support import exec_program, random_values, rel_err

TOL = 1e-6

TRAIN_STEP = (Path(__file__).parent / "test_exec_train_step.mlir").read_text()
"""A two-layer MLP train step written by hand: forward, cross-entropy, backward
primitives, Adam on layer 1 (with weight decay), SGD with momentum on fc2.weight,
plain SGD on fc2.bias, dropout whose Philox offset advances every step."""


# Every other executable op once, including multi-result ops (gemm_epilogue
# with pre_act, epilogue_grad), nesterov SGD and integer labels of type i64.
KITCHEN_SINK = """
func.func @kitchen_sink(
    %x: tensor<4x6xf32> {aicfc.role = "input", aicfc.name = "x"},
    %t: tensor<4x5xf32> {aicfc.role = "input", aicfc.name = "t"},
    %y: tensor<4xi64> {aicfc.role = "input", aicfc.name = "y"},
    %w: tensor<6x5xf32> {aicfc.role = "param", aicfc.name = "w"},
    %b: tensor<5xf32> {aicfc.role = "param", aicfc.name = "b"},
    %buf: tensor<5xf32> {aicfc.role = "state", aicfc.name = "b.momentum_buffer"},
    %off: tensor<i64> {aicfc.role = "state", aicfc.name = "rng.offset"})
    -> (tensor<f32> {aicfc.name = "ce"}, tensor<f32> {aicfc.name = "mse"},
        tensor<20xf32> {aicfc.name = "flat"}, tensor<4x5xf32> {aicfc.name = "dz"},
        tensor<5xf32> {aicfc.name = "b"}, tensor<5xf32> {aicfc.name = "b.momentum_buffer"},
        tensor<i64> {aicfc.name = "rng.offset"}, tensor<4x5xf32>, tensor<4x6xf32> {aicfc.name = "mm"},
        tensor<4x5xf32> {aicfc.name = "ba"}) {
  %z, %pre = graph.gemm_epilogue %x, %w bias %b act = gelu : (tensor<4x6xf32>, tensor<6x5xf32>, tensor<5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>)
  %dz, %db = autodiff.epilogue_grad %t, %pre act = gelu : (tensor<4x5xf32>, tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<5xf32>)
  %tr = graph.transpose %z perm = [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
  %rs = graph.reshape %tr : tensor<5x4xf32> -> tensor<20xf32>
  %bc = graph.broadcast_to %b : tensor<5xf32> -> tensor<4x5xf32>
  %sm = graph.softmax %z axis = 1 : tensor<4x5xf32>
  %smg = autodiff.softmax_grad %t, %sm axis = 1 : tensor<4x5xf32>
  %th = graph.tanh %smg : tensor<4x5xf32>
  %thg = autodiff.tanh_grad %t, %th : tensor<4x5xf32>
  %d = graph.dropout %thg, %off p = 0.5 seed = 3 : tensor<4x5xf32>, tensor<i64>
  %dg = autodiff.dropout_grad %t, %off p = 0.5 seed = 3 : tensor<4x5xf32>, tensor<i64>
  %s = graph.sub %d, %bc : tensor<4x5xf32>
  %ce = graph.cross_entropy %s, %y : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %ceg = autodiff.cross_entropy_grad %s, %y, %one : (tensor<4x5xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x5xf32>
  %gg = autodiff.gelu_grad %ceg, %z : tensor<4x5xf32>
  %r = graph.relu %pre : tensor<4x5xf32>
  %rg = autodiff.relu_grad %gg, %r : tensor<4x5xf32>
  %mse = graph.mse_loss %rg, %dg : tensor<4x5xf32> -> tensor<f32>
  %mg = autodiff.mse_loss_grad %rg, %dg, %one : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %mul = graph.mul %mg, %th : tensor<4x5xf32>
  %ge = graph.gelu %mul : tensor<4x5xf32>
  %ad = graph.add %ge, %z : tensor<4x5xf32>
  %mm = graph.matmul %ad, %w transpose_b : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
  %ba = graph.bias_add %ad, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %h_lr = graph.constant dense<5.0e-2> : tensor<f64>
  %h_mu = graph.constant dense<0.5> : tensor<f64>
  %h_wd = graph.constant dense<1.0e-2> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %b1, %buf1 = autodiff.sgd_step %b, %db lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) momentum_buffer(%buf) nesterov : tensor<5xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<5xf32>
  %onei = graph.constant dense<1> : tensor<i64>
  %off1 = graph.add %off, %onei : tensor<i64>
  func.return %ce, %mse, %rs, %dz, %b1, %buf1, %off1, %smg, %mm, %ba
    : tensor<f32>, tensor<f32>, tensor<20xf32>, tensor<4x5xf32>, tensor<5xf32>, tensor<5xf32>,
      tensor<i64>, tensor<4x5xf32>, tensor<4x6xf32>, tensor<4x5xf32>
}
"""

VARIANTS = {
    "lowered": (False, False),
    "folded": (True, False),
    "planned": (False, True),
    "folded+planned": (True, True),
}


def check_steps(text: str, fname: str, steps: int, fold: bool, plan: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    fn = find_func(parse_module(text), fname)
    state = random_values(fn, rng, roles=("param", "state"))
    batches = [random_values(fn, rng, roles=("input",)) for _ in range(steps)]
    names = [n if n is not None else f"result{j}" for j, n in enumerate(result_names(fn))]

    backend = get_backend("numpy")
    store = backend.create_store()
    program = backend.load(exec_program(text, fold, plan), store)
    store.load_state_dict(state)
    for k, inputs in enumerate(batches):
        want = dict(zip(names, run_func(fn, {**inputs, **state}), strict=True))
        got = program.run(inputs)
        assert set(got) == {n for n in names if n not in state}
        for name, value in got.items():
            assert value.dtype == want[name].dtype
            assert rel_err(value, want[name]) <= TOL, f"step {k}: output {name}"
        state = {n: want.get(n, v) for n, v in state.items()}  # unreturned: unchanged
        saved = store.state_dict()
        for name, value in state.items():
            assert rel_err(saved[name], value) <= TOL, f"step {k}: state {name}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_train_step_with_adam_and_sgd_matches_the_interpreter(variant):
    fold, plan = VARIANTS[variant]
    check_steps(TRAIN_STEP, "train_step", steps=4, fold=fold, plan=plan, seed=11)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_other_op_matches_the_interpreter(variant):
    fold, plan = VARIANTS[variant]
    check_steps(KITCHEN_SINK, "kitchen_sink", steps=2, fold=fold, plan=plan, seed=12)


def _count(program: ex.ProgramOp, pred: Callable[[object], bool]) -> int:
    return sum(1 for op in program.walk() if pred(op))


def test_the_passes_do_their_job_on_the_train_step():
    lowered = exec_program(TRAIN_STEP, False, False)
    folded = exec_program(TRAIN_STEP, True, True)
    is_alloc = lambda op: isinstance(op, ex.AllocOp)  # noqa: E731
    is_copy = lambda op: isinstance(op, ex.CopyOp)  # noqa: E731
    assert _count(lowered, is_copy) == 12  # one copy-back per param (4) and state (8)
    assert _count(folded, is_copy) == 0  # all folded into in-place updates
    assert _count(folded, is_alloc) < _count(lowered, is_alloc)
    assert folded.arena_size is not None
    sizes = [ex.buffer_type(op.result).nbytes() for op in folded.walk() if is_alloc(op)]
    unshared = sum((n + 255) // 256 * 256 for n in sizes)  # each in its own 256-byte slot
    assert folded.arena_size.value.data < unshared  # some tmp buffers share storage
