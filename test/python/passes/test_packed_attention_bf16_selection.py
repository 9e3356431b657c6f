"""Which attention kernels a mixed-precision GPT train step gets (CPU: selection only).

With aicfc-autocast{dtype=bf16} (or fp16) packed attention computes in the low dtype where
attention_mma.cu's kernels take it (head dims 32, 64, 128, no dropout): a one-layer GPT
of nanoGPT-char's shapes (B 64, T 256, d_model 384, 6 heads: d = 64) lowered for the CUDA
kernel family launches the tensor-core forward and backward, no f32
attention kernel and no cast of qkv or of the attention output; its lse buffer is
float32. With dropout on the attention probabilities, or a head dim the low-precision
kernels do not take (d = 16), the step keeps the float32 kernels, reading a cast of qkv.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, ModuleOp

import aicfc
from aicfc import optim
from aicfc.builder import build_train_step
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.dialects import graph as g
from aicfc.models.gpt import GPT, GPTConfig
from aicfc.passes.pipelines import run_steps, train_pipeline

H200 = {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True}
LOW = {"bf16": BFloat16Type(), "fp16": Float16Type()}
KERNEL_DTYPE = {"bf16": "bf16", "fp16": "f16"}


def lowered(
    n_embd: int, n_head: int, dropout: float, autocast: str, stop: str | None = None
) -> ModuleOp:
    """A one-layer GPT (V 65, T 256, batch 64) lowered for CUDA under `autocast`; with
    `stop`, only the steps before the stage `stop`."""
    cfg = GPTConfig(65, 256, 1, n_head, n_embd, dropout, True)
    opt = optim.AdamW(lr=1e-3, weight_decay=0.1)
    module = ModuleOp([build_train_step(GPT(cfg), "cross_entropy", opt, (64, 256), np.float32)])
    steps = train_pipeline("cupy", True, H200, autocast=autocast)
    if stop is not None:
        steps = steps[: [s.stage for s in steps].index(stop)]
    run_steps(make_context(), module, steps)
    return module


def launches(module: ModuleOp) -> collections.Counter[str]:
    return collections.Counter(
        op.kernel_name for op in module.walk() if isinstance(op, ex.LaunchOp)
    )


def attention_kernels(count: collections.Counter[str]) -> dict[str, int]:
    return {k: n for k, n in count.items() if "attention" in k}


@pytest.mark.parametrize("autocast", ["bf16", "fp16"])
def test_nanogpt_char_attention_runs_on_the_low_precision_kernels(autocast: str) -> None:
    dt = KERNEL_DTYPE[autocast]
    assert attention_kernels(launches(lowered(384, 6, 0.0, autocast))) == {
        f"cuda.packed_qkv_attention_{dt}_d64": 1,
        f"cuda.packed_qkv_attention_grad_{dt}_d64": 1,  # its launcher runs the delta pre-pass
    }


def test_the_low_precision_attention_reads_the_bf16_product_and_keeps_an_f32_lse() -> None:
    module = lowered(384, 6, 0.0, "bf16", stop="exec")
    (op,) = [o for o in module.walk() if isinstance(o, g.PackedQKVAttentionOp)]
    assert op.qkv.type.element_type == LOW["bf16"]
    assert not isinstance(op.qkv.owner, g.CastOp)  # the c_attn product's bf16 result
    assert op.result.type.element_type == LOW["bf16"]
    assert not any(isinstance(u.operation, g.CastOp) for u in op.result.uses)
    assert op.lse.type.element_type == Float32Type()


@pytest.mark.parametrize(
    ("n_embd", "n_head", "dropout", "why"),
    [(384, 6, 0.1, "dropout"), (96, 6, 0.0, "head dim 16")],
    ids=["dropout", "d16"],
)
def test_attention_the_mma_kernels_refuse_stays_float32(
    n_embd: int, n_head: int, dropout: float, why: str
) -> None:
    got = attention_kernels(launches(lowered(n_embd, n_head, dropout, "bf16")))
    assert all("_f32" in k for k in got), (why, got)
    assert any(k.startswith("cuda.packed_qkv_attention_") for k in got), (why, got)


def test_a_bf16_gpt_with_low_precision_attention_trains_like_fp32_on_numpy() -> None:
    # 2 heads of 32 (the low-precision attention's head dim) on the NumPy runtime, whose
    # bf16 packed attention is the reference in float32 with out rounded to bf16 and the
    # lse kept float32 (fp32_inside of a widened op): three AdamW steps on one batch (its
    # loss falls) track the fp32 program's losses within bf16's tolerance (0.05 relative,
    # test_autocast_differential's).
    cfg = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=64, dropout=0.0)
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, 13, (4, 9)).astype(np.int32)] * 3
    losses = {}
    for precision in ("fp32", "bf16"):
        aicfc.manual_seed(0)
        prog = aicfc.compile(
            GPT(cfg), optimizer=optim.AdamW(lr=1e-2), backend="numpy", precision=precision,
            cache_dir=False,
        )  # fmt: skip
        if precision == "bf16":
            graph = prog.mlir("autocast", batch_size=4)
            assert "tensor<4x8x192xbf16>) -> (tensor<4x8x64xbf16>, tensor<4x2x8xf32>)" in graph
        losses[precision] = [float(prog.step(b[:, :-1], b[:, 1:])) for b in batches]
    want, got = np.array(losses["fp32"]), np.array(losses["bf16"])
    assert np.all(np.isfinite(got)) and got[-1] < got[0]
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 0.05, (got, want)
