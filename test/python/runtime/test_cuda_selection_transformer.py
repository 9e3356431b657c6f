"""The transformer's ops on the CUDA kernel family: a kernel for each, and a clear error
for an instance no kernel takes.

Every new op, and every product or row kernel's op on batched [B, T, D] operands (leading
dims folded, or strided batches: runtime/selector.py gemm_dims), selects a CUDA kernel
(issue 12); an instance outside every kernel's constraints (a head dim above 128) raises
NoKernelError naming why each candidate refuses, and aicfc-lower-exec turns it into a
located OpError. The NumPy kernel family has a kernel for every one of them.
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


CHOSEN = [
    "cuda.embedding_f32_i32",
    "cuda.layer_norm_f32",
    "cuda.add_layer_norm_f32",
    "cuda.scale_f32",
    "cuda.causal_mask_f32",
    "cuda.split_b32",
    "cuda.concat_b32",
    "cuda.scaled_dot_product_attention_rows_f32",  # head dim 16: the row kernels
    "cuda.embedding_grad_f32_i32",
    "cuda.layer_norm_grad_f32",
    "cuda.scaled_dot_product_attention_grad_rows_f32",
]


@pytest.mark.parametrize(("problem", "kernel"), list(zip(NEW_OPS, CHOSEN, strict=True)), ids=CHOSEN)
def test_new_ops_have_cuda_kernels(problem: Problem, kernel: str) -> None:
    assert select(problem, "cuda").spec.name == kernel
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


BATCHED_CHOSEN = [
    "cuda.matmul_skinny_nn",  # [2 x 8, 16] x [16, 32]: one folded product, K = 16
    "cuda.matmul_batched_f32_nt",  # two products of q k^T
    "cuda.gemm_epilogue_skinny_nt",  # act gelu: cuBLASLt has no exact-erf GELU
    "cuda.cross_entropy_f32_i32",
    "cuda.softmax_cross_entropy_f32_i32",  # V = 65 rows of a language model's head
    "cuda.epilogue_grad_f32",
]


@pytest.mark.parametrize(
    ("problem", "kernel"), list(zip(BATCHED, BATCHED_CHOSEN, strict=True)), ids=BATCHED_CHOSEN
)
def test_batched_operands_get_cuda_kernels(problem: Problem, kernel: str) -> None:
    assert select(problem, "cuda").spec.name == kernel
    assert select(problem, "numpy").spec.family == "numpy"


def test_an_instance_no_kernel_takes_names_every_refusal() -> None:
    wide = Problem(
        "graph.scaled_dot_product_attention",
        "f32",
        ((1, 2, 8, 200),) * 3,
        ((1, 2, 8, 200), (1, 2, 8)),
        params={"causal": True, "scale": 0.1},
    )
    with pytest.raises(NoKernelError) as e:
        select(wide, "cuda")
    reasons = dict(e.value.reasons)
    assert "last dim 200, not in (64,)" in reasons["cuda.scaled_dot_product_attention_f32_d64"]
    assert "last dim 200, outside [1, 128]" in reasons["cuda.scaled_dot_product_attention_rows_f32"]


LAYER_NORM = """
func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %y, %m, %r = graph.layer_norm %x weight %w eps = 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>
    -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  func.return %y : tensor<2x4x8xf32>
}
"""


def test_lower_exec_for_cuda_names_the_op_without_a_kernel() -> None:
    module = parse_module(LAYER_NORM.replace("8x", "9000x").replace("<8xf32>", "<9000xf32>"))
    with pytest.raises(OpError, match="has no kernel in kernel family cuda") as e:
        AicfcLowerExecPass(backend="cuda").apply(make_context(), module)
    assert e.value.op.name == "graph.layer_norm"
