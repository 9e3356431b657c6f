"""Every VJP rule of aicfc-expand-backward against central finite differences, in float64.

The harness (gradcheck_support.py): for each case a small f64 function is built,
loss = sum_k sum(out_k * R_k) with fixed random R_k (or the op's own scalar loss),
followed by `autodiff.backward %loss wrt ...`; the pass expands it, the interpreter runs
it on the NumPy reference, and each gradient is compared with central differences of
the loss (||grad - fd|| <= 1e-6 ||fd|| + 1e-8, step 1e-6). ReLU-family inputs are kept
at least 0.05 away from the kink.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.diagnostics import OpError
from aicfc.dialects.graph import Activation
from aicfc.passes.aicfc_fuse import AicfcFusePass
from aicfc.runtime.reference import gemm_epilogue
from gradcheck_support import Case, Emit, Forward, away, build, expand, gradcheck, normal, offset

# ----------------------------------------------------------------------------
# graph ops
# ----------------------------------------------------------------------------

R = np.random.default_rng(1234)
"""Draws the inputs of the case tables below, once, at import (tests draw their own)."""


def unary(op: type[Operation], x: np.ndarray) -> Case:
    return Case([x], lambda e, a: [e(op(a[0]))], [0])


GRAPH_CASES: dict[str, Case] = {
    "bias_add_2d": Case(
        [normal(R, 3, 5), normal(R, 5)], lambda e, a: [e(g.BiasAddOp(a[0], a[1]))], [0, 1]
    ),
    "bias_add_3d": Case(
        [normal(R, 2, 3, 4), normal(R, 4)], lambda e, a: [e(g.BiasAddOp(a[0], a[1]))], [0, 1]
    ),
    "add": Case([normal(R, 3, 4), normal(R, 3, 4)], lambda e, a: [e(g.AddOp(a[0], a[1]))], [0, 1]),
    "sub": Case([normal(R, 3, 4), normal(R, 3, 4)], lambda e, a: [e(g.SubOp(a[0], a[1]))], [0, 1]),
    "mul": Case([normal(R, 3, 4), normal(R, 3, 4)], lambda e, a: [e(g.MulOp(a[0], a[1]))], [0, 1]),
    "mul_same_operand": Case([normal(R, 6)], lambda e, a: [e(g.MulOp(a[0], a[0]))], [0]),
    "relu": unary(g.ReluOp, away(R, 3, 4)),
    "gelu": unary(g.GeluOp, normal(R, 3, 4)),
    "tanh": unary(g.TanhOp, normal(R, 3, 4)),
    "dropout": Case(
        [normal(R, 4, 6), offset()],
        lambda e, a: [e(g.DropoutOp(a[0], a[1], 0.3, 7))],
        [0],
    ),
    "reshape": Case([normal(R, 2, 6)], lambda e, a: [e(g.ReshapeOp(a[0], [3, 2, 2]))], [0]),
    "transpose_2d": Case([normal(R, 3, 4)], lambda e, a: [e(g.TransposeOp(a[0], [1, 0]))], [0]),
    "transpose_3d": Case(
        [normal(R, 2, 3, 4)], lambda e, a: [e(g.TransposeOp(a[0], [2, 0, 1]))], [0]
    ),
    "broadcast_to_lead": Case(
        [normal(R, 3)], lambda e, a: [e(g.BroadcastToOp(a[0], [2, 4, 3]))], [0]
    ),
    "broadcast_to_unit": Case(
        [normal(R, 4, 1)], lambda e, a: [e(g.BroadcastToOp(a[0], [4, 3]))], [0]
    ),
    "broadcast_to_both": Case(
        [normal(R, 1, 3)], lambda e, a: [e(g.BroadcastToOp(a[0], [2, 4, 3]))], [0]
    ),
    "broadcast_to_scalar": Case([normal(R)], lambda e, a: [e(g.BroadcastToOp(a[0], [2, 3]))], [0]),
    "reduce_sum_middle": Case(
        [normal(R, 2, 3, 4)], lambda e, a: [e(g.ReduceSumOp(a[0], [1]))], [0]
    ),
    "reduce_sum_keepdims": Case(
        [normal(R, 2, 3, 4)], lambda e, a: [e(g.ReduceSumOp(a[0], [0, 2], keepdims=True))], [0]
    ),
    "reduce_sum_leading": Case([normal(R, 3, 4)], lambda e, a: [e(g.ReduceSumOp(a[0], [0]))], [0]),
    "reduce_sum_negative_axis": Case(
        [normal(R, 3, 4)], lambda e, a: [e(g.ReduceSumOp(a[0], [-1]))], [0]
    ),
    "softmax_axis1": Case([normal(R, 3, 5)], lambda e, a: [e(g.SoftmaxOp(a[0], 1))], [0]),
    "softmax_axis0": Case([normal(R, 3, 5)], lambda e, a: [e(g.SoftmaxOp(a[0], 0))], [0]),
    "cross_entropy": Case(
        [normal(R, 4, 5), np.array([0, 3, 4, 3], dtype=np.int32)],
        lambda e, a: [e(g.CrossEntropyOp(a[0], a[1]))],
        [0],
        scalar_loss=True,
    ),
    "mse_loss": Case(
        [normal(R, 3, 4), normal(R, 3, 4)],
        lambda e, a: [e(g.MseLossOp(a[0], a[1]))],
        [0, 1],
        scalar_loss=True,
    ),
}


def matmul_case(ta: bool, tb: bool) -> Case:
    m, n, k = 3, 5, 4
    a = normal(R, *((k, m) if ta else (m, k)))
    b = normal(R, *((n, k) if tb else (k, n)))
    return Case([a, b], lambda e, x: [e(g.MatmulOp(x[0], x[1], ta, tb))], [0, 1])


@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_graph_op(name: str) -> None:
    gradcheck(GRAPH_CASES[name])


@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
def test_matmul(ta: bool, tb: bool) -> None:
    gradcheck(matmul_case(ta, tb))


def _kink_free_inputs(rng: np.random.Generator, ta: bool, tb: bool, bias: bool) -> list[np.ndarray]:
    """A, B (and bias) whose Z = op(A) op(B) + bias has every |z| >= 0.05."""
    m, n, k = 3, 5, 4
    for _ in range(200):
        a = normal(rng, *((k, m) if ta else (m, k)))
        b = normal(rng, *((n, k) if tb else (k, n)))
        ins = [a, b] + ([normal(rng, n)] if bias else [])
        z = gemm_epilogue(*ins, transpose_a=ta, transpose_b=tb)[1]
        if np.min(np.abs(z)) >= 0.05:
            return ins
    raise AssertionError("no kink-free draw")


GEMM_PARAMS = [
    (act, bias, pre, ta, tb)
    for act in ("none", "relu", "gelu", "silu")
    for bias in (False, True)
    for pre in (("none",) if act == "none" else ("none", "unused", "used"))
    for ta, tb in ((False, False), (False, True), (True, False), (True, True))
]


@pytest.mark.parametrize("act,bias,pre,ta,tb", GEMM_PARAMS)
def test_gemm_epilogue(act: str, bias: bool, pre: str, ta: bool, tb: bool) -> None:
    """pre: no pre_act result / pre_act present but unused / pre_act used downstream."""
    ins = _kink_free_inputs(np.random.default_rng(7), ta, tb, bias)

    def fwd(e: Emit, x: Sequence[SSAValue]) -> list[SSAValue]:
        op = g.GemmEpilogueOp(
            x[0], x[1], x[2] if bias else None, Activation(act), ta, tb, with_pre_act=pre != "none"
        )
        res = e.all(op)
        return list(res) if pre == "used" else [res[0]]

    gradcheck(Case(ins, fwd, list(range(len(ins)))))


# ----------------------------------------------------------------------------
# Structure: fan-out, chains, seeds, wrt off the path, second order
# ----------------------------------------------------------------------------


def _mlp(e: Emit, x: Sequence[SSAValue]) -> list[SSAValue]:
    h = e(g.GemmEpilogueOp(x[0], x[1], x[2], Activation.GELU, False, True))
    return [e(g.CrossEntropyOp(e(g.GemmEpilogueOp(h, x[3], x[4], transpose_b=True)), x[5]))]


STRUCTURE_CASES: dict[str, Case] = {
    # x feeds three uses (tanh, mul, and the output sum): partial gradients must add up.
    "fan_out": Case(
        [normal(R, 3, 4), normal(R, 3, 4)],
        lambda e, a: [e(g.MulOp(e(g.TanhOp(a[0])), a[0])), e(g.AddOp(a[0], a[1]))],
        [0, 1],
    ),
    "two_layer_mlp": Case(
        [
            normal(R, 4, 3),
            normal(R, 6, 3),
            normal(R, 6),
            normal(R, 5, 6),
            normal(R, 5),
            np.array([1, 0, 4, 2], dtype=np.int32),
        ],
        _mlp,
        [0, 1, 2, 3, 4],
        scalar_loss=True,
    ),
    "explicit_seed": Case([normal(R, 3, 4)], lambda e, a: [e(g.TanhOp(a[0]))], [0], seed=-2.5),
    # the loss does not depend on the second wrt value: its gradient is zero
    "wrt_off_path": Case([normal(R, 3, 4), normal(R, 2)], lambda e, a: [e(g.GeluOp(a[0]))], [0, 1]),
    "wrt_is_loss": Case([normal(R)], lambda e, a: [a[0]], [0], scalar_loss=True),
    "wrt_intermediate_chain": Case(
        [normal(R, 3, 4), normal(R, 4, 2)],
        lambda e, a: [e(g.SoftmaxOp(e(g.MatmulOp(e(g.TanhOp(a[0])), a[1])), 1))],
        [1, 0],
    ),
}


@pytest.mark.parametrize("name", sorted(STRUCTURE_CASES))
def test_structure(name: str) -> None:
    gradcheck(STRUCTURE_CASES[name])


def _double_backward(e: Emit, a: Sequence[SSAValue]) -> list[SSAValue]:
    # inner: l1 = sum(tanh(x) * w); dx = w * (1 - tanh(x)^2); outer loss uses dx
    y = e(g.TanhOp(a[0]))
    l1 = e(g.ReduceSumOp(e(g.MulOp(y, a[1])), [0, 1]))
    (dx,) = e.all(ad.BackwardOp(l1, [a[0]]))
    return [dx]


def test_second_order_through_nested_backward() -> None:
    """A backward whose loss uses another backward's gradient (tanh_grad's VJP)."""
    rng = np.random.default_rng(2)
    gradcheck(Case([normal(rng, 3, 4), normal(rng, 3, 4)], _double_backward, [0, 1]))


# ----------------------------------------------------------------------------
# Backward primitives
# ----------------------------------------------------------------------------

PRIMITIVE_CASES: dict[str, Case] = {
    # relu_grad's y only gates dy: its gradient is zero away from the kink
    "relu_grad": Case(
        [normal(R, 3, 4), away(R, 3, 4)], lambda e, a: [e(ad.ReluGradOp(a[0], a[1]))], [0, 1]
    ),
    "tanh_grad": Case(
        [normal(R, 3, 4), normal(R, 3, 4)], lambda e, a: [e(ad.TanhGradOp(a[0], a[1]))], [0, 1]
    ),
    "softmax_grad": Case(
        [normal(R, 3, 5), normal(R, 3, 5)],
        lambda e, a: [e(ad.SoftmaxGradOp(a[0], a[1], 1))],
        [0, 1],
    ),
    "softmax_grad_axis0": Case(
        [normal(R, 3, 5), normal(R, 3, 5)],
        lambda e, a: [e(ad.SoftmaxGradOp(a[0], a[1], 0))],
        [0, 1],
    ),
    "cross_entropy_grad": Case(
        [normal(R, 4, 5), np.array([2, 0, 4, 4], dtype=np.int32), np.asarray(0.7)],
        lambda e, a: [e(ad.CrossEntropyGradOp(a[0], a[1], a[2]))],
        [0, 2],
    ),
    "mse_loss_grad": Case(
        [normal(R, 3, 4), normal(R, 3, 4), np.asarray(1.3)],
        lambda e, a: [e(ad.MseLossGradOp(a[0], a[1], a[2]))],
        [0, 1, 2],
    ),
    "dropout_grad": Case(
        [normal(R, 4, 6), offset(11)],
        lambda e, a: [e(ad.DropoutGradOp(a[0], a[1], 0.25, 3))],
        [0],
    ),
    "epilogue_grad_relu": Case(
        [normal(R, 3, 5), away(R, 3, 5)],
        lambda e, a: list(e.all(ad.EpilogueGradOp(a[0], a[1], Activation.RELU))),
        [0, 1],
    ),
    "epilogue_grad_relu_bias_only": Case(
        [normal(R, 3, 5), away(R, 3, 5)],
        lambda e, a: [e.all(ad.EpilogueGradOp(a[0], a[1], Activation.RELU))[1]],
        [0],
    ),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVE_CASES))
def test_backward_primitive(name: str) -> None:
    gradcheck(PRIMITIVE_CASES[name])


@pytest.mark.parametrize(
    "forward,why",
    [
        (lambda e, a: [e(ad.GeluGradOp(a[0], a[1]))], "gelu''"),
        (lambda e, a: list(e.all(ad.EpilogueGradOp(a[0], a[1], Activation.GELU))), "gelu''"),
        (lambda e, a: [e(ad.SiluGradOp(a[0], a[1]))], "silu''"),
        (lambda e, a: list(e.all(ad.EpilogueGradOp(a[0], a[1], Activation.SILU))), "silu''"),
    ],
    ids=["gelu_grad", "epilogue_grad_gelu", "silu_grad", "epilogue_grad_silu"],
)
def test_not_differentiable_primitive_raises(forward: Forward, why: str) -> None:
    rng = np.random.default_rng(3)
    case = Case([normal(rng, 3, 5), normal(rng, 3, 5)], forward, [1])
    with pytest.raises(OpError, match="is not differentiable: .*" + why):
        expand(build(case, np.random.default_rng(0)))


def test_gradient_ops_need_no_differentiation_off_the_path() -> None:
    """Ops the loss depends on but no wrt value reaches (here gelu_grad) are not visited."""
    rng = np.random.default_rng(4)
    case = Case(
        [normal(rng, 3, 5), normal(rng, 3, 5)],
        lambda e, a: [e(g.MulOp(e(ad.GeluGradOp(a[1], a[1])), e(g.TanhOp(a[0]))))],
        [0],
    )
    gradcheck(case)


def test_rule_table_is_exhaustive() -> None:
    """Every graph and autodiff op has a VJP rule or is declared not differentiable, not both."""
    from aicfc.dialects.autodiff import Autodiff
    from aicfc.dialects.flags import op_info
    from aicfc.dialects.graph import Graph
    from aicfc.passes.vjp_rules import VJP_RULES

    for cls in [*Graph.operations, *Autodiff.operations]:
        info = op_info(cls)
        assert info is not None, cls.name
        if info.differentiable:
            assert cls in VJP_RULES, f"{cls.name} is differentiable but has no VJP rule"
        else:
            assert cls not in VJP_RULES, f"{cls.name} is declared not differentiable"
            assert info.why_not, f"{cls.name} does not say why it is not differentiable"
    assert {c.name for c in VJP_RULES} >= {
        "graph.matmul",
        "graph.gemm_epilogue",
        "autodiff.relu_grad",
        "autodiff.epilogue_grad",
    }


# ----------------------------------------------------------------------------
# SiLU: unfused, fused by construction, and fused by aicfc-fuse after the expansion
# ----------------------------------------------------------------------------


def test_silu_unfused() -> None:
    gradcheck(unary(g.SiluOp, normal(np.random.default_rng(21), 3, 4)))


def _silu_mlp(e: Emit, x: Sequence[SSAValue]) -> list[SSAValue]:
    # cross_entropy(Linear(silu(Linear(x)))) written unfused: matmul, bias_add, silu
    z = e(g.BiasAddOp(e(g.MatmulOp(x[0], x[1], False, True)), x[2]))
    h = e(g.SiluOp(z))
    logits = e(g.BiasAddOp(e(g.MatmulOp(h, x[3], False, True)), x[4]))
    return [e(g.CrossEntropyOp(logits, x[5]))]


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused_by_aicfc_fuse"])
def test_silu_mlp(fuse: bool) -> None:
    """The two-layer SiLU MLP's gradients, before and after aicfc-fuse turns the layer into
    gemm_epilogue act = silu and its backward, with the next layer's dX product, into
    gemm_epilogue_grad act = silu."""
    rng = np.random.default_rng(22)
    ins = [normal(rng, 4, 3), normal(rng, 6, 3), normal(rng, 6), normal(rng, 5, 6)]
    ins += [normal(rng, 5), np.array([1, 0, 4, 2], dtype=np.int32)]
    case = Case(ins, _silu_mlp, [0, 1, 2, 3, 4], scalar_loss=True)
    if fuse:  # the fused forms are really there
        fn = expand(build(case, np.random.default_rng(0)))
        module = fn.parent_op()
        assert isinstance(module, ModuleOp)
        AicfcFusePass().apply(Context(), module)
        acts = [op.properties["act"] for op in module.walk() if "act" in op.properties]
        kinds = {type(op) for op in module.walk()}
        assert {g.GemmEpilogueOp, ad.GemmEpilogueGradOp} <= kinds and g.SiluOp not in kinds, kinds
        assert all(str(a) == "#graph<activation silu>" for a in acts), acts
    gradcheck(case, fuse=fuse)
