"""Alias safety of aicfc-fold-inplace: where folding would be wrong the buffers stay
separate, and every program computes what the unfolded program and the interpreter
compute (relative error <= 1e-6 on fresh random inputs, over two steps)."""

# ruff: noqa: E501  (embedded MLIR keeps one op per line)

from __future__ import annotations

import numpy as np
import pytest

from aicfc.backends import get_backend
from aicfc.dialects import exec as ex
from aicfc.dialects.roles import result_names
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, run_func
from support import exec_program, random_values

TOL = 1e-6

A = '{aicfc.role = "input", aicfc.name = "%s"}'
P = '{aicfc.role = "param", aicfc.name = "%s"}'
S = '{aicfc.role = "state", aicfc.name = "%s"}'
N = '{aicfc.name = "%s"}'

CASES = {
    # The update of w runs before the backward reads the old w: w must not be
    # overwritten in place (sgd's out0 stays a separate buffer, copied back at the end).
    "optimizer_before_backward_read": (
        f"""
func.func @f(%x: tensor<4x3xf32> {A % "x"}, %t: tensor<4x2xf32> {A % "t"},
             %w: tensor<2x3xf32> {P % "w"})
    -> (tensor<f32> {N % "loss"}, tensor<2x3xf32> {N % "w"}, tensor<4x3xf32> {N % "dx"}) {{
  %p = graph.matmul %x, %w transpose_b : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %l = graph.mse_loss %p, %t : tensor<4x2xf32> -> tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %dp = autodiff.mse_loss_grad %p, %t, %one : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %dw = graph.matmul %dp, %x transpose_a : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %h_lr = graph.constant dense<0.1> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1 = autodiff.sgd_step %w, %dw lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2x3xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %dx = graph.matmul %dp, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  func.return %l, %w1, %dx : tensor<f32>, tensor<2x3xf32>, tensor<4x3xf32>
}}""",
        [("numpy.sgd_step_out", 0, 0)],
    ),
    # grad and param are one value: the param pair is refused, the moments fold.
    "grad_is_the_param": (
        f"""
func.func @f(%w: tensor<5xf32> {P % "w"}, %m: tensor<5xf32> {S % "w.exp_avg"},
             %v: tensor<5xf32> {S % "w.exp_avg_sq"}, %s: tensor<f32> {S % "w.step"})
    -> (tensor<5xf32> {N % "w"}, tensor<5xf32> {N % "w.exp_avg"},
        tensor<5xf32> {N % "w.exp_avg_sq"}, tensor<f32> {N % "w.step"}) {{
  %h_lr = graph.constant dense<0.1> : tensor<f64>
  %h_beta1 = graph.constant dense<0.9> : tensor<f64>
  %h_beta2 = graph.constant dense<0.999> : tensor<f64>
  %h_eps = graph.constant dense<1.0e-8> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1, %m1, %v1, %s1 = autodiff.adam_step %w, %w, %m, %v, %s lr(%h_lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<5xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %w1, %m1, %v1, %s1 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>
}}""",
        [("numpy.adam_step_out", 0, 0)],
    ),
    # gelu's input is the activation gelu_grad reads in the backward.
    "activation_read_by_backward": (
        f"""
func.func @f(%x: tensor<4x5xf32> {A % "x"}, %dy: tensor<4x5xf32> {A % "dy"})
    -> (tensor<4x5xf32> {N % "y"}, tensor<4x5xf32> {N % "dx"}) {{
  %h = graph.tanh %x : tensor<4x5xf32>
  %y = graph.gelu %h : tensor<4x5xf32>
  %dx = autodiff.gelu_grad %dy, %h : tensor<4x5xf32>
  func.return %y, %dx : tensor<4x5xf32>, tensor<4x5xf32>
}}""",
        [("numpy.gelu_out", 0, 0)],
    ),
    # a * a: one buffer fed twice.
    "same_value_twice": (
        f"""
func.func @f(%x: tensor<6xf32> {A % "x"}) -> (tensor<6xf32> {N % "sq"}) {{
  %a = graph.tanh %x : tensor<6xf32>
  %sq = graph.mul %a, %a : tensor<6xf32>
  func.return %sq : tensor<6xf32>
}}""",
        [("numpy.mul_out", 0, 0)],
    ),
    # The old value of w is also a program output: it must survive the update.
    "old_param_is_an_output": (
        f"""
func.func @f(%g: tensor<3xf32> {A % "g"}, %w: tensor<3xf32> {P % "w"})
    -> (tensor<3xf32> {N % "w"}, tensor<3xf32> {N % "w_old"}) {{
  %h_lr = graph.constant dense<0.5> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1 = autodiff.sgd_step %w, %g lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<3xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %w1, %w : tensor<3xf32>, tensor<3xf32>
}}""",
        [("numpy.sgd_step_out", 0, 0)],
    ),
    # A gradient still read later (the bias gradient sums dy after relu_grad).
    "grad_read_later": (
        f"""
func.func @f(%g: tensor<4x3xf32> {A % "g"}, %y: tensor<4x3xf32> {A % "y"})
    -> (tensor<4x3xf32> {N % "dz"}, tensor<3xf32> {N % "db"}) {{
  %dy = graph.tanh %g : tensor<4x3xf32>
  %dz = autodiff.relu_grad %dy, %y : tensor<4x3xf32>
  %db = graph.reduce_sum %dy axes = [0] : tensor<4x3xf32> -> tensor<3xf32>
  func.return %dz, %db : tensor<4x3xf32>, tensor<3xf32>
}}""",
        [("numpy.relu_grad_out", 0, 0)],
    ),
    # An external input keeps its identity; a param is only overwritten by its next value.
    "externals_keep_identity": (
        f"""
func.func @f(%x: tensor<3xf32> {A % "x"}, %w: tensor<3xf32> {P % "w"})
    -> (tensor<3xf32> {N % "rx"}, tensor<3xf32> {N % "rw"}) {{
  %rx = graph.relu %x : tensor<3xf32>
  %rw = graph.tanh %w : tensor<3xf32>
  func.return %rx, %rw : tensor<3xf32>, tensor<3xf32>
}}""",
        [("numpy.relu_out", 0, 0), ("numpy.tanh_out", 0, 0)],
    ),
    # Two states swapped: the copy-backs read a snapshot, not the overwritten buffer.
    "swap_states": (
        f"""
func.func @f(%a: tensor<2xf32> {S % "a"}, %b: tensor<2xf32> {S % "b"})
    -> (tensor<2xf32> {N % "a"}, tensor<2xf32> {N % "b"}) {{
  func.return %b, %a : tensor<2xf32>, tensor<2xf32>
}}""",
        [],
    ),
    # Folding is right here: w's next value is also b's next value (copy w -> b after).
    "one_value_two_externals": (
        f"""
func.func @f(%g: tensor<3xf32> {A % "g"}, %w: tensor<3xf32> {P % "w"}, %b: tensor<3xf32> {P % "b"})
    -> (tensor<3xf32> {N % "w"}, tensor<3xf32> {N % "b"}) {{
  %h_lr = graph.constant dense<0.5> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1 = autodiff.sgd_step %w, %g lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<3xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %w1, %w1 : tensor<3xf32>, tensor<3xf32>
}}""",
        [],
    ),
}


