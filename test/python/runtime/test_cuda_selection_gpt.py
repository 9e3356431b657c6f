"""Which CUDA kernel each product of the GPT train step gets, at issue 12's two configs.

gpt-tiny (B 32, T 64, d_model 128: M = 2048) and nanogpt-char (B 64, T 256, d_model 384:
M = 16384), V = 65, strict fp32 and TF32, on an H200 with nvmath-python. Every product
goes to cuBLASLt except two kinds: the MLP's c_fc with its exact GELU (no cuBLASLt
epilogue) runs in our fused GEMM kernels on gpt-tiny (134M multiply-adds, below
SPLIT_EPILOGUE_MIN_MACS) and as cuBLASLt's product + bias, then our GELU kernel, on
nanogpt-char (9.7G); two of gpt-tiny's strict-fp32 weight gradients (a 65 x 128 and a
128 x 128 result over K = 2048) go to split-K. The expected kernels follow from the
rules of runtime/selector.py, worked out by hand in the comments. The pipeline tests
check that a one-layer GPT's exec IR names the same kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from aicfc import optim
from aicfc.builder import build_train_step
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.passes.pipelines import run_steps, train_pipeline
from aicfc.runtime.selector import SPLIT_EPILOGUE_MIN_MACS, Problem, select

H200 = {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True}
CONFIGS = {"gpt-tiny": (32, 64, 128), "nanogpt-char": (64, 256, 384)}  # B, T, d_model
V = 65


def linear(bt: tuple[int, int], d_in: int, d_out: int, act: str = "none") -> Problem:
    """A Linear's forward on [B, T, d_in] (its weight [d_out, d_in], transposed)."""
    outs = ((*bt, d_out),) * (2 if act == "gelu" else 1)  # GELU keeps Z for its backward
    return Problem(
        "graph.gemm_epilogue",
        "f32",
        ((*bt, d_in), (d_out, d_in), (d_out,)),
        outs,
        ("f32",) * 3,
        {"transpose_b": True, "act": act},
    )


def dx(bt: tuple[int, int], d_in: int, d_out: int) -> Problem:
    """dX [B, T, d_in] = dY [B, T, d_out] W [d_out, d_in]."""
    return Problem(
        "graph.matmul", "f32", ((*bt, d_out), (d_out, d_in)), ((*bt, d_in),), ("f32",) * 2
    )


def dw(m: int, d_in: int, d_out: int) -> Problem:
    """dW [d_out, d_in] = dY^T [d_out, M] X [M, d_in]."""
    return Problem(
        "graph.matmul",
        "f32",
        ((m, d_out), (m, d_in)),
        ((d_out, d_in),),
        ("f32",) * 2,
        {"transpose_a": True},
    )


def products(config: str) -> dict[str, Problem]:
    b, t, d = CONFIGS[config]
    bt, m = (b, t), b * t
    layers = {"c_attn": (d, 3 * d), "attn.c_proj": (d, d), "c_fc": (d, 4 * d)}
    layers["mlp.c_proj"] = (4 * d, d)
    out = {
        f"{name} fwd": linear(bt, i, o, "gelu" if name == "c_fc" else "none")
        for name, (i, o) in layers.items()
    }
    out |= {f"{name} dX": dx(bt, i, o) for name, (i, o) in layers.items()}
    out |= {f"{name} dW": dw(m, i, o) for name, (i, o) in layers.items()}
    out["lm_head fwd"] = Problem(
        "graph.matmul", "f32", ((*bt, d), (V, d)), ((*bt, V),), ("f32",) * 2, {"transpose_b": True}
    )
    out["lm_head dX"] = dx(bt, d, V)
    out["wte dW"] = dw(m, d, V)
    return out


def expected(config: str, tf32: bool) -> dict[str, str]:
    lt = f"cublaslt_{'tf32' if tf32 else 'f32'}"
    names = products(config)
    fused = {name for name in names if name.endswith("fwd") and name != "lm_head fwd"}
    want = {name: f"cuda.{'gemm_epilogue' if name in fused else 'matmul'}_{lt}" for name in names}
    if config == "gpt-tiny":
        # 2048 x 512 x 128 = 134M MACs < 2^28: the split entry's 16 points off (TF32 17,
        # strict -8); our WMMA kernel (TF32 27) or the 128x128 tile (strict 6) wins.
        want["c_fc fwd"] = "cuda.gemm_epilogue_tf32_nt" if tf32 else "cuda.gemm_epilogue_f32_nt"
        if not tf32:  # small, at most 64 tiles of 32x32, K = 2048: split-K (12) over cuBLASLt (10)
            want["wte dW"] = want["attn.c_proj dW"] = "cuda.matmul_splitk_tn"
    else:
        # 16384 x 1536 x 384 = 9.7G MACs: cuBLASLt's product + bias, then our exact GELU
        # (TF32 33 over our WMMA kernel's 27; strict 8 over the 128x128 tile's 6).
        want["c_fc fwd"] = f"cuda.gemm_epilogue_cublaslt_then_act_{'tf32' if tf32 else 'f32'}"
    return want


