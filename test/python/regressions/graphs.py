"""Hand-written train steps on unusual but valid graphs (float64), used by the
differential regression tests. Each names the hazard it exercises."""

from __future__ import annotations

# ruff: noqa: E501  (one op per line)

T = "f64"


HYPER = f"""  %h_lr = graph.constant dense<0.1> : tensor<f64>
  %h_lr2 = graph.constant dense<0.01> : tensor<f64>
  %h_b1 = graph.constant dense<0.9> : tensor<f64>
  %h_b2 = graph.constant dense<0.999> : tensor<f64>
  %h_eps = graph.constant dense<1.0e-8> : tensor<f64>
  %h_zero = graph.constant dense<0.0> : tensor<f64>
  %h_scale = graph.constant dense<1.0> : tensor<{T}>
  %h_apply = graph.constant dense<1.0> : tensor<f32>"""
"""The hyperparameters (constants here; the API makes them state) and the update flags."""
ADAM = "lr(%h_lr2) betas(%h_b1, %h_b2) eps(%h_eps) weight_decay(%h_zero) grad_scale(%h_scale) apply(%h_apply)"
SGD = "lr(%h_lr) momentum(%h_zero) weight_decay(%h_zero) grad_scale(%h_scale) apply(%h_apply)"
SGD_MOMENTUM = (
    "lr(%h_lr) momentum(%h_b1) weight_decay(%h_zero) grad_scale(%h_scale) apply(%h_apply)"
)


def _arg(name: str, shape: str, role: str) -> str:
    return f'%{name}: tensor<{shape}{T}> {{aicfc.role = "{role}", aicfc.name = "{name}"}}'


GRAPHS: dict[str, str] = {
    # h is used three times, twice by one op (h * h) and by the loss (mse(b, h)).
    "fan_out_into_the_loss_twice": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("w", "4x4x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "dw"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %a = graph.mul %h, %h : tensor<3x4x{T}>
  %b = graph.add %a, %h : tensor<3x4x{T}>
  %l = graph.mse_loss %b, %h : tensor<3x4x{T}> -> tensor<{T}>
  %g = autodiff.backward %l wrt %w : tensor<{T}>, (tensor<4x4x{T}>) -> (tensor<4x4x{T}>)
  func.return %l, %g : tensor<{T}>, tensor<4x4x{T}>
}}
""",
    # One weight and one bias used by two layers, updated by Adam (a diamond through relu).
    "weight_used_by_two_layers_with_adam": f"""
