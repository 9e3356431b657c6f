"""The finite-difference harness of the VJP gradient checks (float64).

For each case a small f64 function is built: loss = sum_k sum(out_k * R_k) with
fixed random R_k (or the op's own scalar loss), followed by
`autodiff.backward %loss wrt ...`. The pass expands it, runtime/interpreter.py
runs the result on the NumPy reference, and each gradient is compared with
central differences of the same function's loss (step h = 1e-6):

    ||grad - fd||_2 <= RTOL * ||fd||_2 + ATOL,   RTOL = 1e-6, ATOL = 1e-8

(the differences' own error is about eps * |loss| / h ~ 1e-10 per element).
ReLU-family inputs are kept at least 0.05 away from the kink. Used by
passes/test_gradcheck.py and passes/test_gradcheck_transformer.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float64Type, IntegerType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.passes.aicfc_expand_backward import AicfcExpandBackwardPass
from aicfc.passes.aicfc_fuse import AicfcFusePass
from aicfc.runtime.interpreter import run_func

RTOL, ATOL, STEP = 1e-6, 1e-8, 1e-6
f64 = Float64Type()


def _type(a: np.ndarray) -> TensorType[Attribute]:
    el: Attribute = f64 if a.dtype == np.float64 else IntegerType(a.dtype.itemsize * 8)
    return TensorType(el, list(a.shape))


class Emit:
    """Inserts ops at the end of the function being built; `e(op)` is its first result."""

    def __init__(self, block: Block):
        self.builder = Builder(InsertPoint.at_end(block))

    def __call__(self, op: Operation) -> SSAValue:
        return self.builder.insert(op).results[0]

    def all(self, op: Operation) -> tuple[SSAValue, ...]:
        return tuple(self.builder.insert(op).results)


Forward = Callable[[Emit, Sequence[SSAValue]], Sequence[SSAValue]]


@dataclass
class Case:
    """inputs: function arguments; forward: the ops under test; wrt: indices of inputs.

    scalar_loss: forward returns the loss itself (else loss = sum_k sum(out_k * R_k)).
    seed: an explicit backward seed (a scalar), passed as an extra argument.
    """

    inputs: list[np.ndarray]
    forward: Forward
    wrt: list[int]
    scalar_loss: bool = False
    seed: float | None = None
    weights: list[np.ndarray] = field(default_factory=list)


def build(case: Case, rng: np.random.Generator) -> ModuleOp:
    """The function (inputs..., R..., [seed]) -> (loss, grads...) before the pass."""
    # Probe the output shapes with a throwaway build, then draw R of those shapes.
    probe = Block(arg_types=[_type(a) for a in case.inputs])
    outs = case.forward(Emit(probe), probe.args)
    if not case.scalar_loss:
        case.weights = [rng.standard_normal(tuple(o.type.get_shape())) for o in outs]  # type: ignore[attr-defined]
    extra = list(case.weights) + ([np.asarray(case.seed)] if case.seed is not None else [])
    block = Block(arg_types=[_type(a) for a in case.inputs + extra])
    e = Emit(block)
    args = block.args
    outs = case.forward(e, args[: len(case.inputs)])
    if case.scalar_loss:
        (loss,) = outs
    else:
        terms = []
        for o, r in zip(outs, args[len(case.inputs) : len(case.inputs) + len(outs)], strict=True):
            prod = e(g.MulOp(o, r))
            terms.append(e(g.ReduceSumOp(prod, list(range(len(prod.type.get_shape()))))))  # type: ignore[attr-defined]
        loss = terms[0]
        for t in terms[1:]:
            loss = e(g.AddOp(loss, t))
    seed = args[-1] if case.seed is not None else None
    grads = e.all(ad.BackwardOp(loss, [args[i] for i in case.wrt], seed))
    e.builder.insert(func.ReturnOp(loss, *grads))
    fn = func.FuncOp(
        "f", ([a.type for a in args], [loss.type, *(x.type for x in grads)]), Region(block)
    )
    return ModuleOp([fn])


def expand(module: ModuleOp) -> func.FuncOp:
    AicfcExpandBackwardPass().apply(Context(), module)
    module.verify()
    assert not any(isinstance(op, ad.BackwardOp) for op in module.walk())
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    return fn


def gradcheck(case: Case, seed: int = 0, fuse: bool = False) -> None:
    """Expand (and with `fuse`, then run aicfc-fuse on the result) and compare every
    gradient with central differences of the loss."""
    rng = np.random.default_rng(seed)
    fn = expand(build(case, rng))
    if fuse:
        module = fn.parent_op()
        assert isinstance(module, ModuleOp)
        AicfcFusePass().apply(Context(), module)
        module.verify()
    compare_with_differences(case, fn)


def compare_with_differences(case: Case, fn: func.FuncOp) -> None:
    """Run the expanded `fn` of `case` and compare each gradient with central differences
    of its loss (the tolerance of the module docstring)."""
    extra = list(case.weights) + ([np.asarray(case.seed)] if case.seed is not None else [])
    args = [np.array(a) for a in case.inputs + extra]
    out = run_func(fn, args)
    grads = out[1:]
    for k, i in enumerate(case.wrt):
        x = args[i]
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            orig = x[idx]
            x[idx] = orig + STEP
            up = float(run_func(fn, args)[0])
            x[idx] = orig - STEP
            down = float(run_func(fn, args)[0])
            x[idx] = orig
            fd[idx] = (up - down) / (2 * STEP)
        if case.seed is not None:
            fd = fd * case.seed
        err = np.linalg.norm(grads[k] - fd)
        assert grads[k].shape == x.shape
        assert err <= RTOL * np.linalg.norm(fd) + ATOL, (
            f"wrt input #{i}: |grad - fd| = {err:.3e}, |fd| = {np.linalg.norm(fd):.3e}\n"
            f"grad = {grads[k]}\nfd = {fd}"
        )


def normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def away(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values with |x| in [0.05, 1.5]: far from relu's kink for a 1e-6 step."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.05, 1.5, size=shape)


def offset(v: int = 3) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)