def run_steps(program: ex.ProgramOp, inputs, state):
    backend = get_backend("numpy")
    store = backend.create_store()
    exe = backend.load(program, store)
    store.load_state_dict(state)
    outs = [exe.run(batch) for batch in inputs]
    return outs, store.state_dict()


@pytest.mark.parametrize("case", list(CASES))
def test_refused_aliases_keep_separate_buffers_and_results_match(case):
    text, refused = CASES[case]
    folded = exec_program(text, fold=True)
    for kernel, o, i in refused:
        (launch,) = [op for op in ex.launches(folded) if getattr(op, "kernel_name", "") == kernel]
        assert launch.outputs[o] is not launch.inputs[i], f"{kernel} out{o} was folded into in{i}"

    rng = np.random.default_rng(sorted(CASES).index(case))
    fn = find_func(parse_module(text), "f")
    state = random_values(fn, rng, roles=("param", "state"))
    inputs = [random_values(fn, rng, roles=("input",)) for _ in range(2)]

    got_folded = run_steps(folded, inputs, state)
    got_plain = run_steps(exec_program(text, fold=False, plan=False), inputs, state)

    names = result_names(fn)
    interp_state = dict(state)
    for k, batch in enumerate(inputs):
        want = dict(zip(names, run_func(fn, {**batch, **interp_state}), strict=True))
        for name, out in got_folded[0][k].items():
            assert np.isfinite(out).all()
            np.testing.assert_allclose(out, want[name], rtol=TOL, atol=0)
            np.testing.assert_allclose(out, got_plain[0][k][name], rtol=TOL, atol=0)
        interp_state = {n: want.get(n, v) for n, v in interp_state.items()}
    for name, want_state in interp_state.items():
        assert np.isfinite(want_state).all()
        np.testing.assert_allclose(got_folded[1][name], want_state, rtol=TOL, atol=0)
        np.testing.assert_allclose(got_plain[1][name], want_state, rtol=TOL, atol=0)