func.func @f({_arg("x", "3x4x", "input")}, %y: tensor<3xi32> {{aicfc.role = "input", aicfc.name = "y"}},
  {_arg("w", "4x4x", "param")}, {_arg("b", "4x", "param")},
  {_arg("w.exp_avg", "4x4x", "state")}, {_arg("w.exp_avg_sq", "4x4x", "state")},
  %s: tensor<f32> {{aicfc.role = "state", aicfc.name = "w.step"}})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "w"}}, tensor<4x4x{T}> {{aicfc.name = "w.exp_avg"}},
        tensor<4x4x{T}> {{aicfc.name = "w.exp_avg_sq"}}, tensor<f32> {{aicfc.name = "w.step"}}, tensor<4x{T}> {{aicfc.name = "db"}}) {{
  %h = graph.matmul %x, %w transpose_b : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %hb = graph.bias_add %h, %b : (tensor<3x4x{T}>, tensor<4x{T}>) -> tensor<3x4x{T}>
  %r = graph.relu %hb : tensor<3x4x{T}>
  %o = graph.matmul %r, %w transpose_b : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %ob = graph.bias_add %o, %b : (tensor<3x4x{T}>, tensor<4x{T}>) -> tensor<3x4x{T}>
  %l = graph.cross_entropy %ob, %y : (tensor<3x4x{T}>, tensor<3xi32>) -> tensor<{T}>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<{T}>, (tensor<4x4x{T}>, tensor<4x{T}>) -> (tensor<4x4x{T}>, tensor<4x{T}>)
{HYPER}
  %w1, %m1, %v1, %s1 = autodiff.adam_step %w, %g#0, %w.exp_avg, %w.exp_avg_sq, %s {ADAM} : tensor<4x4x{T}>, tensor<f32>, tensor<f64>, tensor<{T}>, tensor<f32>
  func.return %l, %w1, %m1, %v1, %s1, %g#1 : tensor<{T}>, tensor<4x4x{T}>, tensor<4x4x{T}>, tensor<4x4x{T}>, tensor<f32>, tensor<4x{T}>
}}
""",
    # The updated weight and the old one are both read after the update.
    "param_read_before_and_after_its_update": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x4x", "input")}, {_arg("w", "4x4x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "w"}}, tensor<3x4x{T}> {{aicfc.name = "after"}}, tensor<3x4x{T}> {{aicfc.name = "before"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %l = graph.mse_loss %h, %t : tensor<3x4x{T}> -> tensor<{T}>
  %g = autodiff.backward %l wrt %w : tensor<{T}>, (tensor<4x4x{T}>) -> (tensor<4x4x{T}>)
{HYPER}
  %w1 = autodiff.sgd_step %w, %g {SGD} : tensor<4x4x{T}>, tensor<f64>, tensor<{T}>, tensor<f32>
  %a = graph.matmul %x, %w1 : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %bf = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  func.return %l, %w1, %a, %bf : tensor<{T}>, tensor<4x4x{T}>, tensor<3x4x{T}>, tensor<3x4x{T}>
}}
""",
    # Two states swap; the old value of one is also an output.
    "two_states_swap": f"""
func.func @f({_arg("a", "4x", "state")}, {_arg("b", "4x", "state")})
    -> (tensor<4x{T}> {{aicfc.name = "a"}}, tensor<4x{T}> {{aicfc.name = "b"}}, tensor<4x{T}> {{aicfc.name = "old_a"}}) {{
  func.return %b, %a, %a : tensor<4x{T}>, tensor<4x{T}>, tensor<4x{T}>
}}
""",
    # The gradient is an output, the old param is an output, a new state is returned twice.
    "gradient_and_old_param_are_outputs": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x2x", "input")}, {_arg("w", "4x2x", "param")}, {_arg("w.momentum_buffer", "4x2x", "state")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x2x{T}> {{aicfc.name = "w"}}, tensor<4x2x{T}> {{aicfc.name = "w.momentum_buffer"}},
        tensor<4x2x{T}> {{aicfc.name = "grad"}}, tensor<4x2x{T}> {{aicfc.name = "w_old"}}, tensor<4x2x{T}> {{aicfc.name = "buf_again"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x2x{T}>) -> tensor<3x2x{T}>
  %l = graph.mse_loss %h, %t : tensor<3x2x{T}> -> tensor<{T}>
  %g = autodiff.backward %l wrt %w : tensor<{T}>, (tensor<4x2x{T}>) -> (tensor<4x2x{T}>)
{HYPER}
  %w1, %b1 = autodiff.sgd_step %w, %g {SGD_MOMENTUM} momentum_buffer(%w.momentum_buffer) : tensor<4x2x{T}>, tensor<f64>, tensor<{T}>, tensor<f32> -> tensor<4x2x{T}>
  func.return %l, %w1, %b1, %g, %w, %b1 : tensor<{T}>, tensor<4x2x{T}>, tensor<4x2x{T}>, tensor<4x2x{T}>, tensor<4x2x{T}>, tensor<4x2x{T}>
}}
""",
    # A fused relu epilogue whose pre-activation Z is also used downstream.
    "pre_act_used_downstream": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x5x", "input")}, {_arg("w", "5x4x", "param")}, {_arg("b", "5x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<5x4x{T}> {{aicfc.name = "dw"}}, tensor<5x{T}> {{aicfc.name = "db"}}) {{
  %y, %z = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<3x4x{T}>, tensor<5x4x{T}>, tensor<5x{T}>) -> (tensor<3x5x{T}>, tensor<3x5x{T}>)
  %s = graph.mul %y, %z : tensor<3x5x{T}>
  %l = graph.mse_loss %s, %t : tensor<3x5x{T}> -> tensor<{T}>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<{T}>, (tensor<5x4x{T}>, tensor<5x{T}>) -> (tensor<5x4x{T}>, tensor<5x{T}>)
  func.return %l, %g#0, %g#1 : tensor<{T}>, tensor<5x4x{T}>, tensor<5x{T}>
}}
""",
    # matmul -> bias_add -> gelu fuses although the pre-activation has another user.
    "gelu_pre_activation_used_downstream": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x5x", "input")}, {_arg("w", "5x4x", "param")}, {_arg("b", "5x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<5x4x{T}> {{aicfc.name = "dw"}}, tensor<5x{T}> {{aicfc.name = "db"}}) {{
  %h = graph.matmul %x, %w transpose_b : (tensor<3x4x{T}>, tensor<5x4x{T}>) -> tensor<3x5x{T}>
  %z = graph.bias_add %h, %b : (tensor<3x5x{T}>, tensor<5x{T}>) -> tensor<3x5x{T}>
  %y = graph.gelu %z : tensor<3x5x{T}>
  %s = graph.sub %y, %z : tensor<3x5x{T}>
  %r = graph.relu %s : tensor<3x5x{T}>
  %l = graph.mse_loss %r, %t : tensor<3x5x{T}> -> tensor<{T}>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<{T}>, (tensor<5x4x{T}>, tensor<5x{T}>) -> (tensor<5x4x{T}>, tensor<5x{T}>)
  func.return %l, %g#0, %g#1 : tensor<{T}>, tensor<5x4x{T}>, tensor<5x{T}>
}}
""",
    # wrt: a used param, an unused one, the loss itself, a repeat, an intermediate.
    "unused_repeated_and_intermediate_wrt": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x4x", "input")}, {_arg("w", "4x4x", "param")}, {_arg("u", "2x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "dw"}}, tensor<2x{T}> {{aicfc.name = "du"}}, tensor<{T}> {{aicfc.name = "dl"}},
        tensor<4x4x{T}> {{aicfc.name = "dw2"}}, tensor<3x4x{T}> {{aicfc.name = "dh"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %th = graph.tanh %h : tensor<3x4x{T}>
  %l = graph.mse_loss %th, %t : tensor<3x4x{T}> -> tensor<{T}>
  %g:5 = autodiff.backward %l wrt %w, %u, %l, %w, %h : tensor<{T}>, (tensor<4x4x{T}>, tensor<2x{T}>, tensor<{T}>, tensor<4x4x{T}>, tensor<3x4x{T}>) -> (tensor<4x4x{T}>, tensor<2x{T}>, tensor<{T}>, tensor<4x4x{T}>, tensor<3x4x{T}>)
  func.return %l, %g#0, %g#1, %g#2, %g#3, %g#4 : tensor<{T}>, tensor<4x4x{T}>, tensor<2x{T}>, tensor<{T}>, tensor<4x4x{T}>, tensor<3x4x{T}>
}}
""",
    # A second autodiff.backward differentiates the first one's gradient.
    "two_backwards_in_one_function": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x4x", "input")}, {_arg("w", "4x4x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "dw"}}, tensor<{T}> {{aicfc.name = "loss2"}}, tensor<4x4x{T}> {{aicfc.name = "dw2"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %th = graph.tanh %h : tensor<3x4x{T}>
  %l = graph.mse_loss %th, %t : tensor<3x4x{T}> -> tensor<{T}>
  %g = autodiff.backward %l wrt %w : tensor<{T}>, (tensor<4x4x{T}>) -> (tensor<4x4x{T}>)
  %zero = graph.constant dense<0.0> : tensor<4x4x{T}>
  %l2 = graph.mse_loss %g, %zero : tensor<4x4x{T}> -> tensor<{T}>
  %g2 = autodiff.backward %l2 wrt %w : tensor<{T}>, (tensor<4x4x{T}>) -> (tensor<4x4x{T}>)
  func.return %l, %g, %l2, %g2 : tensor<{T}>, tensor<4x4x{T}>, tensor<{T}>, tensor<4x4x{T}>
}}
""",
    # dropout (its offset advancing), softmax over the batch axis, mse.
    "dropout_softmax_mse": f"""
