"""The NumPy `_out` kernels against the reference: bitwise equal on fresh random inputs.

Each kernel (runtime/registry_numpy.py, runtime/numpy/kernels/) runs the reference's
operations in the reference's order, so its results must equal the reference's bit
for bit (np.testing.assert_array_equal on the same dtype), into fresh output arrays
and in place where the op's alias policy allows it, on two calls in a row (the
second one sees the work arrays the first one left). Where the step allocates, it
allocates no array of the launch's sizes (tracemalloc).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from aicfc.dialects.flags import ADAM_TRIPLET, OUT0_IN0, SGD_PAIR, AliasPolicy
from aicfc.runtime import registry
from aicfc.runtime.errors import ExecError
from aicfc.runtime.numpy.backend import resolve_kernel
from aicfc.runtime.numpy.kernels.common import Scratch, Unsupported
from aicfc.runtime.reference import reference_for
from aicfc.runtime.registry_numpy import KERNELS

Gen = Callable[[np.random.Generator, np.dtype], list[np.ndarray]]


def normal(*shape: int) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    return lambda rng, dt: rng.standard_normal(shape).astype(dt)


def ints(*shape: int) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    return lambda rng, dt: rng.integers(-1000, 1000, shape).astype(dt)


def relu_out(*shape: int) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    return lambda rng, dt: np.maximum(rng.standard_normal(shape), 0).astype(dt)


def positive(*shape: int) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    return lambda rng, dt: (rng.standard_normal(shape) ** 2).astype(dt)


def special(*shape: int) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    """Normal values with NaN, +-inf, -0.0 and +0.0 planted among them."""

    def gen(rng: np.random.Generator, dt: np.dtype) -> np.ndarray:
        a = rng.standard_normal(shape).astype(dt).reshape(-1)
        picks = rng.choice(a.size, size=5, replace=False)
        a[picks] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
        return a.reshape(shape)

    return gen


def scalar(value: float) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    return lambda rng, dt: np.asarray(value, dt)


def labels(n: int, classes: int, dtype: type) -> Callable[[np.random.Generator, np.dtype], Any]:
    return lambda rng, dt: rng.integers(0, classes, n).astype(dtype)


def labels_of(
    dtype: type, *shape: int, classes: int
) -> Callable[[np.random.Generator, np.dtype], Any]:
    return lambda rng, dt: rng.integers(0, classes, shape).astype(dtype)


@dataclass(frozen=True)
class Case:
    """A launch of `op`: inputs drawn by `gens`, its params, how many outputs it writes."""

    op: str
    gens: tuple[Callable[[np.random.Generator, np.dtype], np.ndarray], ...]
    params: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    dtypes: tuple[type, ...] = (np.float32, np.float64)
    alias: AliasPolicy | None = None


def f64(value: float) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    """A hyperparameter operand: an f64 scalar whatever the case's dtype."""
    return lambda rng, dt: np.asarray(value, np.float64)


def f32(value: float) -> Callable[[np.random.Generator, np.dtype], np.ndarray]:
    """A control operand (grad_scale, apply): an f32 scalar."""
    return lambda rng, dt: np.asarray(value, np.float32)


def adam_gens(
    *shape: int, wd: float = 0.0, scale: float = 1.0, apply: float = 1.0
) -> tuple[Callable[[np.random.Generator, np.dtype], np.ndarray], ...]:
    """param, grad, m, v, step, then lr, beta1, beta2, eps, weight_decay, grad_scale, apply."""
    tensors = (normal(*shape), normal(*shape), normal(*shape), positive(*shape), scalar(3.0))
    hyper = (f64(1e-2), f64(0.9), f64(0.999), f64(1e-8), f64(wd))
    return (*tensors, *hyper, f32(scale), f32(apply))


def sgd_gens(
    *shape: int,
    momentum: float = 0.0,
    wd: float = 0.0,
    scale: float = 1.0,
    apply: float = 1.0,
) -> tuple[Callable[[np.random.Generator, np.dtype], np.ndarray], ...]:
    """param, grad, lr, momentum, weight_decay, grad_scale, apply[, momentum_buffer]."""
    buf = (normal(*shape),) if momentum else ()
    hyper = (f64(0.1), f64(momentum), f64(wd), f32(scale), f32(apply))
    return (normal(*shape), normal(*shape), *hyper, *buf)


