"""The launches of lowered programs bind, without a GPU: every launch of the pipeline's
train steps and predicts (MLPs and GPTs; fp32, TF32 and bf16/fp16 with cuBLASLt, multi-
tensor Adam groups included) passes its launcher's buffer checks; SiLU reaches our kernels
as its table code; a GPT's two AdamW weight-decay groups share one multi-tensor
Adam launch; the bf16 MLP step's casts fold into its products and reductions; a
wide composite gemm_epilogue_grad runs the wide epilogue kernel. The stand-ins are
gpu/fake_launch.py's, shared with test_abi_cpu.py (each registry entry's launcher alone).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.abi import CudaKernelError
from aicfc.runtime.cuda.launch import group_steps, launches_for
from aicfc.runtime.cuda.launchers.optim import launch_adam_group
from aicfc.runtime.registry_cuda import COMPOSITE_PRODUCTS, epilogue_grad_kernel
from gpu.fake_launch import (
    CublasLtCtx,
    FakeArray,
    FakeCtx,
    f,
    stub_kernels,  # noqa: F401  (autouse: no kernel is compiled)
)


def lowered_plans(
    model: Any,
    loss: str,
    optimizer: Any,
    batch: int,
    cublaslt: bool = False,
    tf32: bool = False,
    autocast: str | None = None,
    mma_small: bool = False,
) -> list[Any]:
    """The exec plans of `model`'s train step and predict, lowered for an sm_90 device
    with or without cuBLASLt and TF32, in float32 or mixed precision (`autocast`)."""
    from aicfc.builder import build_module
    from aicfc.context import make_context
    from aicfc.dialects import exec as ex
    from aicfc.passes.pipelines import run_steps, train_pipeline
    from aicfc.runtime.plan import ExecPlan

    module = build_module(model, loss, optimizer, batch)
    cap = {
        "arch": 90,
        "tensor_core": True,
        "cublaslt": cublaslt,
        "tf32": tf32,
        "mma_small": mma_small,
    }
    run_steps(make_context(), module, train_pipeline("cupy", True, cap, autocast))
    return [ExecPlan.from_program(op) for op in module.ops if isinstance(op, ex.ProgramOp)]


def models() -> list[tuple[str, Any, str, Any]]:
    from aicfc import nn, optim

    mlp = nn.Sequential(
        nn.Linear(64, 96), nn.ReLU(), nn.Dropout(0.25), nn.Linear(96, 96), nn.GELU(),
        nn.Linear(96, 10),
    )  # fmt: skip
    regression = nn.Sequential(nn.Linear(12, 40), nn.Tanh(), nn.Linear(40, 3))
    from aicfc.models.gpt import GPT, GPTConfig

    adamw = optim.AdamW(lr=1e-3, weight_decay=0.1)
    return [
        ("mlp_cross_entropy_adam", mlp, "cross_entropy", adamw),
        ("tanh_mse_sgd", regression, "mse", optim.SGD(lr=0.1, momentum=0.9, nesterov=True)),
        # the oracle GPT of issue 11 (head dim 16, dropout) and a gpt-tiny-shaped one
        ("gpt_d16_dropout", GPT(GPTConfig(65, 16, 2, 4, 64, 0.1, True)), "cross_entropy", adamw),
        ("gpt_d32", GPT(GPTConfig(65, 24, 1, 4, 128, 0.0, True)), "cross_entropy", adamw),
    ]


@pytest.mark.parametrize("device", ["fp32", "tf32_cublaslt", "bf16_cublaslt", "fp16_cublaslt"])
@pytest.mark.parametrize(("name", "model", "loss", "opt"), models(), ids=lambda v: str(v)[:40])
def test_every_launch_of_a_lowered_program_binds(name, model, loss, opt, device):
    """What the pipeline emits (the GPT's train step too: a kernel for every op, no
    NoKernelError; mixed precision too) passes every launcher's buffer checks (as
    CupyExecutable binds it: multi-tensor groups included), so the checks refuse only
    what does not fit."""
    from aicfc.runtime.plan import LaunchStep

    fast = device != "fp32"
    low = device.split("_")[0] if device.startswith(("bf16", "fp16")) else None
    batch = 3 if name.startswith("gpt") else 48
    plans = lowered_plans(model, loss, opt, batch, cublaslt=fast, tf32=fast, autocast=low)
    for plan in plans:
        arrays = [FakeArray(b.shape, b.dtype) for b in plan.buffers]
        steps = plan.steps
        specs = [registry.get(s.kernel) if isinstance(s, LaunchStep) else None for s in steps]
        params = [s.params if isinstance(s, LaunchStep) else {} for s in steps]
        bound = 0
        for group in group_steps(specs, params):
            spec, first = specs[group.indices[0]], steps[group.indices[0]]
            if spec is None:
                continue
            assert isinstance(first, LaunchStep)
            buffers = [
                ([arrays[i] for i in s.inputs], [arrays[o] for o in s.outputs])
                for s in (steps[i] for i in group.indices)
                if isinstance(s, LaunchStep)
            ]
            if len(buffers) > 1:
                launches = launch_adam_group(spec, buffers, first.params, CublasLtCtx())
            else:
                launches = launches_for(spec, *buffers[0], first.params, CublasLtCtx())
            assert launches, spec.name
            bound += 1
        assert bound >= 3, f"{name}: @{plan.name} bound only {bound} launches"


def test_nanogpts_weight_decay_groups_share_one_multi_tensor_adam_launch():
    """AdamW(weight_decay_min_rank=2) on a GPT: the train step's updates are emitted group by
    group (matrices and tables, then every bias and layer-norm weight), and the plan's
    Adam steps stay one multi-tensor run: each tensor's row reads its own group's
    weight_decay state (optim.0.weight_decay = 0.1, optim.1.weight_decay = 0)."""
    from aicfc import optim
    from aicfc.models.gpt import GPT, GPTConfig
    from aicfc.runtime.plan import LaunchStep

    gpt = GPT(GPTConfig(65, 16, 2, 4, 64, 0.0, True))
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1, weight_decay_min_rank=2)
    (plan,) = [p for p in lowered_plans(gpt, "cross_entropy", opt, 3) if p.name == "train_step"]
    steps = plan.steps
    specs = [registry.get(s.kernel) if isinstance(s, LaunchStep) else None for s in steps]
    params = [s.params if isinstance(s, LaunchStep) else {} for s in steps]
    adam = registry.get("cuda.adam_step_multi_tensor_f32")
    groups = [g for g in group_steps(specs, params) if specs[g.indices[0]] is adam]
    assert len(groups) == 1, "one launch over both param groups"
    decay_buffers = []
    for k in groups[0].indices:
        step = steps[k]
        assert isinstance(step, LaunchStep)
        decay_buffers.append(plan.buffers[step.inputs[9]].name)  # operand 9: weight_decay
    # 2 tables + 4 matrices per layer; 2 x 2 layer norms + 4 biases per layer, and ln_f's 2
    expected = ["optim.0.weight_decay"] * (2 + 4 * 2) + ["optim.1.weight_decay"] * (8 * 2 + 2)
    assert decay_buffers == expected


def test_silu_binds_its_code_in_our_gemms_and_cublaslt_refuses_it():
    """act = silu reaches our GEMM and epilogue kernels as its table code (4); the cuBLASLt
    launcher refuses it (cuBLASLt has no SiLU epilogue), as the registry does."""
    gemm = registry.get("cuda.gemm_epilogue_f32_s64_nt")
    (la,) = launches_for(
        gemm,
        [f(8, 4), f(6, 4), f(6)],
        [f(8, 6), f(8, 6)],
        {"act": "silu", "transpose_b": True},
        FakeCtx(),
    )
    assert isinstance(la, cuda_abi.KernelLaunch) and la.args[-1] == np.int32(4)
    (eg,) = launches_for(
        registry.get("cuda.epilogue_grad_f32"),
        [f(8, 6), f(8, 6)],
        [f(8, 6), f(6)],
        {"act": "silu"},
        FakeCtx(),
    )
    assert isinstance(eg, cuda_abi.KernelLaunch) and eg.args[-2] == np.int32(4)  # act, rows
    lt = registry.get("cuda.gemm_epilogue_cublaslt_f32")
    assert "silu" not in (lt.constraints.activations or ())
    with pytest.raises(CudaKernelError, match="cuBLASLt runs act none or relu, not silu"):
        launches_for(lt, [f(8, 4), f(4, 6), f(6)], [f(8, 6)], {"act": "silu"}, CublasLtCtx())


def test_bf16_mlp_step_folds_its_casts_into_products_and_reductions():
    """The bf16 train step of the 784-256-256-10 MLP (batch 128, cuBLASLt): before
    aicfc-fold-casts it ran 15 casts of 31 launches; the 3 weight gradients' products, the
    logits' gemm_epilogue, the last layer's bias-gradient reduce_sum and the 2 composite
    bias gradients now write f32 themselves (7 casts folded), and the logits' epilogue
    adds the f32 master bias, so its cast to bf16 is gone too: 7 casts of 23 launches;
    aicfc-fold-weight-casts then has Adam write the 5 remaining weights' and biases' bf16
    copies: 2 casts (x and the logits' gradient) of 18 launches."""
    from aicfc import nn, optim
    from aicfc.runtime.plan import LaunchStep

    mlp = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    plans = lowered_plans(mlp, "cross_entropy", optim.Adam(lr=1e-3), 128, True, True, "bf16")
    (step,) = [p for p in plans if p.name == "train_step"]
    kernels = [s.kernel for s in step.steps if isinstance(s, LaunchStep)]
    casts = [k for k in kernels if k.startswith("cuda.cast_")]
    assert len(kernels) == 18 and len(casts) == 2, kernels
    assert all(k == "cuda.cast_f32_bf16" for k in casts)  # only the products' inputs
    assert kernels.count("cuda.matmul_cublaslt_bf16_f32") == 3
    assert kernels.count("cuda.gemm_epilogue_cublaslt_bf16_f32") == 1
    assert kernels.count("cuda.reduce_sum_bf16_f32") == 1
    assert kernels.count("cuda.gemm_epilogue_grad_cublaslt_bf16_f32") == 2
    (wide,) = [s for s in step.steps if isinstance(s, LaunchStep) and "reduce_sum" in s.kernel]
    assert wide.params["out_dtype"] == "f32"
    assert step.buffers[wide.outputs[0]].dtype == np.float32


def test_a_wide_composite_runs_the_wide_epilogue_grad():
    """A composite gemm_epilogue_grad with out_dtype f32 (its dbias folded) runs the
    low-precision product into dZ and then epilogue_grad_<dt>_f32, which writes dbias in
    float32; without it, epilogue_grad_<dt>; the f32 kernels refuse the widened op."""
    bf = np.dtype(ml_dtypes.bfloat16)

    def g16(*shape):
        return FakeArray(shape, bf)

    spec = registry.get("cuda.gemm_epilogue_grad_cublaslt_bf16_f32")
    assert COMPOSITE_PRODUCTS[spec.name] == "cuda.matmul_cublaslt_bf16"
    params = {"act": "relu", "out_dtype": "f32"}
    launches = launches_for(spec, [g16(8, 4), g16(4, 6), g16(8, 6)], [g16(8, 6), f(6)], params,
                            CublasLtCtx())  # fmt: skip
    assert launches[-1].name == "cuda.epilogue_grad_bf16_f32"
    assert epilogue_grad_kernel("bf16", wide=True) == "cuda.epilogue_grad_bf16_f32"
    from aicfc.runtime.selector import Problem, refusal

    p = Problem("graph.reduce_sum", "f32", ((8, 6),), ((6,),), ("bf16",), {"axes": (0,), **params})
    why = refusal(registry.get("cuda.reduce_sum_f32"), p, {"arch": 90})
    assert why == "writes no result in f32 over its operands' dtype"
    assert refusal(registry.get("cuda.reduce_sum_bf16_f32"), p, {"arch": 90}) is None
