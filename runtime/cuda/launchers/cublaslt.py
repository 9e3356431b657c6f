"""The launchers of the cuBLASLt registry entries (flag "library"; no .cu of ours).

A matmul or gemm_epilogue runs as one planned `cublasLtMatmul` with its bias and
activation fused in cuBLASLt's epilogue (`cublaslt.EPILOGUES` says which
activations have one). A gemm_epilogue that also keeps its pre-activation Z runs
as matmul + bias into Z, then our kernel Y = act(Z) (`activation_kernel` of
runtime/registry_cuda.py), whose own launcher binds it. The split entries (flag
"split_epilogue": GELU, SiLU, which cuBLASLt has no exact epilogue for) always run
that way; without Z their product + bias goes into Y and the activation runs in place.
A bf16/f16 entry takes every epilogue activation: one cuBLASLt has no epilogue for
(exact GELU) runs the same way. A gemm_epilogue_grad runs as the cuBLASLt product into dZ,
then our epilogue_grad in place.
"""

from __future__ import annotations

from typing import Any

from aicfc.runtime import registry
from aicfc.runtime.cuda import launch
from aicfc.runtime.cuda.abi import CudaKernelError, Launch
from aicfc.runtime.cuda.cublaslt import EPILOGUES
from aicfc.runtime.cuda.launchers.common import Buffers, LoadContext, Params
from aicfc.runtime.cuda.launchers.gemm import Gemm, gemm_operands
from aicfc.runtime.cuda.launchers.reduce import product_then_epilogue_grad
from aicfc.runtime.registry import KernelSpec
from aicfc.runtime.registry_cuda import activation_kernel


def launch_cublaslt(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """The launches of a cuBLASLt entry (matmul or gemm_epilogue), planned on the
    backend's cuBLASLt handle (`ctx.cublaslt()`); TF32 for entries flagged "tf32"."""
    g = gemm_operands(spec, ins, outs, params, batched=True)
    low = spec.dtypes[0] != "f32"
    if g.act not in EPILOGUES and not low:
        raise CudaKernelError(
            f'kernel "{spec.name}": cuBLASLt runs act {" or ".join(EPILOGUES)}, not {g.act}'
        )
    if g.z is None and g.act in EPILOGUES:
        return [ctx.cublaslt().plan(spec.name, g, g.y, g.act, "tf32" in spec.flags)]
    # Keep the pre-activation (or, in bf16/f16, an activation cuBLASLt has no epilogue
    # for): GEMM + bias into Z (into Y itself without a Z), then Y = act(Z).
    return _bias_then_activation(spec, g, g.y if g.z is None else g.z, ctx)


def launch_cublaslt_then_act(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """A split entry's two launches: cuBLASLt's product + bias (its BIAS epilogue) into Z,
    or into Y when Z is not kept, then our kernel Y = act(Z) (in place on Y without Z:
    each thread reads its element before writing it). CudaKernelError naming the kernel
    for act none (the fused entries run it in one launch)."""
    g = gemm_operands(spec, ins, outs, params, batched=True)
    if g.act == "none":
        raise CudaKernelError(
            f'kernel "{spec.name}": runs an activation after the product; act none is one '
            "cuBLASLt launch (the fused cuBLASLt entries)"
        )
    return _bias_then_activation(spec, g, g.y if g.z is None else g.z, ctx)


def _bias_then_activation(spec: KernelSpec, g: Gemm, pre: Any, ctx: LoadContext) -> list[Launch]:
    """GEMM + bias into `pre` (Z, or Y itself), then Y = act(pre) in the entry's dtype
    (a copy for none; nothing more when `pre` is Y and act is none)."""
    first = ctx.cublaslt().plan(spec.name, g, pre, "none", "tf32" in spec.flags)
    if pre is g.y and g.act == "none":
        return [first]
    follow = registry.get(activation_kernel(g.act, spec.dtypes[0]))
    return [first, *launch.launches_for(follow, [pre], [g.y], {}, ctx)]


def launch_cublaslt_then_epilogue_grad(
    spec: KernelSpec, ins: Buffers, outs: Buffers, params: Params, ctx: LoadContext
) -> list[Launch]:
    """gemm_epilogue_grad as a cuBLASLt product into dZ, then epilogue_grad in place
    (launchers/reduce.py's product_then_epilogue_grad)."""
    return product_then_epilogue_grad(spec, ins, outs, params, ctx)
