"""Which CUDA kernel the real registry and rules pick, and that the exec IR says so.

The selection happens in aicfc-lower-exec with the capability the backend
reports (`Backend.lower_exec_options()`); the CuPy backend then runs exactly
those kernels. These checks need no GPU: they call the selector and the
pipeline with the capability of an H200 with and without nvmath-python.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from aicfc import nn, optim
from aicfc.builder import build_train_step
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.passes.pipelines import run_steps, train_pipeline
from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.launch import launches_for
from aicfc.runtime.cuda.launchers.gemm_small import skinny_mode, split_k_plan
from aicfc.runtime.selector import AutotuneCache, NoKernelError, Problem, select
from gpu.cuda_emu import EmuArray, EmuContext

H200 = {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True}


def gemm(m, n, k, ta=False, tb=False, act=None):
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    params = {"transpose_a": ta, "transpose_b": tb}
    op = "graph.matmul"
    shapes = (a, b)
    if act is not None:
        op, params["act"], shapes = "graph.gemm_epilogue", act, (a, b, (n,))
    return Problem(op, "f32", shapes, ((m, n),), ("f32",) * len(shapes), params)


def chosen(problem, **cap):
    return select(problem, "cuda", {**H200, **cap}).spec.name


@pytest.mark.parametrize(
    ("problem", "kernel"),
    [
        # The 784-256-256-10 MLP at batch 128: the 10-wide layer's three products.
        (gemm(128, 10, 256, tb=True, act="none"), "cuda.gemm_epilogue_skinny_nt"),
        (gemm(128, 256, 10), "cuda.matmul_skinny_nn"),
        (gemm(10, 256, 128, ta=True), "cuda.matmul_skinny_tn"),
        # Its other small products: split-K over many blocks where K is long and the
        # tiles few, cuBLASLt for the weight gradients (K = 128).
        (gemm(128, 256, 784, tb=True, act="relu"), "cuda.gemm_epilogue_splitk_nt"),
        (gemm(128, 256, 256), "cuda.matmul_splitk_nn"),
        (gemm(256, 784, 128, ta=True), "cuda.matmul_cublaslt_f32"),
        (gemm(256, 256, 128, ta=True), "cuda.matmul_cublaslt_f32"),
        # Large products: cuBLASLt.
        (gemm(1024, 4096, 1024, tb=True, act="relu"), "cuda.gemm_epilogue_cublaslt_f32"),
        (gemm(4096, 4096, 8192, ta=True), "cuda.matmul_cublaslt_f32"),
    ],
)
def test_strict_fp32_choices(problem, kernel):
    assert chosen(problem) == kernel


def test_tf32_goes_to_tensor_cores_only_where_their_tiles_fill():
    assert chosen(gemm(1024, 4096, 1024, tb=True, act="relu"), tf32=True) == (
        "cuda.gemm_epilogue_cublaslt_tf32"
    )
    assert chosen(gemm(128, 256, 784, tb=True, act="relu"), tf32=True) == (
        "cuda.gemm_epilogue_cublaslt_tf32"
    )
    # A 10-wide layer would leave the tensor-core tiles mostly empty.
    assert chosen(gemm(128, 10, 256, tb=True, act="none"), tf32=True) == (
        "cuda.gemm_epilogue_skinny_nt"
    )
    assert chosen(gemm(10, 256, 128, ta=True), tf32=True) == "cuda.matmul_skinny_tn"
    assert chosen(gemm(128, 256, 10), tf32=True) == "cuda.matmul_skinny_nn"  # K = 10


def test_without_cublaslt_no_library_kernel_is_chosen():
    assert chosen(gemm(1024, 4096, 1024, tb=True, act="relu"), cublaslt=False) == (
        "cuda.gemm_epilogue_f32_nt"
    )
    assert chosen(gemm(1024, 4096, 1024, tb=True), cublaslt=False, tf32=True) == (
        "cuda.matmul_tf32_nt"
    )
    why = dict(select(gemm(2048, 2048, 2048), "cuda", {**H200, "cublaslt": False}).refused)
    assert why["cuda.matmul_cublaslt_f32"] == "needs capability 'cublaslt'"


def test_cublaslt_takes_rows_that_are_not_multiples_of_16_bytes():
    # N = 10 floats = 40-byte rows: refused before, accepted now (the GPU tests run
    # cuBLASLt on K = 131 and N = 10 within the fp32 tolerance).
    refused = dict(select(gemm(128, 10, 256, tb=True), "cuda", H200).refused)
    assert "cuda.matmul_cublaslt_f32" not in refused


def test_skinny_kernel_refuses_a_product_without_a_short_side():
    why = dict(select(gemm(64, 64, 64), "cuda", H200).refused)["cuda.matmul_skinny_nn"]
    assert why == "(M, N, K) = (64, 64, 64) has no side of at most 32 (not skinny)"


def test_autotune_entries_are_kept_apart_by_precision(tmp_path):
    p = gemm(128, 256, 784, tb=True, act="relu")
    cache = AutotuneCache(tmp_path / "t.json")
    cache.record(p, "H200", "cuda.gemm_epilogue_cublaslt_f32")
    strict = select(p, "cuda", H200, cache, device="H200")
    assert (strict.spec.name, strict.source) == ("cuda.gemm_epilogue_cublaslt_f32", "autotune")
    tf32 = select(p, "cuda", {**H200, "tf32": True}, cache, device="H200")
    assert (tf32.spec.name, tf32.source) == ("cuda.gemm_epilogue_cublaslt_tf32", "rules")


@pytest.mark.parametrize(
    ("m", "n", "k", "mode", "blocks"),
    [(128, 10, 256, 1, 16), (10, 256, 128, 2, 32), (128, 256, 10, 0, 128), (10, 10, 5, 0, 1)],
)
def test_skinny_mode_and_grid(m, n, k, mode, blocks, monkeypatch):
    """The launcher's mode scalar and grid (the grid was computed by the test itself)."""
    monkeypatch.setattr(cuda_abi, "get_function", lambda spec: None)
    a, b, y = (EmuArray(np.zeros(s, np.float32)) for s in ((m, k), (k, n), (m, n)))
    spec = registry.get("cuda.matmul_skinny_nn")
    (launch,) = launches_for(spec, [a, b], [y], {}, EmuContext())
    assert isinstance(launch, cuda_abi.KernelLaunch)
    assert skinny_mode(m, n, k) == mode == int(launch.args[-1])
    assert launch.grid == (blocks,)


