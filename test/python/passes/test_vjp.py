"""aicfc-expand-backward against torch.autograd: 2-layer MLP train steps in float32.

Each train step is written in our dialects (the way a user writes it), expanded
by the pass, run on the NumPy reference (runtime/interpreter.py) with random
data, and compared with the same network in PyTorch (CPU, float32):

    max |ours - torch| <= TOL * max |torch|,   TOL = 1e-5

for the loss, every parameter gradient and (Adam) every updated parameter and
moment. Measured errors are about 1e-7 (float32 rounding of different
summation orders).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from xdsl.context import Context

from aicfc.dialects.autodiff import BackwardOp
from aicfc.ir import parse_module
from aicfc.passes.aicfc_expand_backward import AicfcExpandBackwardPass
from aicfc.runtime.interpreter import find_func, run_func
from aicfc.runtime.reference import dropout_keep

TOL = 1e-5
B, D, H, C = 32, 20, 64, 10
LR = 1e-3

# Types, named for the templates below.
X, W1, B1, W2, B2 = (
    f"tensor<{B}x{D}xf32>", f"tensor<{H}x{D}xf32>", f"tensor<{H}xf32>",
    f"tensor<{C}x{H}xf32>", f"tensor<{C}xf32>",
)  # fmt: skip
HID, OUT, S = f"tensor<{B}x{H}xf32>", f"tensor<{B}x{C}xf32>", "tensor<f32>"
WRT = f"{W1}, {B1}, {W2}, {B2}"

# Linear layers in PyTorch's layout (weight [out, in], y = x w^T + b), ReLU, cross-entropy,
# then Adam on all four parameters: the shape of a train step aicfc compiles.
HYPER = "lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one)"
HYPER_TYPES = "tensor<f64>, tensor<f32>, tensor<f32>"
UNFUSED_ADAM = f"""
func.func @train_step(%x: {X}, %y: tensor<{B}xi64>, %w1: {W1}, %b1: {B1}, %w2: {W2}, %b2: {B2},
    %m1: {W1}, %v1: {W1}, %s1: {S}, %m2: {B1}, %v2: {B1}, %s2: {S},
    %m3: {W2}, %v3: {W2}, %s3: {S}, %m4: {B2}, %v4: {B2}, %s4: {S})
    -> ({S}, {WRT}, {WRT}, {W1}, {W1}) {{
  %h0 = graph.matmul %x, %w1 transpose_b : ({X}, {W1}) -> {HID}
  %h1 = graph.bias_add %h0, %b1 : ({HID}, {B1}) -> {HID}
  %h = graph.relu %h1 : {HID}
  %o0 = graph.matmul %h, %w2 transpose_b : ({HID}, {W2}) -> {OUT}
  %o = graph.bias_add %o0, %b2 : ({OUT}, {B2}) -> {OUT}
  %loss = graph.cross_entropy %o, %y : ({OUT}, tensor<{B}xi64>) -> {S}
  %g:4 = autodiff.backward %loss wrt %w1, %b1, %w2, %b2 : {S}, ({WRT}) -> ({WRT})
  %lr = graph.constant dense<{LR:e}> : tensor<f64>
  %beta1 = graph.constant dense<0.9> : tensor<f64>
  %beta2 = graph.constant dense<0.999> : tensor<f64>
  %eps = graph.constant dense<1.0e-8> : tensor<f64>
  %wd = graph.constant dense<0.0> : tensor<f64>
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g#0, %m1, %v1, %s1 {HYPER}
      : {W1}, {S}, {HYPER_TYPES}
  %b1n, %m2n, %v2n, %s2n = autodiff.adam_step %b1, %g#1, %m2, %v2, %s2 {HYPER}
      : {B1}, {S}, {HYPER_TYPES}
  %w2n, %m3n, %v3n, %s3n = autodiff.adam_step %w2, %g#2, %m3, %v3, %s3 {HYPER}
      : {W2}, {S}, {HYPER_TYPES}
  %b2n, %m4n, %v4n, %s4n = autodiff.adam_step %b2, %g#3, %m4, %v4, %s4 {HYPER}
      : {B2}, {S}, {HYPER_TYPES}
  func.return %loss, %g#0, %g#1, %g#2, %g#3, %w1n, %b1n, %w2n, %b2n, %m1n, %v1n
      : {S}, {WRT}, {WRT}, {W1}, {W1}
}}
"""

# The fused form aicfc-fuse produces: gemm_epilogue gelu keeping pre_act, dropout, a
# second gemm_epilogue without activation, and an MSE loss. The gradient also flows
# into the input x (wrt an input, as for adversarial examples).
FUSED_GELU_DROPOUT = f"""
func.func @grads(%x: {X}, %t: {OUT}, %off: tensor<i64>, %w1: {W1}, %b1: {B1}, %w2: {W2},
    %b2: {B2}) -> ({S}, {X}, {WRT}) {{
  %h, %z = graph.gemm_epilogue %x, %w1 bias %b1 act = gelu transpose_b
      : ({X}, {W1}, {B1}) -> ({HID}, {HID})
  %hd = graph.dropout %h, %off p = 2.500000e-01 seed = 42 : {HID}, tensor<i64>
  %o = graph.gemm_epilogue %hd, %w2 bias %b2 transpose_b : ({HID}, {W2}, {B2}) -> {OUT}
  %loss = graph.mse_loss %o, %t : {OUT} -> {S}
  %g:5 = autodiff.backward %loss wrt %x, %w1, %b1, %w2, %b2 : {S}, ({X}, {WRT}) -> ({X}, {WRT})
  func.return %loss, %g#0, %g#1, %g#2, %g#3, %g#4 : {S}, {X}, {WRT}
}}
"""


def expanded(text: str, name: str):  # type: ignore[no-untyped-def]
    module = parse_module(text, f"{name}.mlir")
    AicfcExpandBackwardPass().apply(Context(), module)
    module.verify()
    assert not any(isinstance(op, BackwardOp) for op in module.walk())
    return find_func(module, name)


def torch_mlp(seed: int) -> tuple[torch.nn.Linear, torch.nn.Linear]:
    torch.manual_seed(seed)
    return torch.nn.Linear(D, H), torch.nn.Linear(H, C)


def params(l1: torch.nn.Linear, l2: torch.nn.Linear) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in (l1.weight, l1.bias, l2.weight, l2.bias)]


def assert_close(ours: np.ndarray, ref: torch.Tensor | np.ndarray, what: str) -> None:
    ref_np = ref.detach().numpy() if isinstance(ref, torch.Tensor) else ref
    assert ours.shape == ref_np.shape, what
    assert ours.dtype == np.float32, what
    scale = float(np.max(np.abs(ref_np)))
    err = float(np.max(np.abs(ours - ref_np)))
    assert scale > 0, f"{what}: the reference is all zeros"
    assert err <= TOL * scale, f"{what}: max error {err:.3e} > {TOL} * {scale:.3e}"


@pytest.mark.parametrize("seed", [0, 1])
def test_mlp_train_step_matches_torch_autograd_and_adam(seed: int) -> None:
    fn = expanded(UNFUSED_ADAM, "train_step")
    rng = np.random.default_rng(seed)
    l1, l2 = torch_mlp(seed)
    x = rng.standard_normal((B, D)).astype(np.float32)
    y = rng.integers(0, C, size=B).astype(np.int64)
    ps = params(l1, l2)
    state: list[np.ndarray] = []
    for p in ps:
        state += [np.zeros_like(p), np.zeros_like(p), np.zeros((), np.float32)]
    out = run_func(fn, [x, y, *ps, *state])

    loss = torch.nn.functional.cross_entropy(
        l2(torch.relu(l1(torch.from_numpy(x)))), torch.from_numpy(y)
    )
    loss.backward()
    torch_params = [l1.weight, l1.bias, l2.weight, l2.bias]
    assert_close(out[0], loss, "loss")
    for k, (name, p) in enumerate(zip(("w1", "b1", "w2", "b2"), torch_params, strict=True)):
        assert p.grad is not None
        assert_close(out[1 + k], p.grad, f"d{name}")
    opt = torch.optim.Adam(torch_params, lr=LR)
    opt.step()
    for k, (name, p) in enumerate(zip(("w1", "b1", "w2", "b2"), torch_params, strict=True)):
        assert_close(out[5 + k], p, f"{name} after one Adam step")
    st = opt.state[l1.weight]
    assert_close(out[9], st["exp_avg"], "w1.exp_avg")
    assert_close(out[10], st["exp_avg_sq"], "w1.exp_avg_sq")


def test_fused_gelu_dropout_mse_matches_torch_autograd() -> None:
    fn = expanded(FUSED_GELU_DROPOUT, "grads")
    rng = np.random.default_rng(5)
    l1, l2 = torch_mlp(5)
    x = rng.standard_normal((B, D)).astype(np.float32)
    t = rng.standard_normal((B, C)).astype(np.float32)
    off = np.asarray(17, dtype=np.int64)
    out = run_func(fn, [x, t, off, *params(l1, l2)])

    # The mask is data shared with the reference (Philox keyed by seed, counter by offset).
    keep = torch.from_numpy(dropout_keep(B * H, 17, 0.25, 42).reshape(B, H))
    xt = torch.from_numpy(x).requires_grad_(True)
    h = torch.nn.functional.gelu(l1(xt))  # exact erf form, as graph.gelu
    hd = torch.where(keep, h / (1 - 0.25), torch.zeros_like(h))
    loss = torch.nn.functional.mse_loss(l2(hd), torch.from_numpy(t))
    loss.backward()
    assert 0 < int(keep.sum()) < B * H, "the mask should drop some elements and keep some"
    assert_close(out[0], loss, "loss")
    assert xt.grad is not None
    assert_close(out[1], xt.grad, "dx")
    refs = [l1.weight.grad, l1.bias.grad, l2.weight.grad, l2.bias.grad]
    for k, (name, ref) in enumerate(zip(("w1", "b1", "w2", "b2"), refs, strict=True)):
        assert ref is not None
        assert_close(out[2 + k], ref, f"d{name}")