ADAM_GENS = adam_gens(6, 5)

CASES: dict[str, Case] = {
    "matmul_nn": Case("graph.matmul", (normal(5, 7), normal(7, 3))),
    "matmul_tn": Case("graph.matmul", (normal(7, 5), normal(7, 3)), {"transpose_a": True}),
    "matmul_nt": Case("graph.matmul", (normal(5, 7), normal(3, 7)), {"transpose_b": True}),
    "matmul_tt": Case(
        "graph.matmul", (normal(7, 5), normal(3, 7)), {"transpose_a": True, "transpose_b": True}
    ),
    "matmul_long_k": Case("graph.matmul", (normal(16, 1100), normal(1100, 9))),
    "gemm_relu_bias": Case(
        "graph.gemm_epilogue",
        (normal(6, 9), normal(4, 9), normal(4)),
        {"act": "relu", "transpose_b": True},
    ),
    "gemm_relu_saves_z": Case(
        "graph.gemm_epilogue", (normal(6, 9), normal(9, 4), normal(4)), {"act": "relu"}, 2
    ),
    "gemm_gelu": Case(
        "graph.gemm_epilogue", (normal(6, 9), normal(9, 4), normal(4)), {"act": "gelu"}
    ),
    "gemm_gelu_saves_z": Case(
        "graph.gemm_epilogue",
        (normal(9, 6), normal(9, 4), normal(4)),
        {"act": "gelu", "transpose_a": True},
        2,
    ),
    "gemm_silu_saves_z": Case(
        "graph.gemm_epilogue",
        (normal(6, 9), normal(4, 9), normal(4)),
        {"act": "silu", "transpose_b": True},
        2,
    ),
    "gemm_silu": Case(
        "graph.gemm_epilogue", (normal(6, 9), normal(9, 4), normal(4)), {"act": "silu"}
    ),
    "gemm_no_bias": Case("graph.gemm_epilogue", (normal(6, 9), normal(9, 4))),
    # a GPT's [B, T, D] activations times a weight
    "matmul_batched_nt": Case(
        "graph.matmul", (normal(3, 5, 7), normal(4, 7)), {"transpose_b": True}
    ),
    "matmul_batch_broadcast": Case("graph.matmul", (normal(2, 1, 5, 7), normal(3, 7, 4))),
    "matmul_batched_tn": Case(
        "graph.matmul", (normal(2, 7, 5), normal(2, 7, 3)), {"transpose_a": True}
    ),
    "gemm_gelu_rank3_saves_z": Case(
        "graph.gemm_epilogue",
        (normal(3, 5, 9), normal(4, 9), normal(4)),
        {"act": "gelu", "transpose_b": True},
        2,
    ),
    "gemm_rank3": Case("graph.gemm_epilogue", (normal(3, 5, 9), normal(9, 4), normal(4))),
    "gemm_none_saves_z": Case(
        "graph.gemm_epilogue", (normal(6, 9), normal(9, 4), normal(4)), {}, 2
    ),
    "bias_add": Case("graph.bias_add", (normal(6, 4), normal(4)), alias=OUT0_IN0),
    "add": Case("graph.add", (normal(3, 5), normal(3, 5)), alias=OUT0_IN0),
    "sub": Case("graph.sub", (normal(3, 5), normal(3, 5)), alias=OUT0_IN0),
    "mul": Case("graph.mul", (normal(3, 5), normal(3, 5)), alias=OUT0_IN0),
    "add_int": Case(
        "graph.add", (ints(3, 5), ints(3, 5)), dtypes=(np.int32, np.int64), alias=OUT0_IN0
    ),
    "mul_int": Case(
        "graph.mul", (ints(3, 5), ints(3, 5)), dtypes=(np.int32, np.int64), alias=OUT0_IN0
    ),
    "relu": Case("graph.relu", (normal(4, 6),), alias=OUT0_IN0),
    "gelu": Case("graph.gelu", (normal(4, 6),), alias=OUT0_IN0),
    "tanh": Case("graph.tanh", (normal(4, 6),), alias=OUT0_IN0),
    "silu": Case("graph.silu", (normal(4, 6),), alias=OUT0_IN0),
    "relu_grad": Case("autodiff.relu_grad", (normal(4, 6), relu_out(4, 6)), alias=OUT0_IN0),
    "relu_grad_special_values": Case(
        "autodiff.relu_grad", (special(4, 6), special(4, 6)), alias=OUT0_IN0
    ),
    "relu_special_values": Case("graph.relu", (special(4, 6),), alias=OUT0_IN0),
    "gelu_grad": Case("autodiff.gelu_grad", (normal(4, 6), normal(4, 6)), alias=OUT0_IN0),
    "tanh_grad": Case("autodiff.tanh_grad", (normal(4, 6), normal(4, 6)), alias=OUT0_IN0),
    "silu_grad": Case("autodiff.silu_grad", (normal(4, 6), normal(4, 6)), alias=OUT0_IN0),
    "epilogue_grad_relu": Case(
        "autodiff.epilogue_grad", (normal(7, 5), relu_out(7, 5)), {"act": "relu"}, 2
    ),
    "epilogue_grad_gelu": Case(
        "autodiff.epilogue_grad", (normal(7, 5), normal(7, 5)), {"act": "gelu"}, 2
    ),
    "epilogue_grad_gelu_rank3": Case(
        "autodiff.epilogue_grad", (normal(3, 7, 5), normal(3, 7, 5)), {"act": "gelu"}, 2
    ),
    "epilogue_grad_silu": Case(
        "autodiff.epilogue_grad", (normal(7, 5), normal(7, 5)), {"act": "silu"}, 2
    ),
    "gemm_epilogue_grad_relu": Case(
        "autodiff.gemm_epilogue_grad",
        (normal(7, 3), normal(3, 5), relu_out(7, 5)),
        {"act": "relu"},
        2,
    ),
    "gemm_epilogue_grad_gelu_tt": Case(
        "autodiff.gemm_epilogue_grad",
        (normal(3, 7), normal(5, 3), normal(7, 5)),
        {"act": "gelu", "transpose_a": True, "transpose_b": True},
        2,
    ),
    "gemm_epilogue_grad_silu_nt": Case(
        "autodiff.gemm_epilogue_grad",
        (normal(7, 10), normal(5, 10), normal(7, 5)),
        {"act": "silu", "transpose_b": True},
        2,
    ),
    "reduce_rows": Case("graph.reduce_sum", (normal(9, 5),), {"axes": (0,)}),
    "reduce_keepdims": Case(
        "graph.reduce_sum", (normal(4, 5, 3),), {"axes": (2, 0), "keepdims": True}
    ),
    "reduce_negative_axis": Case("graph.reduce_sum", (normal(4, 5, 3),), {"axes": (-1,)}),
    "reduce_int": Case(
        "graph.reduce_sum", (ints(40, 3),), {"axes": (0,)}, dtypes=(np.int32, np.int64)
    ),
    "cross_entropy": Case("graph.cross_entropy", (normal(8, 5), labels(8, 5, np.int32))),
    "cross_entropy_grad": Case(
        "autodiff.cross_entropy_grad", (normal(8, 5), labels(8, 5, np.int64), scalar(0.7))
    ),
    "cross_entropy_with_grad": Case(
        "autodiff.cross_entropy_with_grad",
        (normal(8, 5), labels(8, 5, np.int32), scalar(1.0)),
        {},
        2,
    ),
    "cross_entropy_with_grad_rank3": Case(
        "autodiff.cross_entropy_with_grad",
        (normal(2, 4, 5), labels_of(np.int32, 2, 4, classes=5), scalar(1.0)),
        {},
        2,
    ),
    "cross_entropy_with_grad_bias": Case(
        "autodiff.cross_entropy_with_grad",
        (normal(8, 5), labels(8, 5, np.int64), scalar(1.3)),
        {},
        3,
    ),
    "mse_loss": Case("graph.mse_loss", (normal(6, 3), normal(6, 3))),
    "mse_loss_grad": Case("autodiff.mse_loss_grad", (normal(6, 3), normal(6, 3), scalar(0.5))),
    "adam": Case("autodiff.adam_step", ADAM_GENS, {}, 4, alias=ADAM_TRIPLET),
    "adam_l2": Case("autodiff.adam_step", adam_gens(6, 5, wd=0.1), {}, 4, alias=ADAM_TRIPLET),
    "adamw": Case(
        "autodiff.adam_step",
        adam_gens(6, 5, wd=0.1),
        {"decoupled_weight_decay": True},
        4,
        alias=ADAM_TRIPLET,
    ),
    "adam_l2_clipped": Case(
        "autodiff.adam_step", adam_gens(6, 5, wd=0.1, scale=0.37), {}, 4, alias=ADAM_TRIPLET
    ),
    "adamw_clipped": Case(
        "autodiff.adam_step",
        adam_gens(6, 5, wd=0.1, scale=0.37),
        {"decoupled_weight_decay": True},
        4,
        alias=ADAM_TRIPLET,
    ),
    "adam_not_applied": Case(
        "autodiff.adam_step", adam_gens(6, 5, wd=0.1, apply=0.0), {}, 4, alias=ADAM_TRIPLET
    ),
    "sgd": Case("autodiff.sgd_step", sgd_gens(6, 5), alias=SGD_PAIR),
    "sgd_weight_decay": Case("autodiff.sgd_step", sgd_gens(5, wd=0.01), alias=SGD_PAIR),
    "sgd_weight_decay_clipped": Case(
        "autodiff.sgd_step", sgd_gens(5, wd=0.01, scale=0.37), alias=SGD_PAIR
    ),
    "sgd_not_applied": Case("autodiff.sgd_step", sgd_gens(6, 5, apply=0.0), alias=SGD_PAIR),
    "sgd_momentum": Case("autodiff.sgd_step", sgd_gens(6, 5, momentum=0.9), {}, 2, alias=SGD_PAIR),
    "sgd_nesterov_weight_decay": Case(
        "autodiff.sgd_step",
        sgd_gens(6, 5, momentum=0.9, wd=0.01, scale=0.37),
        {"nesterov": True},
        2,
        alias=SGD_PAIR,
    ),
    "layer_norm": Case(
        "graph.layer_norm", (normal(3, 4, 6), normal(6), normal(6)), {"eps": 1e-5}, 3
    ),
    "layer_norm_no_affine": Case("graph.layer_norm", (normal(5, 7),), {"eps": 1e-3}, 3),
    "add_layer_norm": Case(
        "graph.add_layer_norm",
        (normal(3, 4, 6), normal(3, 4, 6), normal(6), normal(6)),
        {"eps": 1e-5},
        4,
    ),
    "add_layer_norm_weight": Case(
        "graph.add_layer_norm", (normal(5, 6), normal(5, 6), normal(6)), {"eps": 1e-5}, 4
    ),
    "layer_norm_grad": Case(
        "autodiff.layer_norm_grad",
        (normal(3, 4, 6), normal(3, 4, 6), normal(3, 4), positive(3, 4), normal(6)),
        {},
        3,
    ),
    "layer_norm_grad_weight": Case(
        "autodiff.layer_norm_grad",
        (normal(5, 6), normal(5, 6), normal(5), positive(5), normal(6)),
        {},
        2,
    ),
    "layer_norm_grad_no_weight": Case(
        "autodiff.layer_norm_grad", (normal(5, 6), normal(5, 6), normal(5), positive(5)), {}, 1
    ),
    "add_layer_norm_grad": Case(
        "autodiff.add_layer_norm_grad",
        (
            normal(3, 4, 6),
            normal(3, 4, 6),
            normal(3, 4, 6),
            normal(3, 4),
            positive(3, 4),
            normal(6),
        ),
        {},
        3,
    ),
    "add_layer_norm_grad_no_weight": Case(
        "autodiff.add_layer_norm_grad",
        (normal(5, 6), normal(5, 6), normal(5, 6), normal(5), positive(5)),
        {},
        1,
    ),
    "attention_causal": Case(
        "graph.scaled_dot_product_attention",
        (normal(2, 3, 5, 4), normal(2, 3, 5, 4), normal(2, 3, 5, 4)),
        {"scale": 0.5, "causal": True},
        2,
    ),
    "attention_cross": Case(
        "graph.scaled_dot_product_attention",
        (normal(2, 5, 4), normal(2, 7, 4), normal(2, 7, 4)),
        {"scale": 0.5},
        2,
    ),
    "attention_grad_causal": Case(
        "autodiff.scaled_dot_product_attention_grad",
        (*(normal(2, 3, 5, 4) for _ in range(5)), normal(2, 3, 5)),
        {"scale": 0.5, "causal": True},
        3,
    ),
    "attention_grad_square": Case(  # [B, H, T, Dh] of the scores' shape [B, H, T, T]
        "autodiff.scaled_dot_product_attention_grad",
        (*(normal(2, 2, 4, 4) for _ in range(5)), normal(2, 2, 4)),
        {"scale": 0.5, "causal": True},
        3,
    ),
    "attention_square": Case(
        "graph.scaled_dot_product_attention",
        (normal(2, 3, 1), normal(2, 1, 1), normal(2, 1, 1)),
        {"scale": 0.5},
        2,
    ),
    "layer_norm_grad_d1": Case(
        "autodiff.layer_norm_grad",
        (normal(5, 1), normal(5, 1), normal(5), positive(5), normal(1)),
        {},
        3,
    ),
    "attention_grad_cross": Case(
        "autodiff.scaled_dot_product_attention_grad",
        (
            normal(2, 5, 4),
            normal(2, 5, 4),
            normal(2, 7, 4),
            normal(2, 7, 4),
            normal(2, 5, 4),
            normal(2, 5),
        ),
        {"scale": 0.5},
        3,
    ),
    "packed_attention_heads3": Case(
        "graph.packed_qkv_attention",
        (normal(2, 5, 36),),
        {"num_heads": 3, "scale": 0.5, "causal": True},
        2,
    ),
    "packed_attention_head_dim_is_t": Case(  # heads [N, H, T, d] of the scores' shape
        "graph.packed_qkv_attention", (normal(1, 4, 12),), {"num_heads": 1, "scale": 0.5}, 2
    ),
    "packed_attention_grad_heads3": Case(
        "autodiff.packed_qkv_attention_grad",
        (normal(2, 5, 12), normal(2, 5, 36), normal(2, 5, 12), normal(2, 3, 5)),
        {"num_heads": 3, "scale": 0.5, "causal": True},
    ),
    "packed_attention_grad_head_dim_is_t": Case(
        "autodiff.packed_qkv_attention_grad",
        (normal(1, 4, 4), normal(1, 4, 12), normal(1, 4, 4), normal(1, 1, 4)),
        {"num_heads": 1, "scale": 0.5},
    ),
    "split": Case("graph.split", (normal(2, 3, 9),), {"axis": 2, "sizes": (3, 4, 2)}, 3),
    "split_int": Case(
        "graph.split", (ints(6, 2),), {"axis": 0, "sizes": (2, 4)}, 2, (np.int32, np.int64)
    ),
    "concat": Case(
        "graph.concat", (normal(2, 3, 4), normal(2, 3, 1), normal(2, 3, 2)), {"axis": -1}
    ),
    "concat_rows": Case("graph.concat", (normal(2, 5), normal(3, 5)), {"axis": 0}),
    "embedding": Case("graph.embedding", (labels_of(np.int32, 3, 4, classes=6), normal(6, 5))),
    "embedding_i64": Case("graph.embedding", (labels_of(np.int64, 7, classes=3), normal(3, 2))),
    "embedding_grad": Case(
        "autodiff.embedding_grad",
        (normal(3, 4, 5), labels_of(np.int32, 3, 4, classes=6)),
        {"num_embeddings": 6},
    ),
    "sgd_momentum_not_applied": Case(
        "autodiff.sgd_step", sgd_gens(6, 5, momentum=0.9, apply=0.0), {}, 2, alias=SGD_PAIR
    ),
    "reshape": Case("graph.reshape", (normal(4, 6),), {"shape": (3, 8)}),
    "transpose": Case("graph.transpose", (normal(2, 3, 4),), {"perm": (2, 0, 1)}),
    "broadcast_to": Case("graph.broadcast_to", (normal(1, 4),), {"shape": (3, 4)}),
}


