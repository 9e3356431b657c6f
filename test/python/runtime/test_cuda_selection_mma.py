"""Which rows the small products get now that our mma kernels (kernels/gemm_mma.cu) compete.

The small MLP's products (784-256-256-10 at batch 128) per precision, from the selector
with an H200's capability, and from the whole lowering (the launch sequence of its train
step); large products keep cuBLASLt; strict fp32 never runs an mma kernel (tf32 rounds its
inputs); a device below sm_80 or a result past the kernels' range refuses them with the
reason. No GPU needed.
"""

from __future__ import annotations

import pytest

from aicfc.runtime.selector import Problem, select

H200 = {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True, "mma_small": True}
"""An H200 with the mma kernels asked for (aicfc-lower-exec{mma_small=true}; off by default)."""


def product(op: str, dt: str, m: int, n: int, k: int, pair: str = "nn", wide: bool = False,
            act: str = "relu") -> Problem:  # fmt: skip
    """A matmul, gemm_epilogue (with a bias) or gemm_epilogue_grad of operands in `dt`;
    `wide`: a float32 result (dbias for the backward) over bf16/f16 operands."""
    ta, tb = pair[0] == "t", pair[1] == "t"
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    params: dict[str, object] = {"transpose_a": ta, "transpose_b": tb}
    if wide:
        params["out_dtype"] = "f32"
    out = "f32" if wide else dt
    if op == "matmul":
        return Problem("graph.matmul", out, (a, b), ((m, n),), (dt, dt), params)
    params["act"] = act
    if op == "gemm_epilogue":
        return Problem("graph.gemm_epilogue", out, (a, b, (n,)), ((m, n),), (dt, dt, out), params)
    shapes = (a, b, (m, n))
    return Problem("autodiff.gemm_epilogue_grad", dt, shapes, ((m, n), (n,)), (dt,) * 3, params)


def chosen(problem: Problem, **cap: object) -> str:
    return select(problem, "cuda", {**H200, **cap}).spec.name


# The small MLP's products as lowered (/: the dX of its first layer is not computed).
SMALL_MLP = [
    ("gemm_epilogue", 128, 256, 784, "nt"),
    ("gemm_epilogue", 128, 256, 256, "nt"),
    ("gemm_epilogue", 128, 10, 256, "nt"),
    ("matmul", 10, 256, 128, "tn"),
    ("matmul", 256, 256, 128, "tn"),
    ("matmul", 256, 784, 128, "tn"),
    ("gemm_epilogue_grad", 128, 256, 10, "nn"),
    ("gemm_epilogue_grad", 128, 256, 256, "nn"),
]


@pytest.mark.parametrize(("op", "m", "n", "k", "pair"), SMALL_MLP, ids=str)
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_bf16_and_f16_small_products_go_to_the_mma_kernels(op, m, n, k, pair, dt, wide):
    form = f"{dt}_f32" if wide else dt
    assert chosen(product(op, dt, m, n, k, pair, wide)) == f"cuda.{op}_mma_{form}_{pair}"


@pytest.mark.parametrize(("op", "m", "n", "k", "pair"), SMALL_MLP, ids=str)
@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_without_the_option_no_product_goes_to_the_mma_kernels(op, m, n, k, pair, dt):
    """The default (mma_small off): measured slower on the H200 (BENCHMARKS.md, session 4)."""
    name = chosen(product(op, dt, m, n, k, pair), mma_small=False, tf32=True)
    assert "_mma_" not in name, name


@pytest.mark.parametrize(("op", "m", "n", "k", "pair"), SMALL_MLP, ids=str)
def test_tf32_small_products_go_to_the_mma_kernels_where_they_pay(op, m, n, k, pair):
    """With TF32 allowed every product of the step but the 10-row dW (K = 128: no split,
    the skinny kernel's warp per column keeps it) runs on the mma kernels."""
    kernel = "cuda.matmul_skinny_tn" if (m, k) == (10, 128) else f"cuda.{op}_mma_tf32_{pair}"
    assert chosen(product(op, "f32", m, n, k, pair), tf32=True) == kernel


