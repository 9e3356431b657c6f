"""cuBLASLt GEMMs with fused bias/ReLU epilogues, through nvmath-python's low-level bindings.

Everything that is not the matmul itself happens once, when a program loads:
the handle, the descriptors, the heuristic's algorithm choice and explicit
workspaces (cuBLASLt's heuristics are known to fail during stream capture, and
CuPy refuses its own cuBLAS wrappers while a stream captures). The launch is
then one `cublasLtMatmul` on the given stream, which a CUDA graph captures and
replays exactly (nvmath's high-level `Matmul.execute()` allocates its result on
every call, so it cannot write into fixed buffers).

A batch of products (`Gemm.batch` > 1, operands of rank >= 3 in torch.matmul's batched
form) is one strided-batched matmul: each layout's BATCH_COUNT and STRIDED_BATCH_OFFSET
(a stride of 0 broadcasts an operand over the batch).

Layout (cuBLASLt is column-major): a row-major Y[M, N] is a column-major
Y^T[N, M], so we compute Y^T = op(B)^T op(A)^T, passing B as cuBLASLt's "A" and
A as its "B". The epilogue's bias then runs along the rows of the column-major
result, which are our N output columns: a per-column bias of length N, as
reference.gemm_epilogue (checked on M != N by the GPU tests).

cuBLASLt's GELU epilogue is the tanh approximation, so the registry's fused cuBLASLt
entries refuse act=gelu (`EPILOGUES` has none for it: the activation table's row
of gelu names no cuBLASLt epilogue); its split entries run the product with the BIAS
epilogue here and our exact GELU kernel after it. The launcher of the
cuBLASLt entries (runtime/cuda/launchers/cublaslt.py) plans its matmuls here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicfc.dialects.activation_table import ACTIVATION_FACTS
from aicfc.runtime.cuda.abi import CallbackLaunch, CudaKernelError, Launch, describe
from aicfc.runtime.cuda.launchers.gemm import Gemm

WORKSPACE_BYTES = 32 << 20
"""Bytes of each cuBLASLt workspace (the size cuBLAS recommends for Hopper)."""

WORKSPACES = 2
"""Workspaces per backend, handed to successive planned launches in turn, so that two
cuBLASLt launches next to each other in a step (a layer's dX and dW) can run on parallel
graph branches; launches that share one are ordered (`Launch.scratch`)."""

CUDA_R_32F = 0
"""cudaDataType_t of float32 (library_types.h)."""

DATA_TYPES = {"float32": CUDA_R_32F, "float16": 2, "bfloat16": 14}
"""cudaDataType_t of each storage dtype (library_types.h: CUDA_R_16F = 2, CUDA_R_16BF = 14).
A bf16/f16 product reads and writes its dtype (the bias too, cuBLASLt's default bias type
for such a D) and accumulates and runs its epilogue in fp32 (CUBLAS_COMPUTE_32F, the
scale type f32). A wide one (dialects/wide_results.py) reads bf16/f16 A and B and writes
a float32 C/D with a float32 bias (the bias type defaults to D's), a combination of
cublasLtMatmul's supported-types table (A/B 16BF or 16F, C/D 32F, COMPUTE_32F)."""

EPILOGUES: dict[str, tuple[str, str]] = {
    "none": ("DEFAULT", "BIAS"),
    **{f.name: f.cublaslt for f in ACTIVATION_FACTS if f.cublaslt is not None},
}
"""Activation -> cublasLtEpilogue_t names (without, with a bias) that fuse it: none, and the
activations whose row of the activation table names one."""


def available() -> str | None:
    """Why cuBLASLt through nvmath-python cannot be used here, or None when it can."""
    try:
        import nvmath.bindings.cublasLt  # noqa: F401
    except Exception as e:  # ImportError, or the library failing to load
        return f"nvmath-python's cuBLASLt bindings are not usable ({type(e).__name__}: {e})"
    return None


def _alignment(ptr: int) -> int:
    """The largest power of two dividing `ptr`, capped at 256 (cuBLASLt's default assumption)."""
    a = 256
    while a > 1 and ptr % a:
        a //= 2
    return a


class CublasLt:
    """A cuBLASLt handle and its workspaces, owned by one CuPy backend (one device)."""

    def __init__(self) -> None:
        import cupy
        import nvmath.bindings.cublas as cublas
        import nvmath.bindings.cublasLt as lt

        self.lt = lt
        self.cublas = cublas
        self.handle = lt.create()
        self.workspaces = [cupy.zeros(WORKSPACE_BYTES, dtype=np.uint8) for _ in range(WORKSPACES)]
        self._planned = 0

    def _set(self, setter: Any, dtype_of: Any, obj: int, attr: Any, value: int) -> None:
        buf = np.array([value], dtype=dtype_of(attr))
        setter(obj, attr, buf.ctypes.data, buf.itemsize)

    def plan(self, name: str, g: Gemm, d: Any, act: str, tf32: bool) -> Launch:
        """One cublasLtMatmul computing D = act(op(A) op(B) [+ bias]) (row-major, in D's
        storage dtype: float32, bfloat16 or float16, DATA_TYPES, or float32 D over bf16/f16
        A and B; fp32 accumulation) for the
        checked operands `g`, into `d` (its Y or its Z); `act` is a key of EPILOGUES."""
        lt, cublas = self.lt, self.cublas
        a, b, bias, ta, tb = g.a, g.b, g.bias, g.transpose_a, g.transpose_b
        m, n, k = g.m, g.n, g.k
        data = DATA_TYPES.get(np.dtype(d.dtype).name)
        ab = DATA_TYPES.get(np.dtype(a.dtype).name)
        same = np.dtype(a.dtype) == np.dtype(d.dtype)
        wide = data == CUDA_R_32F and ab not in (None, CUDA_R_32F)  # bf16/f16 A, B -> f32 D
        if (
            data is None
            or ab is None
            or np.dtype(b.dtype) != np.dtype(a.dtype)
            or (bias is not None and np.dtype(bias.dtype) != np.dtype(d.dtype))
            or not (same or wide)
        ):
            raise CudaKernelError(
                f'kernel "{name}": cuBLASLt runs float32, bfloat16 or float16 operands of one '
                "dtype (bf16/f16 A and B may write a float32 D, with a float32 bias), got "
                f"{describe([a, b, bias, d])}"
            )
        tf32 = tf32 and data == CUDA_R_32F and not wide
        compute = (
            cublas.ComputeType.COMPUTE_32F_FAST_TF32 if tf32 else cublas.ComputeType.COMPUTE_32F
        )
        desc = lt.matmul_desc_create(compute, CUDA_R_32F)  # the scale type: alpha, beta f32
        dattr = lt.MatmulDescAttribute
        dset = lt.matmul_desc_set_attribute
        ddt = lt.get_matmul_desc_attribute_dtype
        op_t, op_n = int(cublas.Operation.T), int(cublas.Operation.N)
        # cuBLASLt "A" = our B (stored [K, N] or [N, K]), cuBLASLt "B" = our A.
        self._set(dset, ddt, desc, dattr.TRANSA, op_t if tb else op_n)
        self._set(dset, ddt, desc, dattr.TRANSB, op_t if ta else op_n)
        epilogue = getattr(lt.Epilogue, EPILOGUES[act][int(bias is not None)])
        self._set(dset, ddt, desc, dattr.EPILOGUE, int(epilogue))
        if bias is not None:
            self._set(dset, ddt, desc, dattr.BIAS_POINTER, int(bias.data.ptr))
        lt_a = lt.matrix_layout_create(ab, k, n, k) if tb else lt.matrix_layout_create(ab, n, k, n)
        lt_b = lt.matrix_layout_create(ab, m, k, m) if ta else lt.matrix_layout_create(ab, k, m, k)
        lt_d = lt.matrix_layout_create(data, n, m, n)
        if g.batch > 1:  # strided-batched: product i reads A + i stride_a, B + i stride_b
            lattr = lt.MatrixLayoutAttribute
            lset, ldt = lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype
            for layout, stride in ((lt_a, g.stride_b), (lt_b, g.stride_a), (lt_d, m * n)):
                self._set(lset, ldt, layout, lattr.BATCH_COUNT, g.batch)
                self._set(lset, ldt, layout, lattr.STRIDED_BATCH_OFFSET, stride)
        pref = lt.matmul_preference_create()
        pattr = lt.MatmulPreferenceAttribute
        pset = lt.matmul_preference_set_attribute
        pdt = lt.get_matmul_preference_attribute_dtype
        self._set(pset, pdt, pref, pattr.MAX_WORKSPACE_BYTES, WORKSPACE_BYTES)
        for attr, arr in (
            (pattr.MIN_ALIGNMENT_A_BYTES, b),
            (pattr.MIN_ALIGNMENT_B_BYTES, a),
            (pattr.MIN_ALIGNMENT_C_BYTES, d),
            (pattr.MIN_ALIGNMENT_D_BYTES, d),
        ):
            self._set(pset, pdt, pref, attr, _alignment(int(arr.data.ptr)))
        heuristic = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, dtype=np.int32)
        shapes = describe([a, b, bias, d])
        try:
            lt.matmul_algo_get_heuristic(
                self.handle, desc, lt_a, lt_b, lt_d, lt_d, pref, 1, heuristic.ptr, count.ctypes.data
            )
        except Exception as e:  # nvmath's cuBLASLtError
            raise CudaKernelError(
                f'kernel "{name}" ({shapes}): cuBLASLt heuristic failed: {e}'
            ) from None
        if count[0] < 1:
            raise CudaKernelError(f'kernel "{name}" ({shapes}): cuBLASLt found no algorithm')
        alpha = np.ones(1, dtype=np.float32)
        beta = np.zeros(1, dtype=np.float32)
        turn = self._planned % WORKSPACES
        self._planned += 1
        handle, ws = self.handle, self.workspaces[turn]
        args = (
            desc,
            alpha.ctypes.data,
            int(b.data.ptr),
            lt_a,
            int(a.data.ptr),
            lt_b,
            beta.ctypes.data,
            int(d.data.ptr),
            lt_d,
            int(d.data.ptr),
            lt_d,
            heuristic.ptr,
            int(ws.data.ptr),
            WORKSPACE_BYTES,
        )

        def issue(stream: Any) -> None:
            lt.matmul(handle, *args, stream.ptr)

        keep = [alpha, beta, heuristic, a, b, bias, d, desc, lt_a, lt_b, lt_d, pref]
        return CallbackLaunch(
            name=name,
            shapes=shapes,
            issue=issue,
            keepalive=keep,
            scratch=(f"cublaslt-workspace:{turn}",),
        )