def out_kernel(op: str) -> Any:
    spec = registry.get(f"numpy.{op.split('.', 1)[1]}_out")
    assert spec.op == op and spec.launcher is not None
    return resolve_kernel(spec.launcher)


def draw(case: Case, dtype: type, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [gen(rng, np.dtype(dtype)) for gen in case.gens]


def reference(case: Case, ins: list[np.ndarray]) -> list[np.ndarray]:
    results = reference_for(case.op)(*[a.copy() for a in ins], **case.params)
    return [np.asarray(r) for r in results[: case.outputs]]


def garbage_like(a: np.ndarray) -> np.ndarray:
    fill = np.nan if a.dtype.kind == "f" else -12345
    return np.full(a.shape, fill, a.dtype)


def check_equal(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"{what} result #{k}: dtype {g.dtype}, reference {w.dtype}"
        np.testing.assert_array_equal(g, w, err_msg=f"{what} result #{k}", strict=True)
        # bit for bit: assert_array_equal takes NaN == NaN and -0.0 == +0.0
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes(), (
            f"{what} result #{k}: equal values, different bits (a NaN or a signed zero)"
        )


def test_every_out_kernel_names_a_launcher_that_resolves_and_outranks_the_reference():
    assert KERNELS, "registry_numpy has no kernels"
    for spec in KERNELS:
        assert spec.family == "numpy" and spec.name.endswith("_out"), spec.name
        assert callable(reference_for(spec.op)), spec.name
        ref = registry.get(spec.name.removesuffix("_out"))
        assert "reference" in ref.flags and ref.launcher is None
        assert spec.priority > ref.priority, spec.name
        assert set(spec.dtypes) <= set(ref.dtypes), spec.name
        assert spec.launcher is not None and callable(resolve_kernel(spec.launcher))


@pytest.mark.parametrize(
    ("launcher", "message"),
    [
        ("nosuch:matmul", r"no module runtime/numpy/kernels/nosuch\.py"),
        ("gemm:nosuch", r"runtime/numpy/kernels/gemm\.py has no function 'nosuch'"),
    ],
)
def test_a_launcher_that_does_not_resolve_is_named(launcher, message):
    with pytest.raises(ExecError, match=message):
        resolve_kernel(launcher)


def test_every_out_kernel_has_a_case():
    assert {spec.op for spec in KERNELS} == {c.op for c in CASES.values()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_kernel_equals_the_reference_bitwise(name):
    case = CASES[name]
    for dtype in case.dtypes:
        ins = draw(case, dtype, seed=len(name))
        want = reference(case, ins)
        outs = [garbage_like(w) for w in want]
        step = out_kernel(case.op)(ins, outs, case.params, Scratch())
        for call in range(2):
            step()
            check_equal(outs, want, f"{name} {np.dtype(dtype)} call {call}")


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.alias is not None))
def test_out_kernel_in_place_under_its_alias_policy_equals_the_reference(name):
    """Outputs are the input arrays the policy pairs them with; three calls in a row (an
    optimizer's state carries from one to the next, as in training)."""
    case = CASES[name]
    assert case.alias is not None
    for dtype in case.dtypes:
        ins = draw(case, dtype, seed=len(name) + 1)
        state = [a.copy() for a in ins]
        pairs = dict(p for p in case.alias.pairs if p[0] < case.outputs and p[1] < len(ins))
        outs = [ins[pairs[k]] if k in pairs else None for k in range(case.outputs)]
        want0 = reference(case, state)
        outs = [o if o is not None else garbage_like(w) for o, w in zip(outs, want0, strict=True)]
        step = out_kernel(case.op)(ins, outs, case.params, Scratch())
        for call in range(3):
            want = reference(case, state)
            step()
            check_equal(outs, want, f"{name} {np.dtype(dtype)} in place, call {call}")
            for k, j in pairs.items():
                state[j] = want[k]


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("relu", lambda ins, outs: (ins, [np.zeros((4, 6), np.float16)])),
        ("relu", lambda ins, outs: ([a.astype(np.float16) for a in ins], outs)),
        ("matmul_nn", lambda ins, outs: (ins, [np.zeros((5, 4), np.float32)])),
        ("add", lambda ins, outs: (ins, [np.zeros((3, 5), np.float64)])),
        ("cross_entropy", lambda ins, outs: ([ins[0], ins[1].astype(np.float32)], outs)),
        ("adam", lambda ins, outs: (ins[:4], outs)),
        ("reduce_rows", lambda ins, outs: (ins, [np.zeros((9,), np.float32)])),
        ("transpose", lambda ins, outs: (ins, [np.zeros((4, 3, 2), np.float32)])),
        ("matmul_batched_nt", lambda ins, outs: ([ins[0], ins[1][:3]], outs)),
        ("layer_norm", lambda ins, outs: (ins, outs[:1])),
        ("layer_norm_grad_no_weight", lambda ins, outs: (ins, [*outs, outs[0][0]])),
        ("attention_causal", lambda ins, outs: ([ins[0], ins[1][:, :, :4], ins[2]], outs)),
    ],
)
def test_out_kernel_refuses_arrays_it_does_not_take(name, change):
    """Wrong dtypes, shapes or counts raise Unsupported at load (the backend then runs the
    reference, which names the mismatch at its first call)."""
    case = CASES[name]
    ins = draw(case, np.float32 if np.float32 in case.dtypes else case.dtypes[0], seed=0)
    outs = [garbage_like(w) for w in reference(case, ins)]
    ins, outs = change(ins, outs)
    with pytest.raises(Unsupported):
        out_kernel(case.op)(ins, outs, case.params, Scratch())


