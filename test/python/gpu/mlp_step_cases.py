"""Operands of autodiff.mlp_train_step for the kernel tests, and its NumPy reference over
several steps (shared by the emulated and the GPU tests of kernels/mlp_fused.cu)."""

from __future__ import annotations

import itertools

import numpy as np

from aicfc.runtime import reference

HEAD = 10
"""x, labels, dloss, lr, beta1, beta2, eps, weight_decay, grad_scale, apply."""


def operands(
    rng: np.random.Generator,
    batch: int,
    widths: tuple[int, ...],
    weight_decay: float = 0.0,
    grad_scale: float = 1.0,
    apply: float = 1.0,
    step: float = 0.0,
) -> list[np.ndarray]:
    """Fresh random operands (every layer with a bias; states as after a few steps)."""
    f32, f64 = (lambda v: np.asarray(v, np.float32)), (lambda v: np.asarray(v, np.float64))
    x = rng.standard_normal((batch, widths[0])).astype(np.float32)
    y = rng.integers(0, widths[-1], batch).astype(np.int32)
    ops = [x, y, f32(1.0), f64(3e-3), f64(0.9), f64(0.99), f64(1e-8), f64(weight_decay)]
    ops += [f32(grad_scale), f32(apply)]
    for a, b in itertools.pairwise(widths):
        for shape in ((b, a), (b,)):
            p = (rng.uniform(-1.0, 1.0, shape) / np.sqrt(a)).astype(np.float32)
            m = (1e-2 * rng.standard_normal(shape)).astype(np.float32)
            v = (1e-4 * rng.random(shape)).astype(np.float32)
            ops += [p, m, v, f32(step)]
    return ops


def reference_steps(ops: list[np.ndarray], params: dict, steps: int) -> list[np.ndarray]:
    """[loss of the last step, the params' and states' values after `steps` steps]."""
    ops = list(ops)
    out: tuple[np.ndarray, ...] = ()
    for _ in range(steps):
        out = reference.mlp_train_step(*ops, **params)
        ops[HEAD:] = [np.asarray(a) for a in out[1:]]
    return [np.asarray(a) for a in out]