func.func @f({_arg("x", "3x4x", "input")}, {_arg("t", "3x4x", "input")}, {_arg("w", "4x4x", "param")}, %off: tensor<i64> {{aicfc.role = "state", aicfc.name = "rng.offset"}})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<4x4x{T}> {{aicfc.name = "dw"}}, tensor<i64> {{aicfc.name = "rng.offset"}}) {{
  %h = graph.matmul %x, %w : (tensor<3x4x{T}>, tensor<4x4x{T}>) -> tensor<3x4x{T}>
  %d = graph.dropout %h, %off p = 0.3 seed = 5 : tensor<3x4x{T}>, tensor<i64>
  %s = graph.softmax %d axis = 0 : tensor<3x4x{T}>
  %l = graph.mse_loss %s, %t : tensor<3x4x{T}> -> tensor<{T}>
  %g = autodiff.backward %l wrt %w : tensor<{T}>, (tensor<4x4x{T}>) -> (tensor<4x4x{T}>)
  %one = graph.constant dense<1> : tensor<i64>
  %o1 = graph.add %off, %one : tensor<i64>
  func.return %l, %g, %o1 : tensor<{T}>, tensor<4x4x{T}>, tensor<i64>
}}
""",
    # No ops: an input returned twice under two names, a param as its own next value and as an output.
    "arguments_returned_directly": f"""