def test_the_attention_kernels_refuse_dropout():
    """Dropout's mask is drawn by the reference (an offset operand, dropout_p > 0)."""
    for name in ("attention_causal", "attention_grad_causal"):
        case = CASES[name]
        ins = draw(case, np.float32, seed=2)
        outs = [garbage_like(w) for w in reference(case, ins)]
        params = {**case.params, "dropout_p": 0.1}
        with pytest.raises(Unsupported, match="dropout"):
            out_kernel(case.op)(ins, outs, params, Scratch())


def test_the_embedding_kernels_refuse_out_of_range_ids_as_the_reference_does():
    for name, index in (("embedding", 0), ("embedding_grad", 1)):
        case = CASES[name]
        ins = draw(case, np.float32, seed=3)
        outs = [garbage_like(w) for w in reference(case, ins)]
        step = out_kernel(case.op)(ins, outs, case.params, Scratch())
        ins[index][1, 2] = -1  # 6 rows: ids in [0, 6)
        with pytest.raises(ValueError, match=r"ids must be in \[0, 6\) for a table of 6 rows"):
            step()


def test_the_cross_entropy_kernels_refuse_out_of_range_labels_as_the_reference_does():
    for name in ("cross_entropy", "cross_entropy_grad", "cross_entropy_with_grad_bias"):
        case = CASES[name]
        ins = draw(case, np.float32, seed=3)
        outs = [garbage_like(w) for w in reference(case, ins)]
        step = out_kernel(case.op)(ins, outs, case.params, Scratch())
        ins[1][2] = 5  # 5 classes: labels in [0, 5)
        with pytest.raises(ValueError, match=r"labels must be in \[0, 5\) for 5 classes"):
            step()