@pytest.mark.parametrize("tf32", [False, True], ids=["fp32", "tf32"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_each_gpt_product_gets_its_kernel(config: str, tf32: bool) -> None:
    got = {
        name: select(p, "cuda", {**H200, "tf32": tf32}).spec.name
        for name, p in products(config).items()
    }
    assert got == expected(config, tf32)


def test_the_split_epilogue_threshold_is_its_multiply_adds() -> None:
    at = linear((2048,), 128, SPLIT_EPILOGUE_MIN_MACS // (2048 * 128), "gelu")
    below = linear((2048,), 128, SPLIT_EPILOGUE_MIN_MACS // (2048 * 128) - 32, "gelu")
    assert at.macs() == SPLIT_EPILOGUE_MIN_MACS
    tf32 = {**H200, "tf32": True}
    assert select(at, "cuda", tf32).spec.name == "cuda.gemm_epilogue_cublaslt_then_act_tf32"
    assert select(below, "cuda", tf32).spec.name == "cuda.gemm_epilogue_tf32_nt"
    assert select(at, "cuda", H200).spec.name == "cuda.gemm_epilogue_cublaslt_then_act_f32"
    assert select(below, "cuda", H200).spec.name == "cuda.gemm_epilogue_f32_nt"
    # relu has an exact cuBLASLt epilogue: one fused launch, the split entry refuses it
    relu = linear((16384,), 384, 1536, "relu")
    picked = select(relu, "cuda", tf32)
    assert picked.spec.name == "cuda.gemm_epilogue_cublaslt_tf32"
    assert dict(picked.refused)["cuda.gemm_epilogue_cublaslt_then_act_tf32"] == (
        "activation relu not in gelu, silu"
    )
    # without nvmath-python the split entries are refused like every cuBLASLt entry
    no_lt = select(at, "cuda", {**tf32, "cublaslt": False})
    assert no_lt.spec.name == "cuda.gemm_epilogue_tf32_nt"


def gemm_launches(config: str, tf32: bool) -> list[tuple[str, str]]:
    """(kernel, the weight or weight gradient it reads or writes) of every product launch of
    a one-layer GPT's train step of `config`'s shapes, as aicfc-lower-exec names them."""
    b, t, d = CONFIGS[config]
    cfg = GPTConfig(V, t, 1, 4 if config == "gpt-tiny" else 6, d, 0.0, True)
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
    module = ModuleOp([build_train_step(GPT(cfg), "cross_entropy", opt, (b, t), np.float32)])
    run_steps(make_context(), module, train_pipeline("cupy", True, {**H200, "tf32": tf32}))
    program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
    graph = next(op for op in program.block.ops if isinstance(op, ex.GraphOp))
    found = []
    for op in graph.block.ops:
        if isinstance(op, ex.LaunchOp) and ("matmul" in op.kernel_name or "gemm" in op.kernel_name):
            names = [str(v.name_hint) for v in (*op.operands, *op.results) if v.name_hint]
            found.append((op.kernel_name, " ".join(n for n in names if "weight" in n)))
    return found


@pytest.mark.parametrize(
    ("config", "tf32", "c_fc"),
    [
        ("gpt-tiny", False, "cuda.gemm_epilogue_f32_nt"),
        ("nanogpt-char", True, "cuda.gemm_epilogue_cublaslt_then_act_tf32"),
    ],
)
def test_the_exec_ir_of_a_gpt_names_the_mlp_kernel(config: str, tf32: bool, c_fc: str) -> None:
    launches = gemm_launches(config, tf32)
    reads_w = [k for k, w in launches if w == "transformer.h.0.mlp.c_fc.weight"]
    assert sorted(reads_w) == sorted([c_fc, expected(config, tf32)["c_fc dX"]])  # fwd, dX
    want = expected(config, tf32)
    assert sorted(k for k, _ in launches) == sorted(want.values())
