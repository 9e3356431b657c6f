"""Optimizer updates in place: Adam (and AdamW) and SGD, with one work array per shape.

Each update is the reference's sequence of operations (runtime/reference.py
`adam_step`, `sgd_step`, PyTorch's single-tensor order), written with `out=` into
the state it updates: m and v take their new values in place, the update term is
built in one work array `s`, and the param is written last. The results are
bitwise the reference's. An L2 weight decay (Adam without `decoupled`, SGD) needs
the decayed gradient `grad + weight_decay * param` beside `s`: a second work array.

The step counter stays on the "device" (its buffer): each update reads t = step + 1
from it, computes the bias corrections as Python floats and writes t back.
"""

from __future__ import annotations

import numpy as np

from aicfc.runtime.numpy.kernels.common import (
    Arrays,
    Params,
    Scratch,
    Step,
    Unsupported,
    expect,
    is_float,
    like,
    param,
)


def _float(params: Params, key: str, default: float | None = None) -> float:
    value = params.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise Unsupported(f"parameter {key}={value!r} (expected a number)")
    return float(value)


def adam_step(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(param', m', v', step') of torch.optim.Adam (AdamW with decoupled_weight_decay)."""
    expect(ins, 5, "inputs")
    expect(outs, 4, "outputs")
    p, grad, m, v, step = ins
    p_out, m_out, v_out, step_out = outs
    is_float(p)
    for what, a in (("grad", grad), ("exp_avg", m), ("exp_avg_sq", v)):
        like(a, p, what)
    for k, a in enumerate(outs[:3]):
        like(a, p, f"result #{k}")
    if step.shape != () or step_out.shape != () or step_out.dtype != step.dtype:
        raise Unsupported(f"step counter {step.dtype}{list(step.shape)} -> {step_out.dtype}")
    lr = _float(params, "lr")
    beta1 = _float(params, "beta1", 0.9)
    beta2 = _float(params, "beta2", 0.999)
    eps = _float(params, "eps", 1e-8)
    weight_decay = _float(params, "weight_decay", 0.0)
    decoupled = bool(param(params, "decoupled_weight_decay"))
    s = scratch(p.shape, p.dtype)
    g = scratch(p.shape, p.dtype, 1) if weight_decay and not decoupled else grad
    decay = 1.0 - lr * weight_decay if weight_decay and decoupled else None

    def update() -> None:
        t = float(step) + 1.0
        if g is not grad:  # L2: g = grad + weight_decay * param
            np.multiply(p, weight_decay, out=g)
            np.add(grad, g, out=g)
        np.subtract(g, m, out=s)  # m' = m + (1 - beta1) (g - m)
        np.multiply(s, 1.0 - beta1, out=s)
        np.add(m, s, out=m_out)
        np.multiply(g, 1.0 - beta2, out=s)  # v' = beta2 v + (1 - beta2) g g
        np.multiply(s, g, out=s)
        np.multiply(v, beta2, out=v_out)
        np.add(v_out, s, out=v_out)
        np.sqrt(v_out, out=s)  # s = lr / (1 - beta1^t) * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps)
        np.divide(s, (1.0 - beta2**t) ** 0.5, out=s)
        np.add(s, eps, out=s)
        np.divide(m_out, s, out=s)
        np.multiply(s, lr / (1.0 - beta1**t), out=s)
        if decay is None:
            np.subtract(p, s, out=p_out)
        else:  # AdamW: param' = param (1 - lr weight_decay) - s
            np.multiply(p, decay, out=p_out)
            np.subtract(p_out, s, out=p_out)
        step_out.fill(t)

    return update


def sgd_step(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """param' (and momentum_buffer') of torch.optim.SGD with dampening 0."""
    expect(ins, (2, 3), "inputs")
    expect(outs, len(ins) - 1, "outputs")
    p, grad = ins[0], ins[1]
    is_float(p)
    for k, a in enumerate((*ins[1:], *outs)):
        like(a, p, f"array #{k + 1}")
    lr = _float(params, "lr")
    momentum = _float(params, "momentum", 0.0)
    weight_decay = _float(params, "weight_decay", 0.0)
    nesterov = bool(param(params, "nesterov"))
    p_out = outs[0]
    s = scratch(p.shape, p.dtype)
    if len(ins) == 2:

        def plain() -> None:  # param' = param - lr (grad + weight_decay param)
            if weight_decay:
                np.multiply(p, weight_decay, out=s)
                np.add(grad, s, out=s)
                np.multiply(s, lr, out=s)
            else:
                np.multiply(grad, lr, out=s)
            np.subtract(p, s, out=p_out)

        return plain
    buf, buf_out = ins[2], outs[1]
    g = scratch(p.shape, p.dtype, 1) if weight_decay else grad

    def with_momentum() -> None:
        if g is not grad:
            np.multiply(p, weight_decay, out=g)
            np.add(grad, g, out=g)
        np.multiply(buf, momentum, out=buf_out)  # buf' = momentum buf + g
        np.add(buf_out, g, out=buf_out)
        if nesterov:  # param' = param - lr (g + momentum buf')
            np.multiply(buf_out, momentum, out=s)
            np.add(g, s, out=s)
            np.multiply(s, lr, out=s)
        else:  # param' = param - lr buf'
            np.multiply(buf_out, lr, out=s)
        np.subtract(p, s, out=p_out)

    return with_momentum