LARGE: dict[str, Case] = {
    "gemm_relu_bias": Case(
        "graph.gemm_epilogue",
        (normal(128, 256), normal(256, 256), normal(256)),
        {"act": "relu", "transpose_b": True},
    ),
    "matmul_tn": Case("graph.matmul", (normal(128, 256), normal(128, 256)), {"transpose_a": True}),
    "epilogue_grad_relu": Case(
        "autodiff.epilogue_grad", (normal(128, 256), relu_out(128, 256)), {"act": "relu"}, 2
    ),
    "epilogue_grad_gelu": Case(
        "autodiff.epilogue_grad", (normal(128, 256), normal(128, 256)), {"act": "gelu"}, 2
    ),
    "gemm_epilogue_grad_relu": Case(
        "autodiff.gemm_epilogue_grad",
        (normal(128, 10), normal(10, 256), relu_out(128, 256)),
        {"act": "relu"},
        2,
    ),
    "gemm_gelu_rank3_saves_z": Case(
        "graph.gemm_epilogue",
        (normal(4, 32, 256), normal(256, 256), normal(256)),
        {"act": "gelu", "transpose_b": True},
        2,
    ),
    "epilogue_grad_gelu_rank3": Case(
        "autodiff.epilogue_grad", (normal(4, 32, 256), normal(4, 32, 256)), {"act": "gelu"}, 2
    ),
    "add_layer_norm": Case(
        "graph.add_layer_norm",
        (normal(4, 32, 256), normal(4, 32, 256), normal(256), normal(256)),
        {"eps": 1e-5},
        4,
    ),
    "layer_norm_grad": Case(
        "autodiff.layer_norm_grad",
        (normal(4, 32, 256), normal(4, 32, 256), normal(4, 32), positive(4, 32), normal(256)),
        {},
        3,
    ),
    "attention_causal": Case(
        "graph.scaled_dot_product_attention",
        (normal(4, 2, 64, 32), normal(4, 2, 64, 32), normal(4, 2, 64, 32)),
        {"scale": 0.25, "causal": True},
        2,
    ),
    "attention_grad_causal": Case(
        "autodiff.scaled_dot_product_attention_grad",
        (*(normal(4, 2, 64, 32) for _ in range(5)), normal(4, 2, 64)),
        {"scale": 0.25, "causal": True},
        3,
    ),
    "cross_entropy_with_grad": Case(
        "autodiff.cross_entropy_with_grad",
        (normal(128, 256), labels(128, 256, np.int64), scalar(1.0)),
        {},
        3,
    ),
    "adam": Case("autodiff.adam_step", adam_gens(256, 256, wd=0.1, scale=0.5), {}, 4),
    "sgd_nesterov_weight_decay": Case(
        "autodiff.sgd_step",
        sgd_gens(256, 256, momentum=0.9, wd=0.01, scale=0.5),
        {"nesterov": True},
        2,
    ),
}
ITERATOR_BUFFER = 8192 * 4 + 4096
"""What one NumPy call may allocate inside itself and free before it returns: a
broadcasting ufunc (the bias add, the row max subtracted from the logits) buffers
up to 8192 elements (NpyIter's buffer), whatever the arrays' size."""