@pytest.mark.parametrize(
    ("m", "n", "k", "splits", "chunk"),
    [
        (128, 256, 784, 9, 96),
        (128, 256, 256, 4, 64),
        (256, 784, 128, 2, 64),
        (64, 64, 20, 1, 32),
        (32, 32, 4096, 64, 64),
        (320, 320, 512, 4, 128),
    ],
)
def test_split_k_plan_fills_the_device(m, n, k, splits, chunk):
    assert split_k_plan(m, n, k, 132) == (splits, chunk)
    assert (splits - 1) * chunk < k <= splits * chunk and chunk % 32 == 0 and chunk <= 128


def exec_kernels(exec_options):
    """The per-layer kernels of a small step (without aicfc-fuse-train-step, which would
    make it one launch of the fused kernel)."""
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    fn = build_train_step(model, "cross_entropy", optim.Adam(), (128, 784), np.float32)
    module = ModuleOp([fn])
    steps = train_pipeline("cupy", True, exec_options)
    run_steps(make_context(), module, tuple(s for s in steps if s.stage != "fused-step"))
    program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
    graph = next(op for op in program.block.ops if isinstance(op, ex.GraphOp))
    return [op.kernel_name for op in graph.block.ops if isinstance(op, ex.LaunchOp)]


def test_the_exec_ir_names_the_kernels_for_the_reported_capability():
    with_lt = exec_kernels({**H200, "device": "NVIDIA H200 sm_90"})
    without = exec_kernels({**H200, "cublaslt": False, "device": "NVIDIA H200 sm_90"})
    # the second bias's update right after the fused loss, then dW2, then the dX product
    # with the first layer's backward epilogue in one launch
    assert with_lt[:6] == [
        "cuda.gemm_epilogue_splitk_nt",
        "cuda.gemm_epilogue_skinny_nt",
        "cuda.cross_entropy_with_grad_f32_i32",
        "cuda.adam_step_multi_tensor_f32",
        "cuda.matmul_skinny_tn",
        "cuda.gemm_epilogue_grad_splitk_nn",
    ]
    assert not any("cublaslt" in k for k in without)
    assert "cuda.reduce_sum_f32" not in with_lt  # the last bias gradient is in the fused loss


