"""Elementwise kernels: arithmetic, activations and their gradients, epilogue_grad.

Each writes its result with NumPy's `out=` in the reference's order of operations
(runtime/reference.py), so the results are bitwise those of the reference; chains
that need an intermediate (GELU's erf term, tanh's 1 - y^2) keep it in a scratch
array. `ACTIVATIONS` applies an `act` in place or into another array; the GEMM
epilogue (gemm.py) uses it too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import erf, expit

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
    same_layout,
)

_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327

Activate = Callable[[], None]


# --- arithmetic ----------------------------------------------------------------


def _binary(ufunc: np.ufunc) -> Callable[[Arrays, Arrays, Params, Scratch], Step]:
    def kernel(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
        expect(ins, 2, "inputs")
        expect(outs, 1, "outputs")
        a, b, (y,) = ins[0], ins[1], outs
        shape = np.broadcast_shapes(a.shape, b.shape)
        same_layout(y, shape, np.result_type(a.dtype, b.dtype), "the result")

        def step() -> None:
            ufunc(a, b, out=y)

        return step

    return kernel


add = _binary(np.add)
sub = _binary(np.subtract)
mul = _binary(np.multiply)
bias_add = _binary(np.add)
"""x + bias, bias along the last dim (broadcast)."""


# --- activations -----------------------------------------------------------------


def _relu(x: np.ndarray, y: np.ndarray, scratch: Scratch) -> Activate:
    return lambda: np.maximum(x, 0, out=y)


def _gelu(x: np.ndarray, y: np.ndarray, scratch: Scratch) -> Activate:
    """y = (0.5 x) (1 + erf(x / sqrt 2)); x may be y (x is read before y is written)."""
    t = scratch(x.shape, x.dtype)

    def activate() -> None:
        np.multiply(x, _SQRT_HALF, out=t)
        erf(t, out=t)
        np.add(t, 1.0, out=t)
        np.multiply(x, 0.5, out=y)
        np.multiply(y, t, out=y)

    return activate


def _tanh(x: np.ndarray, y: np.ndarray, scratch: Scratch) -> Activate:
    return lambda: np.tanh(x, out=y)


def _silu(x: np.ndarray, y: np.ndarray, scratch: Scratch) -> Activate:
    """y = x sigmoid(x); x may be y."""
    t = scratch(x.shape, x.dtype)

    def activate() -> None:
        expit(x, out=t)
        np.multiply(x, t, out=y)

    return activate


def _identity(x: np.ndarray, y: np.ndarray, scratch: Scratch) -> Activate:
    if x is y:
        return lambda: None
    return lambda: np.copyto(y, x)


ACTIVATIONS: dict[str, Callable[[np.ndarray, np.ndarray, Scratch], Activate]] = {
    "none": _identity,
    "relu": _relu,
    "gelu": _gelu,
    "tanh": _tanh,
    "silu": _silu,
}
"""`act` -> a binder of y = act(x) (x may be y: each reads x, element by element, before it
writes y there), as reference._activate applies the activation's reference."""


