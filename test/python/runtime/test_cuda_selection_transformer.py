"""The transformer's ops on the CUDA kernel family: no kernel yet, and a clear error.

kernels/attention.cu, layernorm.cu, embedding.cu and cross_entropy.cu are not registered
(the GPU issue registers them), so selecting a CUDA kernel for a new op, or for a
rank-2 kernel's op on batched operands, raises NoKernelError naming the op and, where
candidates exist, why each refuses; aicfc-lower-exec turns it into a located OpError.
The NumPy kernel family has a kernel for every one of them.
"""

from __future__ import annotations

import pytest

from aicfc.context import make_context
from aicfc.dialects.diagnostics import OpError
from aicfc.ir import parse_module
from aicfc.passes.aicfc_lower_exec import AicfcLowerExecPass
from aicfc.runtime.selector import NoKernelError, Problem, select

NEW_OPS = [
    Problem("graph.embedding", "f32", ((2, 8), (65, 16)), ((2, 8, 16),), ("i32", "f32")),
    Problem("graph.layer_norm", "f32", ((2, 8, 16),), ((2, 8, 16), (2, 8), (2, 8))),
    Problem("graph.add_layer_norm", "f32", ((8, 16), (8, 16)), ((8, 16),) * 2 + ((8,),) * 2),
    Problem("graph.scale", "f32", ((8,),), ((8,),), params={"factor": 0.5}),
    Problem("graph.causal_mask", "f32", ((4, 4),), ((4, 4),), params={"fill": float("-inf")}),
    Problem("graph.split", "f32", ((2, 6),), ((2, 3), (2, 3)), params={"axis": 1}),
    Problem("graph.concat", "f32", ((2, 3), (2, 3)), ((2, 6),), params={"axis": 1}),
    Problem(
        "graph.scaled_dot_product_attention",
        "f32",
        ((1, 2, 8, 16),) * 3,
        ((1, 2, 8, 16), (1, 2, 8)),
        params={"causal": True, "scale": 0.25},
    ),
    Problem("autodiff.embedding_grad", "f32", ((2, 8, 16), (2, 8)), ((65, 16),), ("f32", "i32")),
    Problem("autodiff.layer_norm_grad", "f32", ((8, 16), (8, 16), (8,), (8,)), ((8, 16),)),
    Problem(
        "autodiff.scaled_dot_product_attention_grad",
        "f32",
        ((1, 2, 8, 16),) * 5 + ((1, 2, 8),),
        ((1, 2, 8, 16),) * 3,
    ),
]


@pytest.mark.parametrize("problem", NEW_OPS, ids=[p.op for p in NEW_OPS])
def test_new_ops_have_no_cuda_kernel_yet(problem: Problem) -> None:
    with pytest.raises(NoKernelError, match=r"^has no kernel in kernel family cuda$"):
        select(problem, "cuda")
    assert select(problem, "numpy").spec.family == "numpy"


BATCHED = [
    Problem("graph.matmul", "f32", ((2, 8, 16), (16, 32)), ((2, 8, 32),)),
    Problem(
        "graph.matmul",
        "f32",
        ((1, 2, 8, 16), (1, 2, 8, 16)),
        ((1, 2, 8, 8),),
        params={"transpose_b": True},
    ),
    Problem(
        "graph.gemm_epilogue",
        "f32",
        ((2, 8, 16), (32, 16), (32,)),
        ((2, 8, 32),),
        params={"transpose_b": True, "act": "gelu"},
    ),
    Problem("graph.cross_entropy", "f32", ((2, 8, 65), (2, 8)), ((),), ("f32", "i32")),
    Problem(
        "autodiff.cross_entropy_with_grad",
        "f32",
        ((2, 8, 65), (2, 8), ()),
        ((), (2, 8, 65)),
        ("f32", "i32", "f32"),
    ),
    Problem(
        "autodiff.epilogue_grad",
        "f32",
        ((2, 8, 32),) * 2,
        ((2, 8, 32), (32,)),
        params={"act": "gelu"},
    ),
]


@pytest.mark.parametrize("problem", BATCHED, ids=[p.op for p in BATCHED])
def test_rank_two_cuda_kernels_refuse_batched_operands(problem: Problem) -> None:
    with pytest.raises(NoKernelError) as e:
        select(problem, "cuda")
    # every candidate refuses; those of the right label dtype for the operand's rank
    reasons = [why for _, why in e.value.reasons]
    assert reasons and all("has rank" in why or "dtype i32 not in i64" in why for why in reasons)
    assert "operand #0 has rank 3, not 2" in str(e.value) or "rank 4, not 2" in str(e.value)
    assert select(problem, "numpy").spec.family == "numpy"


def test_rank_two_products_still_get_their_cuda_kernels() -> None:
    two_d = Problem("graph.matmul", "f32", ((64, 64), (64, 64)), ((64, 64),))
    assert select(two_d, "cuda").spec.family == "cuda"


LAYER_NORM = """
func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %y, %m, %r = graph.layer_norm %x weight %w eps = 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>
    -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  func.return %y : tensor<2x4x8xf32>
}
"""


def test_lower_exec_for_cuda_names_the_op_without_a_kernel() -> None:
    module = parse_module(LAYER_NORM)
    with pytest.raises(OpError, match="has no kernel in kernel family cuda") as e:
        AicfcLowerExecPass(backend="cuda").apply(make_context(), module)
    assert e.value.op.name == "graph.layer_norm"