def test_the_autotune_cache_reaches_the_exec_ir(tmp_path):
    cache = AutotuneCache(tmp_path / "tune.json")
    cache.record(gemm(128, 256, 784, tb=True, act="relu"), "dev", "cuda.gemm_epilogue_cublaslt_f32")
    cache.save()
    kernels = exec_kernels({**H200, "autotune_cache": str(tmp_path / "tune.json"), "device": "dev"})
    assert kernels[0] == "cuda.gemm_epilogue_cublaslt_f32"
    assert exec_kernels({**H200, "device": "dev"})[0] == "cuda.gemm_epilogue_splitk_nt"


def batched(batch, m, n, k, tb=False):
    b = (*batch, n, k) if tb else (*batch, k, n)
    params = {"transpose_a": False, "transpose_b": tb}
    return Problem(
        "graph.matmul", "f32", ((*batch, m, k), b), ((*batch, m, n),), ("f32",) * 2, params
    )


def test_batched_products_go_to_our_batched_kernel_while_small_else_to_cublaslt():
    # gpt-tiny's unfused attention scores: 128 products of 64 x 64 x 32 (16.7M MACs).
    assert chosen(batched((32, 4), 64, 64, 32, tb=True)) == "cuda.matmul_batched_f32_nt"
    # nanogpt-char's: 384 products of 256 x 256 x 64 (1.6G MACs).
    assert chosen(batched((64, 6), 256, 256, 64, tb=True)) == "cuda.matmul_cublaslt_f32"
    assert chosen(batched((64, 6), 256, 256, 64, tb=True), tf32=True) == (
        "cuda.matmul_cublaslt_tf32"
    )
    assert chosen(batched((32, 4), 64, 64, 32), cublaslt=False) == "cuda.matmul_batched_f32_nn"


def test_linear_on_rank_3_inputs_is_one_product_for_every_gemm_kernel():
    p = Problem(
        "graph.gemm_epilogue",
        "f32",
        ((64, 256, 384), (1152, 384), (1152,)),
        ((64, 256, 1152),),
        ("f32",) * 3,
        {"transpose_b": True, "act": "none"},
    )
    assert p.mnk() == (16384, 1152, 384) and p.gemm().batch == 1
    assert chosen(p) == "cuda.gemm_epilogue_cublaslt_f32"
    assert chosen(p, cublaslt=False) == "cuda.gemm_epilogue_f32_nt"  # the 128x128 tile
    assert chosen(p, cublaslt=False, tf32=True) == "cuda.gemm_epilogue_tf32_nt"


def test_a_batch_that_broadcasts_partly_has_no_kernel_and_says_why():
    p = Problem("graph.matmul", "f32", ((2, 3, 8, 4), (3, 4, 6)), ((2, 3, 8, 6),), ("f32",) * 2, {})
    with pytest.raises(NoKernelError, match="batch dims broadcast partly"):
        select(p, "cuda", H200)


def attention(d, t=256, s=None, grad=False):
    s = t if s is None else s
    q, kv = (64, 6, t, d), (64, 6, s, d)
    if grad:
        ins = (q, q, kv, kv, q, (64, 6, t))
        return Problem(
            "autodiff.scaled_dot_product_attention_grad", "f32", ins, (q, kv, kv), ("f32",) * 6
        )
    return Problem(
        "graph.scaled_dot_product_attention", "f32", (q, kv, kv), (q, (64, 6, t)), ("f32",) * 3
    )


@pytest.mark.parametrize("grad", [False, True])
def test_attention_goes_to_the_tiled_kernels_for_their_head_dims_else_to_the_row_kernels(grad):
    suffix = "_grad" if grad else ""
    for d in (32, 64, 128):
        assert (
            chosen(attention(d, grad=grad)) == f"cuda.scaled_dot_product_attention{suffix}_f32_d{d}"
        )
    rows = f"cuda.scaled_dot_product_attention{suffix}_rows_f32"
    assert chosen(attention(16, grad=grad)) == rows  # the oracle GPT's head dim
    assert chosen(attention(64, t=200, s=300, grad=grad)) == rows  # more keys than queries


def test_a_language_models_loss_goes_to_the_team_per_row_kernel():
    def loss(c):
        return Problem(
            "autodiff.cross_entropy_with_grad",
            "f32",
            ((64, 256, c), (64, 256), ()),
            ((), (64, 256, c)),
            ("f32", "i32", "f32"),
        )

    assert chosen(loss(65)) == "cuda.softmax_cross_entropy_f32_i32"
    assert chosen(loss(50257)) == "cuda.softmax_cross_entropy_f32_i32"
    assert chosen(loss(10)) == "cuda.cross_entropy_with_grad_f32_i32"  # an MLP's head