def _unary(act: str) -> Callable[[Arrays, Arrays, Params, Scratch], Step]:
    def kernel(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
        expect(ins, 1, "inputs")
        expect(outs, 1, "outputs")
        is_float(ins[0])
        like(outs[0], ins[0], "the result")
        return ACTIVATIONS[act](ins[0], outs[0], scratch)

    return kernel


relu = _unary("relu")
gelu = _unary("gelu")
tanh = _unary("tanh")
silu = _unary("silu")


# --- activation gradients -----------------------------------------------------------


def _relu_grad(dy: np.ndarray, y: np.ndarray, dx: np.ndarray, scratch: Scratch) -> Activate:
    """dx = where(y > 0, dy, 0); dx may be dy.

    As bits: dx = dy & mask, with mask all ones where y > 0 and zero elsewhere (+0.0
    is all zero bits), which is exactly the reference's `where` (NaN and -0.0 in dy
    included) and several times faster than a masked copy.
    """
    bits = np.dtype(f"u{dy.dtype.itemsize}")
    positive = scratch(y.shape, np.dtype(np.bool_))
    mask = scratch(y.shape, bits)
    dy_bits, dx_bits = dy.view(bits), dx.view(bits)

    def grad() -> None:
        np.greater(y, 0, out=positive)
        np.copyto(mask, positive)  # 1 or 0 (a cast copy: no iterator buffer)
        np.negative(mask, out=mask)  # all ones or 0 (unsigned wrap-around)
        np.bitwise_and(dy_bits, mask, out=dx_bits)

    return grad


def _gelu_grad(dy: np.ndarray, x: np.ndarray, dx: np.ndarray, scratch: Scratch) -> Activate:
    """dx = dy (cdf + x pdf), cdf = 0.5 (1 + erf(x / sqrt 2)), pdf = exp(-x^2 / 2) / sqrt(2 pi)."""
    cdf = scratch(x.shape, x.dtype, 0)
    pdf = scratch(x.shape, x.dtype, 1)

    def grad() -> None:
        np.multiply(x, _SQRT_HALF, out=cdf)
        erf(cdf, out=cdf)
        np.add(cdf, 1.0, out=cdf)
        np.multiply(cdf, 0.5, out=cdf)
        np.multiply(x, -0.5, out=pdf)
        np.multiply(pdf, x, out=pdf)
        np.exp(pdf, out=pdf)
        np.multiply(pdf, _INV_SQRT_2PI, out=pdf)
        np.multiply(pdf, x, out=pdf)
        np.add(cdf, pdf, out=cdf)
        np.multiply(dy, cdf, out=dx)

    return grad


def _tanh_grad(dy: np.ndarray, y: np.ndarray, dx: np.ndarray, scratch: Scratch) -> Activate:
    """dx = dy (1 - y^2); dx may be dy."""
    t = scratch(y.shape, y.dtype)

    def grad() -> None:
        np.multiply(y, y, out=t)
        np.subtract(1, t, out=t)
        np.multiply(dy, t, out=dx)

    return grad


def _silu_grad(dy: np.ndarray, x: np.ndarray, dx: np.ndarray, scratch: Scratch) -> Activate:
    """dx = dy (s (1 + x (1 - s))), s = sigmoid(x); dx may be dy."""
    s = scratch(x.shape, x.dtype, 0)
    u = scratch(x.shape, x.dtype, 1)

    def grad() -> None:
        expit(x, out=s)
        np.subtract(1, s, out=u)
        np.multiply(x, u, out=u)
        np.add(1, u, out=u)
        np.multiply(s, u, out=u)
        np.multiply(dy, u, out=dx)

    return grad


ACTIVATION_GRADS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray, Scratch], Activate]] = {
    "relu": _relu_grad,
    "gelu": _gelu_grad,
    "tanh": _tanh_grad,
    "silu": _silu_grad,
}
"""`act` -> a binder of dx = dy * act'(saved) (saved: what the activation table says its
gradient reads, y for relu and tanh, x for gelu and silu)."""


def _activation_grad(act: str) -> Callable[[Arrays, Arrays, Params, Scratch], Step]:
    def kernel(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
        expect(ins, 2, "inputs")
        expect(outs, 1, "outputs")
        dy, saved, (dx,) = ins[0], ins[1], outs
        is_float(dy)
        like(saved, dy, "the saved forward value")
        like(dx, dy, "the result")
        return ACTIVATION_GRADS[act](dy, saved, dx, scratch)

    return kernel


relu_grad = _activation_grad("relu")
gelu_grad = _activation_grad("gelu")
tanh_grad = _activation_grad("tanh")
silu_grad = _activation_grad("silu")


def epilogue_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(dZ, dbias) = (dY * act'(saved), the sums of dZ over every leading axis) for dY
    [..., N]."""
    expect(ins, 2, "inputs")
    expect(outs, 2, "outputs")
    dy, saved = ins
    dz, dbias = outs
    act = str(param(params, "act"))
    if act not in ACTIVATION_GRADS or dy.ndim < 1:
        raise Unsupported(f"act={act!r} on a rank-{dy.ndim} gradient")
    is_float(dy)
    like(saved, dy, "the saved forward value")
    like(dz, dy, "the pre-activation gradient")
    same_layout(dbias, dy.shape[-1:], dy.dtype, "the bias gradient")
    grad = ACTIVATION_GRADS[act](dy, saved, dz, scratch)
    rows = tuple(range(dy.ndim - 1))  # the reference's axes, so its order of additions

    def step() -> None:
        grad()
        np.add.reduce(dz, axis=rows, out=dbias)  # np.sum without its Python wrapper

    return step
