"""tools/bench_train_step.py's CPU parts: the pipelines of issue 14's earlier rows and the
table (the benchmark itself needs a GPU; the lead runs it)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from aicfc import nn, optim
from aicfc.builder import build_train_step
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.passes.pipelines import run_steps, train_pipeline
from aicfc.tools import bench_train_step as bench

H200 = {"arch": 90, "tensor_core": True, "cublaslt": True, "device": "NVIDIA H200 sm_90"}


def kernels(variant: str) -> list[str]:
    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    fn = build_train_step(model, "cross_entropy", optim.Adam(), (128, 784), np.float32)
    module = ModuleOp([fn])
    run_steps(
        make_context(), module, bench.variant_steps(train_pipeline("cupy", True, H200), variant)
    )
    program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
    return [op.kernel_name for op in ex.launches(program) if isinstance(op, ex.LaunchOp)]


def test_variants_compile_the_steps_of_the_earlier_rows():
    first, fused, now = kernels("first"), kernels("fused"), kernels("")
    assert kernels("fused-step") == ["cuda.mlp_train_step_f32"]  # aicfc-fused-step's row
    assert first.count("cuda.epilogue_grad_f32") == 2 and "gemm_epilogue_grad" not in str(first)
    assert first[-6:] == ["cuda.adam_step_multi_tensor_f32"] * 6  # all updates at the end
    assert fused.count("cuda.gemm_epilogue_grad_splitk_nn") == 2
    assert fused[-6:] == ["cuda.adam_step_multi_tensor_f32"] * 6
    assert now.count("cuda.gemm_epilogue_grad_splitk_nn") == 2
    assert (
        now[-1] == "cuda.adam_step_multi_tensor_f32" and now[4] == now[-1]
    )  # hoisted: b3 right after the loss
    steps = bench.variant_steps(train_pipeline("cupy"), "first")
    assert steps[-1].passes == "aicfc-plan-memory{branches=false}"
    assert "hoisted" not in [s.stage for s in steps]
    assert "fused-step" not in [s.stage for s in steps]


def test_the_table_has_the_issues_columns_and_markdown_rows():
    row = {
        "config": "small",
        "precision": "fp32",
        "framework": "aicfc-graph",
        "flops": 1.5e8,
        "floor_seconds": 3e-6,
        "seconds": 50e-6,
        "device_loop_seconds": 54e-6,
        "step_seconds": 100e-6,
        "graph": {"nodes": 13, "longest_chain": 8, "streams": 3},
    }
    peer = {**row, "framework": "torch-graph", "seconds": 100e-6}
    for key in ("device_loop_seconds", "step_seconds", "graph"):
        del peer[key]
    text = bench.table([row, peer], ["small"], ["fp32"], markdown=True).splitlines()
    assert text[0].split(" | ")[3:9] == [
        "us/step",
        "nodes",
        "chain",
        "step(dev)",
        "dev-replay",
        "step() us",
    ]
    assert (
        text[2]
        == "| small | fp32 | aicfc-graph | 50.0 | 13 | 8 | 54.0 | 4.0 | 100.0 | 0.50 | 3.0 | 3.00 |"
    )
    assert text[3].startswith("| small | fp32 | torch-graph | 100.0 |  |  |")