func.func @f({_arg("x", "3x", "input")}, {_arg("w", "3x", "param")})
    -> (tensor<3x{T}> {{aicfc.name = "a"}}, tensor<3x{T}> {{aicfc.name = "b"}}, tensor<3x{T}> {{aicfc.name = "w"}}, tensor<3x{T}> {{aicfc.name = "c"}}) {{
  func.return %x, %x, %w, %w : tensor<3x{T}>, tensor<3x{T}>, tensor<3x{T}>, tensor<3x{T}>
}}
""",
    "no_ops_at_all": """
func.func @f() {
  func.return
}
""",
    # Batch 1, width 1; transpose, reshape, broadcast and reductions to a rank-0 loss.
    "one_wide_layout_chain_to_a_scalar": f"""
func.func @f({_arg("x", "1x1x", "input")}, {_arg("w", "1x3x", "param")}, {_arg("c", "3x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<1x3x{T}> {{aicfc.name = "dw"}}, tensor<3x{T}> {{aicfc.name = "dc"}}) {{
  %h = graph.matmul %x, %w : (tensor<1x1x{T}>, tensor<1x3x{T}>) -> tensor<1x3x{T}>
  %tr = graph.transpose %h perm = [1, 0] : tensor<1x3x{T}> -> tensor<3x1x{T}>
  %r = graph.reshape %tr : tensor<3x1x{T}> -> tensor<3x{T}>
  %bc = graph.broadcast_to %c : tensor<3x{T}> -> tensor<2x3x{T}>
  %br = graph.broadcast_to %r : tensor<3x{T}> -> tensor<2x3x{T}>
  %m = graph.mul %bc, %br : tensor<2x3x{T}>
  %s = graph.reduce_sum %m axes = [1] keepdims : tensor<2x3x{T}> -> tensor<2x1x{T}>
  %s2 = graph.reduce_sum %s axes = [0, 1] : tensor<2x1x{T}> -> tensor<{T}>
  %ge = graph.gelu %s2 : tensor<{T}>
  %g:2 = autodiff.backward %ge wrt %w, %c : tensor<{T}>, (tensor<1x3x{T}>, tensor<3x{T}>) -> (tensor<1x3x{T}>, tensor<3x{T}>)
  func.return %ge, %g#0, %g#1 : tensor<{T}>, tensor<1x3x{T}>, tensor<3x{T}>
}}
""",
    # Both transposes on a gelu epilogue without pre_act; the input is differentiated too.
    "transposed_gelu_epilogue": f"""
func.func @f({_arg("xt", "4x3x", "input")}, {_arg("t", "3x5x", "input")}, {_arg("w", "5x4x", "param")}, {_arg("b", "5x", "param")})
    -> (tensor<{T}> {{aicfc.name = "loss"}}, tensor<5x4x{T}> {{aicfc.name = "dw"}}, tensor<5x{T}> {{aicfc.name = "db"}}, tensor<4x3x{T}> {{aicfc.name = "dx"}}) {{
  %y = graph.gemm_epilogue %xt, %w bias %b act = gelu transpose_a transpose_b : (tensor<4x3x{T}>, tensor<5x4x{T}>, tensor<5x{T}>) -> tensor<3x5x{T}>
  %l = graph.mse_loss %y, %t : tensor<3x5x{T}> -> tensor<{T}>
  %g:3 = autodiff.backward %l wrt %w, %b, %xt : tensor<{T}>, (tensor<5x4x{T}>, tensor<5x{T}>, tensor<4x3x{T}>) -> (tensor<5x4x{T}>, tensor<5x{T}>, tensor<4x3x{T}>)
  func.return %l, %g#0, %g#1, %g#2 : tensor<{T}>, tensor<5x4x{T}>, tensor<5x{T}>, tensor<4x3x{T}>
}}
""",
}

GRADIENTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "fan_out_into_the_loss_twice": ("loss", [("w", "dw")]),
    "pre_act_used_downstream": ("loss", [("w", "dw"), ("b", "db")]),
    "gelu_pre_activation_used_downstream": ("loss", [("w", "dw"), ("b", "db")]),
    "unused_repeated_and_intermediate_wrt": ("loss", [("w", "dw"), ("u", "du"), ("w", "dw2")]),
    "two_backwards_in_one_function": ("loss2", [("w", "dw2")]),
    "dropout_softmax_mse": ("loss", [("w", "dw")]),
    "one_wide_layout_chain_to_a_scalar": ("loss", [("w", "dw"), ("c", "dc")]),
    "transposed_gelu_epilogue": ("loss", [("w", "dw"), ("b", "db"), ("xt", "dx")]),
}
"""Graph name -> (loss output, [(argument, its gradient output)]) for the finite-difference check."""
