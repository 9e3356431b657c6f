"""Matrix products: matmul, the GEMM epilogue and gemm_epilogue_grad, written into their
planned destination.

`np.matmul(a, b, out=y)` hands BLAS (sgemm/dgemm) the destination buffer itself;
a transposed operand is a view (`a.T`, or the last two axes swapped for a batch of
matrices), which BLAS reads as a transposed matrix, never a copy. Batched operands
([..., M, K] @ [..., K, N], batch dims broadcast, as a GPT's [B, T, D] activations
times a [D, N] weight) go through the same `np.matmul` call as the reference's, one
BLAS product per matrix of the batch in NumPy's order, so they are bitwise the
reference's too (flattening [B, T, D] to [B T, D] would be one BLAS call, but not
necessarily the same bits). The epilogue then adds the bias and applies the activation in place
on that buffer, in the reference's order (product, + bias, act), so the results
are bitwise the reference's.
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
    param,
    same_layout,
)
from aicfc.runtime.numpy.kernels.elementwise import ACTIVATION_GRADS, ACTIVATIONS


def operands(ins: Arrays, params: Params) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """op(A) [..., M, K] and op(B) [..., K, N] as views (transpose_a/transpose_b: the last
    two axes swapped) and the product's shape [..., M, N] (batch dims broadcast)."""
    a, b = ins[0], ins[1]
    if a.ndim < 2 or b.ndim < 2:
        raise Unsupported(f"operands of rank {a.ndim} and {b.ndim} (the kernel takes matrices)")
    if a.dtype != b.dtype:
        raise Unsupported(f"operands of dtypes {a.dtype} and {b.dtype}")
    is_float(a)
    a = np.swapaxes(a, -1, -2) if param(params, "transpose_a") else a
    b = np.swapaxes(b, -1, -2) if param(params, "transpose_b") else b
    if a.shape[-1] != b.shape[-2]:
        raise Unsupported(f"op(A) {list(a.shape)} and op(B) {list(b.shape)} do not chain")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise Unsupported(f"batch dims of {list(a.shape)} and {list(b.shape)}") from None
    return a, b, (*batch, a.shape[-2], b.shape[-1])


def matmul(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """Y = op(A) op(B) over the last two dims (batch dims broadcast)."""
    expect(ins, 2, "inputs")
    expect(outs, 1, "outputs")
    a, b, shape = operands(ins, params)
    (y,) = outs
    same_layout(y, shape, a.dtype, "the product")

    def step() -> None:
        np.matmul(a, b, out=y)

    return step


def gemm_epilogue(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """Z = op(A) op(B) + bias, Y = act(Z) for A [..., M, K], bias [N]; outputs (Y) or (Y, Z)."""
    expect(ins, (2, 3), "inputs")
    expect(outs, (1, 2), "outputs")
    a, b, shape = operands(ins, params)
    bias = ins[2] if len(ins) == 3 else None
    if bias is not None:
        same_layout(bias, shape[-1:], a.dtype, "the bias")
    for k, out in enumerate(outs):
        same_layout(out, shape, a.dtype, f"result #{k}")
    act = str(param(params, "act"))
    if act not in ACTIVATIONS:
        raise Unsupported(f"act={act!r}")
    y = outs[0]
    z = outs[1] if len(outs) == 2 else y  # without a Z output, Y is activated in place
    activate = ACTIVATIONS[act](z, y, scratch)
    if bias is None:

        def product() -> None:
            np.matmul(a, b, out=z)
            activate()

        return product

    def product_bias() -> None:
        np.matmul(a, b, out=z)
        np.add(z, bias, out=z)
        activate()

    return product_bias


def gemm_epilogue_grad(ins: Arrays, outs: Arrays, params: Params, scratch: Scratch) -> Step:
    """(dZ, dbias) = epilogue_grad(op(A) op(B), saved): the product into dZ, then the
    activation gradient in place (each reads dY before writing dZ there) and the column
    sums, as epilogue_grad computes them."""
    expect(ins, 3, "inputs")
    expect(outs, 2, "outputs")
    a, b, shape = operands(ins[:2], params)
    if len(shape) != 2:  # the fusion forms it on matrices only
        raise Unsupported(f"a product of shape {list(shape)} (the kernel takes matrices)")
    saved = ins[2]
    dz, dbias = outs
    same_layout(saved, shape, a.dtype, "the saved forward value")
    same_layout(dz, shape, a.dtype, "the pre-activation gradient")
    same_layout(dbias, shape[1:], a.dtype, "the bias gradient")
    act = str(param(params, "act"))
    if act not in ACTIVATION_GRADS:
        raise Unsupported(f"act={act!r}")
    grad = ACTIVATION_GRADS[act](dz, saved, dz, scratch)

    def step() -> None:
        np.matmul(a, b, out=dz)
        grad()
        np.add.reduce(dz, axis=0, out=dbias)

    return step