@pytest.mark.parametrize("name", sorted(LARGE))
def test_a_bound_step_allocates_no_array_of_its_sizes(name):
    """A warmed-up step's tracemalloc peak stays under NumPy's iterator buffer, where the
    reference allocates every intermediate: several arrays of 128 KiB (f32 [128, 256])
    or more."""
    case = LARGE[name]
    ins = draw(case, np.float32, seed=5)
    outs = [garbage_like(w) for w in reference(case, ins)]
    step = out_kernel(case.op)(ins, outs, case.params, Scratch())
    step()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        step()
        end, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        start_ref, _ = tracemalloc.get_traced_memory()
        reference_for(case.op)(*ins, **case.params)
        _, peak_ref = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - start <= ITERATOR_BUFFER, f"{name}: a step allocated {peak - start} bytes"
    assert end - start <= 1024, f"{name}: a step kept {end - start} bytes"
    assert peak_ref - start_ref >= 128 * 1024, "the reference was expected to allocate"


def test_work_arrays_are_shared_by_shape_and_dtype():
    scratch = Scratch()
    a = scratch((3, 4), np.dtype(np.float32))
    assert scratch((3, 4), np.dtype(np.float32)) is a
    assert scratch((3, 4), np.dtype(np.float32), 1) is not a
    assert scratch((3, 4), np.dtype(np.float64)) is not a
    assert scratch.nbytes == 3 * 4 * (4 + 4 + 8)


