"""Optimizer updates in place: Adam (and AdamW) and SGD, with work arrays per shape.

Each update is the reference's sequence of operations (runtime/reference.py
`adam_step`, `sgd_step`, PyTorch's single-tensor order), written with `out=` into
the state it updates: m and v take their new values in place, the update term is
built in one work array `s`, and the param is written last. The results are
bitwise the reference's. The gradient scaled by grad_scale (not 1: clipping) or
decayed by an L2 weight decay (`grad + weight_decay * param`: Adam without
`decoupled`, SGD) is built in a second work array beside `s`.

Every hyperparameter is an operand (an f64 state of the train step, or the lr that
the schedule computed), as are the gradient scale and the apply flag (f32): each step
reads them from their buffers, so a change through `Program.param_groups` or a
schedule takes effect at the next step without a reload. With apply = 0 (a
micro-batch that does not end an accumulation window) the update copies its inputs
through unchanged. The step counter stays on the "device" (its buffer): each update
reads t = step + 1 from it, computes the bias corrections as Python floats and writes
t back.
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


def _scalars(what: str, arrays: Arrays) -> None:
    """Unsupported unless each array is a one-element float (a hyperparameter buffer)."""
    for k, a in enumerate(arrays):
        if a.size != 1 or a.dtype.kind != "f":
            raise Unsupported(f"{what} #{k} is {a.dtype}{list(a.shape)}, expected a float scalar")


def _copy_through(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """apply = 0: each output takes its input's value (nothing to do where it is the input)."""
    for src, dst in pairs:
        if dst is not src:
            np.copyto(dst, src)


def _gradient(
    grad: np.ndarray, p: np.ndarray, scale: float, wd: float, work: np.ndarray, tmp: np.ndarray
) -> np.ndarray:
    """The reference's gradient: grad * grad_scale (where the scale is not 1), then
    + weight_decay * param (an L2 decay, where wd is not 0); in `work` unless it is grad."""
    g = grad
    if scale != 1.0:
        np.multiply(grad, scale, out=work)
        g = work
    if wd:
        np.multiply(p, wd, out=tmp)
        np.add(g, tmp, out=work)
        g = work
    return g


def adam_step(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(param', m', v', step'[, low_copy']) of torch.optim.Adam (AdamW with
    decoupled_weight_decay) from (param, grad, m, v, step, lr, beta1, beta2, eps,
    weight_decay, grad_scale, apply[, low_copy]); low_copy' is param' rounded to the copy's
    dtype (bf16/f16, round to nearest even: the reference's astype)."""
    expect(ins, (12, 13), "inputs")
    expect(outs, len(ins) - 8, "outputs")
    p, grad, m, v, step = ins[:5]
    lr, beta1, beta2, eps, weight_decay, grad_scale, apply = ins[5:12]
    p_out, m_out, v_out, step_out = outs[:4]
    low, low_out = (ins[12], outs[4]) if len(ins) == 13 else (None, None)
    is_float(p)
    for what, a in (("grad", grad), ("exp_avg", m), ("exp_avg_sq", v)):
        like(a, p, what)
    for k, a in enumerate(outs[:3]):
        like(a, p, f"result #{k}")
    if step.shape != () or step_out.shape != () or step_out.dtype != step.dtype:
        raise Unsupported(f"step counter {step.dtype}{list(step.shape)} -> {step_out.dtype}")
    _scalars("operand", ins[5:12])
    if (
        low is not None
        and low_out is not None
        and (low.shape != p.shape or low_out.shape != p.shape or low_out.dtype != low.dtype)
    ):
        raise Unsupported(
            f"low copy {low.dtype}{list(low.shape)} -> {low_out.dtype}{list(low_out.shape)} "
            f"of a param {p.dtype}{list(p.shape)}"
        )
    decoupled = bool(param(params, "decoupled_weight_decay"))
    s = scratch(p.shape, p.dtype)
    work = scratch(p.shape, p.dtype, 1)
    unchanged = [(p, p_out), (m, m_out), (v, v_out), (step, step_out)]
    if low is not None and low_out is not None:
        unchanged.append((low, low_out))

    def update() -> None:
        if float(apply) == 0.0:
            _copy_through(unchanged)
            return
        lr_, b1, b2 = float(lr), float(beta1), float(beta2)
        eps_, wd = float(eps), float(weight_decay)
        t = float(step) + 1.0
        g = _gradient(grad, p, float(grad_scale), 0.0 if decoupled else wd, work, s)
        np.subtract(g, m, out=s)  # m' = m + (1 - beta1) (g - m)
        np.multiply(s, 1.0 - b1, out=s)
        np.add(m, s, out=m_out)
        np.multiply(g, 1.0 - b2, out=s)  # v' = beta2 v + (1 - beta2) g g
        np.multiply(s, g, out=s)
        np.multiply(v, b2, out=v_out)
        np.add(v_out, s, out=v_out)
        np.sqrt(v_out, out=s)  # s = lr / (1 - beta1^t) * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps)
        np.divide(s, (1.0 - b2**t) ** 0.5, out=s)
        np.add(s, eps_, out=s)
        np.divide(m_out, s, out=s)
        np.multiply(s, lr_ / (1.0 - b1**t), out=s)
        if wd and decoupled:  # AdamW: param' = param (1 - lr weight_decay) - s
            np.multiply(p, 1.0 - lr_ * wd, out=p_out)
            np.subtract(p_out, s, out=p_out)
        else:
            np.subtract(p, s, out=p_out)
        step_out.fill(t)
        if low_out is not None:
            with np.errstate(over="ignore"):  # f16 past 65504 is inf, as graph.cast's
                np.copyto(low_out, p_out, casting="unsafe")

    return update


def sgd_step(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """param' (and momentum_buffer') of torch.optim.SGD with dampening 0 from (param, grad,
    lr, momentum, weight_decay, grad_scale, apply[, momentum_buffer])."""
    expect(ins, (7, 8), "inputs")
    expect(outs, len(ins) - 6, "outputs")
    p, grad = ins[0], ins[1]
    lr, momentum, weight_decay, grad_scale, apply = ins[2:7]
    is_float(p)
    for k, a in enumerate((grad, *ins[7:], *outs)):
        like(a, p, f"array #{k + 1}")
    _scalars("operand", ins[2:7])
    nesterov = bool(param(params, "nesterov"))
    p_out = outs[0]
    s = scratch(p.shape, p.dtype)
    work = scratch(p.shape, p.dtype, 1)
    if len(ins) == 7:

        def plain() -> None:  # param' = param - lr (grad grad_scale + weight_decay param)
            if float(apply) == 0.0:
                _copy_through([(p, p_out)])
                return
            g = _gradient(grad, p, float(grad_scale), float(weight_decay), work, s)
            np.multiply(g, float(lr), out=s)
            np.subtract(p, s, out=p_out)

        return plain
    buf, buf_out = ins[7], outs[1]

    def with_momentum() -> None:
        if float(apply) == 0.0:
            _copy_through([(p, p_out), (buf, buf_out)])
            return
        lr_, mu = float(lr), float(momentum)
        g = _gradient(grad, p, float(grad_scale), float(weight_decay), work, s)
        np.multiply(buf, mu, out=buf_out)  # buf' = momentum buf + g
        np.add(buf_out, g, out=buf_out)
        if nesterov:  # param' = param - lr (g + momentum buf')
            np.multiply(buf_out, mu, out=s)
            np.add(g, s, out=s)
            np.multiply(s, lr_, out=s)
        else:  # param' = param - lr buf'
            np.multiply(buf_out, lr_, out=s)
        np.subtract(p, s, out=p_out)

    return with_momentum
