"""The tensor-core latency kernels of kernels/gemm_mma.cu, as registry rows (data).

gemm_small.cu's split-K kernels with their product on mma.sync: bf16 and f16 operands
(m16n8k16) and float32 operands rounded to tf32 (m16n8k8), float32 accumulation, the
forward epilogue (bias, activation; Y and Z) and the backward one (dZ = product * act'(saved),
dbias = column sums of dZ) in one launch each. Per input type three output forms:

- "bf16" / "f16": results and bias in the operands' dtype (cuBLASLt's bf16/f16 entries);
- "bf16_f32" / "f16_f32": a float32 result and bias over bf16/f16 operands (the wide
  results of aicfc-fold-casts, out_dtype "f32"; for gemm_epilogue_grad dZ stays in the
  operands' dtype and dbias is float32, as the wide composites write them);
- "tf32": float32 in and out, inputs rounded to tf32, so the rows require capability
  "tf32" as every TF32 kernel here does (gemm_tf32.cu's WMMA kernel, cuBLASLt's TF32
  entries): a compile that allows TF32 lets a float32 product round its inputs.

Their range is the split-K kernel's (results up to SPLIT_K_MAX_OUTPUTS elements, one
product, sm_80+). Every row requires capability "mma_small" (aicfc-lower-exec's option, off
by default): on the H200 the small MLP step took 69.6 us in TF32 and 65.1 in bf16 with them
against 52.7 and 43.6 with cuBLASLt and our FFMA kernels (BENCHMARKS.md, session 4). Where
asked for, the flag "mma_small" earns the selector's small-product rule (runtime/selector.py
SCORE_RULES), so they win the small products and lose the large ones.

Imports nothing but the registry's dataclasses and the activation table.
"""

from __future__ import annotations

from aicfc.dialects.activation_table import EPILOGUE_ACTIVATIONS
from aicfc.runtime.registry import Constraints, KernelSpec

_PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}
_ABI = (
    ("M", "int32_t"),
    ("N", "int32_t"),
    ("K", "int32_t"),
    ("act", "int32_t"),
    ("splits", "int32_t"),
    ("k_chunk", "int32_t"),
)
MMA_MAX_OUTPUTS = 1 << 18
"""The mma kernels' 32x32 tiles suit results up to this many elements (the split-K
kernel's range, registry_cuda.SPLIT_K_MAX_OUTPUTS)."""

_WIDE = (("out_dtype", ("f32",)),)


_FORMS = (
    # (symbol tag, operand dtype, result and bias dtype, wide, TF32)
    ("bf16", "bf16", "bf16", False, False),
    ("bf16_f32", "bf16", "f32", True, False),
    ("f16", "f16", "f16", False, False),
    ("f16_f32", "f16", "f32", True, False),
    ("tf32", "f32", "f32", False, True),
)


def _row(
    op: str,
    tag: str,
    suffix: str,
    dtype: str,
    constraints: Constraints,
    flags: frozenset[str],
    tf32: bool,
) -> KernelSpec:
    grad = "one_launch_epilogue_grad" in flags  # the backward epilogue's kernel and launcher
    short = op.split(".", 1)[1]
    return KernelSpec(
        name=f"cuda.{short}_mma_{tag}_{suffix}",
        op=op,
        family="cuda",
        dtypes=(dtype,),
        transposes=(_PAIRS[suffix],),
        constraints=constraints,
        flags=flags
        | {"tensor_core", "mma_small", "split_k", "workspace"}
        | ({"tf32"} if tf32 else set()),
        abi=_ABI,
        source="gemm_mma.cu",
        symbol=f"aicfc_gemm_{'epilogue_grad_' if grad else ''}mma_{tag}_{suffix}",
        launcher=f"gemm_mma:launch_{'epilogue_grad' if grad else 'gemm'}_mma",
    )


def _constraints(
    operands: tuple[tuple[int, tuple[str, ...]], ...],
    wide: bool,
    tf32: bool,
    activations: tuple[str, ...],
) -> Constraints:
    return Constraints(
        activations=activations,
        operand_dtypes=operands,
        param_values=_WIDE if wide else (),
        max_numel=MMA_MAX_OUTPUTS,
        min_arch=80,
        requires=("mma_small", "tf32") if tf32 else ("mma_small",),
        gemm_batch=1,
    )


MMA_KERNELS: tuple[KernelSpec, ...] = tuple(
    [
        _row(
            op,
            tag,
            suffix,
            out,
            _constraints(
                ((0, (dt,)), (1, (dt,)), (2, (out,))), wide, tf32, ("none", *EPILOGUE_ACTIVATIONS)
            ),
            op_flags,
            tf32,
        )
        for op, op_flags in (
            ("graph.gemm_epilogue", frozenset({"fused"})),
            ("graph.matmul", frozenset()),
        )
        for tag, dt, out, wide, tf32 in _FORMS
        for suffix in _PAIRS
    ]
    + [
        _row(
            "autodiff.gemm_epilogue_grad",
            tag,
            suffix,
            dt,
            _constraints(((0, (dt,)), (1, (dt,)), (2, (dt,))), wide, tf32, EPILOGUE_ACTIVATIONS),
            frozenset({"fused", "one_launch_epilogue_grad"}),
            tf32,
        )
        for tag, dt, _out, wide, tf32 in _FORMS
        for suffix in _PAIRS
    ]
)
"""Every row: graph.gemm_epilogue and graph.matmul (cuda.<op>_mma_<form>_<pair>, symbol
aicfc_gemm_mma_<form>_<pair>) and autodiff.gemm_epilogue_grad
(cuda.gemm_epilogue_grad_mma_<form>_<pair>, aicfc_gemm_epilogue_grad_mma_<form>_<pair>),
for each form of _FORMS and transpose pair."""