OPERANDS = {
    # op: (first hyperparameter, grad_scale, apply, the inputs the outputs copy when not applied)
    "autodiff.adam_step": (5, 10, 11, (0, 2, 3, 4)),
    "autodiff.sgd_step": (2, 5, 6, (0, 7)),
}


@pytest.mark.parametrize("name", ["adamw_clipped", "sgd_nesterov_weight_decay"])
def test_optimizer_kernels_read_their_operands_at_every_call(name):
    """A bound update reads lr, the other hyperparameters, grad_scale and apply from their
    buffers at each call (a schedule or param_groups writes them between steps): after
    new values are written into those arrays, the next call equals the reference on them;
    apply = 0 copies the inputs through."""
    case = CASES[name]
    first, scale, apply, kept = OPERANDS[case.op]
    for dtype in case.dtypes:
        ins = draw(case, dtype, seed=11)
        outs = [garbage_like(w) for w in reference(case, ins)]
        step = out_kernel(case.op)(ins, outs, case.params, Scratch())
        step()
        for call, factor in enumerate((0.5, 3.0)):
            for a in ins[first : first + 3]:  # lr and the two hyperparameters after it
                a[...] = a * factor if a < 0.5 else a * 0.9
            ins[scale][...] = 0.25 * factor
            step()
            check_equal(outs, reference(case, ins), f"{name} {np.dtype(dtype)} changed {call}")
        ins[apply][...] = 0.0
        step()
        check_equal(outs, [ins[k].copy() for k in kept], f"{name} {np.dtype(dtype)} not applied")