@pytest.mark.parametrize(("op", "m", "n", "k", "pair"), SMALL_MLP, ids=str)
def test_strict_fp32_runs_no_mma_kernel(op, m, n, k, pair):
    sel = select(product(op, "f32", m, n, k, pair), "cuda", H200)
    assert "mma" not in sel.spec.name
    assert dict(sel.refused)[f"cuda.{op}_mma_tf32_{pair}"] == "needs capability 'tf32'"


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_large_products_keep_cublaslt(dt):
    big = product("gemm_epilogue", dt, 1024, 4096, 1024, "nt")
    assert chosen(big) == f"cuda.gemm_epilogue_cublaslt_{dt}"
    why = dict(select(big, "cuda", H200).refused)[f"cuda.gemm_epilogue_mma_{dt}_nt"]
    assert why == f"{1024 * 4096} elements outside [0, {1 << 18}]"  # the 32x32 tiles' range
    assert chosen(product("matmul", "f32", 1024, 4096, 1024, "tn"), tf32=True) == (
        "cuda.matmul_cublaslt_tf32"
    )


def test_a_product_of_many_macs_within_the_range_keeps_cublaslt():
    """512 x 512 x 4096 (2^30 MACs, 2^18 outputs): not small, so no mma bonus; cuBLASLt's
    tensor cores win it."""
    assert chosen(product("matmul", "bf16", 512, 512, 4096, "nn")) == "cuda.matmul_cublaslt_bf16"


def test_a_device_below_sm80_refuses_the_mma_kernels():
    p = product("gemm_epilogue", "bf16", 128, 256, 784, "nt")
    sel = select(p, "cuda", {**H200, "arch": 75})
    assert sel.spec.name == "cuda.gemm_epilogue_cublaslt_bf16"
    assert dict(sel.refused)["cuda.gemm_epilogue_mma_bf16_nt"] == "needs sm_80, device is sm_75"


def test_the_lowered_small_mlp_step_runs_its_products_on_the_mma_kernels():
    """The whole lowering (aicfc-lower-exec with an H200's capability): every product of
    the bf16 step and all but the 10-row dW of the tf32 step."""
    from aicfc import nn, optim
    from gpu.test_abi_lowered_cpu import lowered_plans

    def products(**kw: object) -> list[str]:
        mlp = nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )
        (plan,) = [
            p
            for p in lowered_plans(
                mlp, "cross_entropy", optim.Adam(lr=1e-3), 128, True, mma_small=True, **kw
            )
            if p.name == "train_step"
        ]
        return [s.kernel for s in plan.steps if "gemm" in getattr(s, "kernel", "")
                or "matmul" in getattr(s, "kernel", "")]  # fmt: skip

    assert products(tf32=True, autocast="bf16") == [
        "cuda.gemm_epilogue_mma_bf16_nt",
        "cuda.gemm_epilogue_mma_bf16_nt",
        "cuda.gemm_epilogue_mma_bf16_f32_nt",
        "cuda.matmul_mma_bf16_f32_tn",
        "cuda.gemm_epilogue_grad_mma_bf16_f32_nn",
        "cuda.matmul_mma_bf16_f32_tn",
        "cuda.gemm_epilogue_grad_mma_bf16_f32_nn",
        "cuda.matmul_mma_bf16_f32_tn",
    ]
    assert products(tf32=True) == [
        "cuda.gemm_epilogue_mma_tf32_nt",
        "cuda.gemm_epilogue_mma_tf32_nt",
        "cuda.gemm_epilogue_mma_tf32_nt",
        "cuda.matmul_skinny_tn",
        "cuda.gemm_epilogue_grad_mma_tf32_nn",
        "cuda.matmul_mma_tf32_tn",
        "cuda.gemm_epilogue_grad_mma_tf32_nn",
        "cuda.matmul_mma_tf32_tn",
    ]
    assert not any("mma" in k for k in products())  # strict fp32
