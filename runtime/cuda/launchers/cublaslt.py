"""The launcher of the cuBLASLt registry entries (flag "library"; no .cu of ours).

A matmul or gemm_epilogue runs as one planned `cublasLtMatmul` with its bias and
activation fused in cuBLASLt's epilogue (`cublaslt.EPILOGUES` says which
activations have one). A gemm_epilogue that also keeps its pre-activation Z runs
as matmul + bias into Z, then our kernel Y = act(Z) (`activation_kernel` of
runtime/registry_cuda.py), whose own launcher binds it. A bf16/f16 entry takes every
epilogue activation: one cuBLASLt has no epilogue for (exact GELU) runs the same way,
in place in Y where no Z is kept.
"""

from __future__ import annotations

from aicfc.runtime import registry
from aicfc.runtime.cuda import launch
from aicfc.runtime.cuda.abi import CudaKernelError, Launch
from aicfc.runtime.cuda.cublaslt import EPILOGUES
from aicfc.runtime.cuda.launchers.common import Buffers, LoadContext, Params
from aicfc.runtime.cuda.launchers.gemm import gemm_operands
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
    tf32 = "tf32" in spec.flags
    lt = ctx.cublaslt()
    if g.z is None and g.act in EPILOGUES:
        return [lt.plan(spec.name, g, g.y, g.act, tf32)]
    # Keep the pre-activation (or, in bf16/f16, an activation cuBLASLt has no epilogue
    # for): GEMM + bias into Z (into Y itself without a Z), then Y = act(Z) (or a copy).
    z = g.z if g.z is not None else g.y
    first = lt.plan(spec.name, g, z, "none", tf32)
    if z is g.y and g.act == "none":
        return [first]
    follow = registry.get(activation_kernel(g.act, spec.dtypes[0]))
    return [first, *launch.launches_for(follow, [z], [g.y], {}, ctx)]
