"""The CUDA kernels of the registry, as plain data (joined by runtime/registry.py).

Each entry names its `kernels/*.cu` source and `extern "C"` symbol, the C ABI of
its scalars and its launcher ("<family>:<function>", a function of
runtime/cuda/launchers/<family>.py, where <family> is the source's name): the
launcher computes each scalar by name from the launch's shapes and `params`, and the
CuPy backend converts it to exactly that C type. Launch order is the registry's:
input buffers, output buffers (then a backend-owned workspace for entries flagged
"workspace"), then the scalars; a scalar named `meta` is the device address
(uint64_t) of a small int64 table that the backend builds and uploads at load
(permute strides, the multi-tensor list). Kernels flagged "library" call cuBLASLt
through nvmath-python and have no source.

GEMM entries come in one per (transpose_a, transpose_b) pair (symbol suffixes
_nn, _nt, _tn, _tt). Selection among them (runtime/selector.py rules): small
products go to our latency kernels of gemm_small.cu, the skinny one where a side
is at most 32 (a 10-wide layer: N = 10 forward, M = 10 for its dW, K = 10 for its
dX) and the split-K one where the result has at most 2^18 elements; larger ones
to cuBLASLt (needs capability "cublaslt": nvmath-python importable), else our own
SIMT kernels (the 128x128 tile only from 512x512 up, else the 64x64 one). TF32
kernels are refused unless the compile allows TF32 (`requires=("tf32",)`), and then
outscore the rest where the product fills their tiles. cuBLASLt's GELU epilogue is
the tanh approximation, not the exact erf GELU of graph.gelu, so the fused cuBLASLt
entries refuse act=gelu: they take the activations whose row of the activation table
(dialects/activation_table.py) names a cuBLASLt epilogue, our GEMM kernels those
with an epilogue form, and every activation has its elementwise kernel and that of
its gradient. The split cuBLASLt entries (flag "split_epilogue") take the epilogue
activations without a cuBLASLt epilogue as two launches, cuBLASLt's product + bias
into Z, then our activation kernel; they win on large products only (a GPT's MLP).
cuBLASLt has no row-alignment constraint: the GPU tests run it on rows of 524 bytes
(K = 131) and 40 bytes (N = 10) within the fp32 tolerance.

The transformer's kernels (layer norm, embedding, attention, a language model's
cross-entropy) are in runtime/registry_cuda_transformer.py, the tensor-core latency
GEMMs (mma.sync: bf16, f16, tf32) in runtime/registry_cuda_mma.py; KERNELS includes them.

Imports nothing but the registry's dataclasses, the activation table and those two files'
entries (a launcher is named, never imported).
"""

from __future__ import annotations

from dataclasses import replace

from aicfc.dialects.activation_table import (
    ACTIVATION_FACTS,
    CUBLASLT_ACTIVATIONS,
    EPILOGUE_ACTIVATIONS,
)
from aicfc.runtime.registry import F32, Constraints, KernelSpec
from aicfc.runtime.registry import cuda_kernel as _k
from aicfc.runtime.registry_cuda_mma import MMA_KERNELS
from aicfc.runtime.registry_cuda_transformer import TRANSFORMER_KERNELS

_I64_OFFSET = ((1, ("i64",)),)
_PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}
_GEMM_ABI = (("M", "int32_t"), ("N", "int32_t"), ("K", "int32_t"), ("act", "int32_t"))
_SKINNY_ABI = (*_GEMM_ABI, ("mode", "int32_t"))
_SPLIT_K_ABI = (*_GEMM_ABI, ("splits", "int32_t"), ("k_chunk", "int32_t"))
_BATCHED_ABI = (*_GEMM_ABI, ("stride_a", "int64_t"), ("stride_b", "int64_t"))
SKINNY_SIDE = 32
"""The skinny kernel's short side (M, N or K) is at most this (one warp's lanes)."""
SPLIT_K_MAX_OUTPUTS = 1 << 18
"""The split-K kernel's 32x32 tiles suit results up to this many elements."""
_ACTS = ("none", *EPILOGUE_ACTIVATIONS)
_GEMM_FLAGS: tuple[tuple[str, frozenset[str]], ...] = (
    ("graph.gemm_epilogue", frozenset({"fused"})),
    ("graph.matmul", frozenset()),
)
GEMM_OPS = tuple(op for op, _ in _GEMM_FLAGS)
"""The ops with several competing kernels (runtime/cuda/autotune.py times these)."""


def _short(op: str) -> str:
    return op.split(".", 1)[1]


def _gemm_family(
    tag: str,
    symbol: str,
    launcher: str,
    flags: frozenset[str],
    constraints: Constraints,
    priority: int,
    source: str = "gemm.cu",
    abi: tuple[tuple[str, str], ...] = _GEMM_ABI,
) -> list[KernelSpec]:
    return [
        KernelSpec(
            name=f"cuda.{_short(op)}_{tag}_{suffix}",
            op=op,
            family="cuda",
            dtypes=F32,
            transposes=(pair,),
            constraints=constraints,
            flags=flags | op_flags,
            abi=abi,
            source=source,
            symbol=f"{symbol}_{suffix}",
            launcher=launcher,
            priority=priority,
        )
        for op, op_flags in _GEMM_FLAGS
        for suffix, pair in _PAIRS.items()
    ]


_GEMMS = (
    _gemm_family(
        "f32_s64",
        "aicfc_gemm_f32_s64",
        "gemm:launch_gemm_64",
        frozenset(),
        Constraints(activations=_ACTS, gemm_batch=1),
        0,
    )
    + _gemm_family(
        "f32",
        "aicfc_gemm_f32",
        "gemm:launch_gemm_128",
        frozenset(),
        Constraints(activations=_ACTS, min_mnk=(512, 512, 8), gemm_batch=1),
        0,
    )
    + _gemm_family(
        "tf32",
        "aicfc_gemm_tf32",
        "gemm_tf32:launch_gemm_tf32",
        frozenset({"tensor_core", "tf32"}),
        Constraints(activations=_ACTS, min_arch=80, requires=("tf32",), gemm_batch=1),
        0,
        source="gemm_tf32.cu",
    )
    + _gemm_family(
        "skinny",
        "aicfc_gemm_skinny_f32",
        "gemm_small:launch_gemm_skinny",
        frozenset({"skinny"}),
        Constraints(activations=_ACTS, max_short_side=SKINNY_SIDE, gemm_batch=1),
        0,
        source="gemm_small.cu",
        abi=_SKINNY_ABI,
    )
    + _gemm_family(
        "splitk",
        "aicfc_gemm_splitk_f32",
        "gemm_small:launch_gemm_splitk",
        frozenset({"split_k", "workspace"}),
        Constraints(activations=_ACTS, max_numel=SPLIT_K_MAX_OUTPUTS, gemm_batch=1),
        1,  # over the 64x64 tile when no rule decides (no cuBLASLt): fewer idle SMs
        source="gemm_small.cu",
        abi=_SPLIT_K_ABI,
    )
    + _gemm_family(
        "batched_f32",
        "aicfc_gemm_batched_f32",
        "gemm:launch_gemm_batched",
        frozenset({"batched"}),
        Constraints(activations=_ACTS, gemm_batch=0),
        0,
        abi=_BATCHED_ABI,
    )
)

_CUBLASLT_ACTS = ("none", *CUBLASLT_ACTIVATIONS)
CUBLASLT_LOW_PRECISION = ("bf16", "f16")
"""Storage dtypes of the cuBLASLt entries besides f32: operands, bias and result in the
dtype, fp32 accumulation and epilogue (CUBLAS_COMPUTE_32F), the tensor cores' bf16/f16
products (runtime/cuda/cublaslt.py)."""

_CUBLASLT = tuple(
    KernelSpec(
        name=f"cuda.{_short(op)}_cublaslt_{prec}",
        op=op,
        family="cuda",
        dtypes=(prec,) if prec in CUBLASLT_LOW_PRECISION else F32,
        constraints=Constraints(
            # low precision: an activation without a cuBLASLt epilogue (exact GELU) runs as
            # our kernel after the GEMM + bias (only cuBLASLt does bf16/f16 products here)
            activations=(
                "none",
                *(_ACTS[1:] if prec in CUBLASLT_LOW_PRECISION else CUBLASLT_ACTIVATIONS),
            ),
            min_arch=80 if prec == "tf32" else 0,
            requires=("cublaslt", "tf32") if prec == "tf32" else ("cublaslt",),
            gemm_batch=0,
        ),
        flags=frozenset({"library", "cublaslt"})
        | (frozenset({"tensor_core", "tf32"}) if prec == "tf32" else frozenset())
        | (frozenset({"tensor_core"}) if prec in CUBLASLT_LOW_PRECISION else frozenset())
        | op_flags,
        launcher="cublaslt:launch_cublaslt",
        priority=10,
    )
    for op, op_flags in _GEMM_FLAGS
    for prec in ("f32", "tf32", *CUBLASLT_LOW_PRECISION)
)

WIDE_F32 = (("out_dtype", ("f32",)),)
"""param_values of the wide entries: they run only ops whose wide results are float32 over
bf16/f16 operands (dialects/wide_results.py, out_dtype "f32")."""

_CUBLASLT_WIDE = tuple(
    KernelSpec(
        name=f"cuda.{_short(op)}_cublaslt_{prec}_f32",
        op=op,
        family="cuda",
        dtypes=F32,
        constraints=Constraints(
            activations=_CUBLASLT_ACTS,
            operand_dtypes=((0, (prec,)), (1, (prec,))),
            param_values=WIDE_F32,
            requires=("cublaslt",),
            gemm_batch=0,
        ),
        flags=frozenset({"library", "cublaslt", "tensor_core"}) | op_flags,
        launcher="cublaslt:launch_cublaslt",
        priority=10,
    )
    for op, op_flags in _GEMM_FLAGS
    for prec in CUBLASLT_LOW_PRECISION
)
"""bf16/f16 products that write a float32 D (and add a float32 bias): the fp32
accumulation unrounded, one cublasLtMatmul (cuBLASLt's A/B 16BF or 16F, C/D 32F)."""

SPLIT_EPILOGUE_ACTIVATIONS = tuple(a for a in EPILOGUE_ACTIVATIONS if a not in CUBLASLT_ACTIVATIONS)
"""The epilogue activations cuBLASLt has no exact epilogue for (gelu, silu): the split
entries below run them as our elementwise kernel after cuBLASLt's product and bias."""

_CUBLASLT_SPLIT = tuple(
    KernelSpec(
        name=f"cuda.gemm_epilogue_cublaslt_then_act_{prec}",
        op="graph.gemm_epilogue",
        family="cuda",
        dtypes=F32,
        constraints=Constraints(
            activations=SPLIT_EPILOGUE_ACTIVATIONS,
            min_arch=80 if prec == "tf32" else 0,
            requires=("cublaslt", "tf32") if prec == "tf32" else ("cublaslt",),
            gemm_batch=0,
        ),
        flags=frozenset({"library", "cublaslt", "split_epilogue"})
        | (frozenset({"tensor_core", "tf32"}) if prec == "tf32" else frozenset()),
        launcher="cublaslt:launch_cublaslt_then_act",
        priority=10,
    )
    for prec in ("f32", "tf32")
)
"""gemm_epilogue with GELU or SiLU as two launches: cuBLASLt's product with its BIAS
epilogue into Z (the pre-activation the backward reads; into Y when Z is not kept), then
our kernel Y = act(Z), in place on Y without Z (flag "split_epilogue"; the selector lets
it win only on products large enough to pay for the second pass,
`selector.SPLIT_EPILOGUE_MIN_MACS`)."""


_N = (("n", "int64_t"),)
_INPLACE = ("inplace_ok",)

_LOW = ("bf16", "f16")
"""The low-precision storage dtypes of the elementwise kernels (fp32 math inside)."""

_ELEMENTWISE = (
    [
        _k(
            f"{op}_{dt}",
            f"graph.{op}",
            "elementwise.cu",
            f"aicfc_{op}_{dt}",
            _N,
            (dt,),
            flags=_INPLACE,
            launcher="launch_elementwise",
        )
        for op in ("add", "sub", "mul")
        for dt in ("f32", "i32", "i64", *_LOW)
    ]
    + [
        _k(
            f"bias_add_{dt}",
            "graph.bias_add",
            "elementwise.cu",
            f"aicfc_bias_add_{dt}",
            (("n", "int64_t"), ("C", "int64_t")),
            (dt,),
            flags=_INPLACE,
            launcher="launch_bias_add",
        )
        for dt in ("f32", *_LOW)
    ]
    + [
        # aicfc_<act>_<dt> (x, out, n) and aicfc_<act>_grad_<dt> (dy, saved, dx, n), one pair
        # per activation and dtype (kernels/elementwise.cu instantiates them from
        # kernels/common.cuh)
        _k(
            f"{name}_{dt}",
            op,
            "elementwise.cu",
            f"aicfc_{name}_{dt}",
            _N,
            (dt,),
            flags=_INPLACE,
            launcher="launch_elementwise",
        )
        for names in (
            [(f.name, f.op) for f in ACTIVATION_FACTS],
            [(f"{f.name}_grad", f.grad_op) for f in ACTIVATION_FACTS],
        )
        for name, op in names
        for dt in ("f32", *_LOW)
    ]
)

_CASTS = [
    _k(
        f"cast_{src}_{dst}",
        "graph.cast",
        "cast.cu",
        f"aicfc_cast_{src}_{dst}",
        _N,
        (dst,),
        Constraints(operand_dtypes=((0, (src,)),)),
        launcher="launch_cast",
    )
    for src, dst in (("f32", "bf16"), ("bf16", "f32"), ("f32", "f16"), ("f16", "f32"))
]
"""graph.cast between f32 and bf16/f16 (kernels/cast.cu: round to nearest even)."""

_AMP = [
    _k("unscale_grad_f32", "autodiff.unscale_grad", "amp.cu", "aicfc_unscale_grad_f32", _N,
       launcher="launch_unscale_grad"),
    _k("amp_clear_f32", "autodiff.unscale_grad", "amp.cu", "aicfc_amp_clear_f32", (),
       flags=("auxiliary",), launcher="launch_unscale_grad"),
    _k("amp_select_f32", "autodiff.amp_select", "amp.cu", "aicfc_amp_select_f32", _N,
       launcher="launch_amp_select"),
    _k("update_scale_f32", "autodiff.update_scale", "amp.cu", "aicfc_update_scale_f32",
       (("growth", "float"), ("backoff", "float"), ("interval", "int64_t")),
       launcher="launch_update_scale"),
]  # fmt: skip
"""fp16's dynamic loss scaling (kernels/amp.cu, torch GradScaler's semantics)."""

ACTIVATION_KERNELS: dict[str, str] = {
    "none": "cuda.copy",
    **{f.name: f"cuda.{f.name}_f32" for f in ACTIVATION_FACTS},
}
"""Activation -> the kernel that writes Y = act(Z) from Z (a copy for none), f32."""


def activation_kernel(act: str, dtype: str) -> str:
    """The kernel that writes Y = act(Z) from Z in `dtype` ("f32", "bf16", "f16")."""
    name = ACTIVATION_KERNELS[act]
    return name if act == "none" else f"{name.removesuffix('_f32')}_{dtype}"


_ANY = ("f16", "bf16", "f32", "f64", "i1", "i32", "i64")
_B16 = ("bf16", "f16")
"""The 2-byte dtypes: the layout kernels move their bits (aicfc_*_b16)."""
_PERMUTE_ABI = (("meta", "uint64_t"), ("rank", "int32_t"), ("n", "int64_t"))

_LAYOUT = [
    _k(
        "copy",
        "exec.copy",
        "elementwise.cu",
        "aicfc_copy_bytes",
        (("nbytes", "int64_t"),),
        _ANY,
        launcher="launch_copy",
    ),
    _k(
        "reshape",
        "graph.reshape",
        "elementwise.cu",
        "aicfc_copy_bytes",
        (("nbytes", "int64_t"),),
        _ANY,
        flags=("view",),  # the CuPy backend reads the input's bytes where that is safe
        launcher="launch_copy",
    ),
    _k(
        "transpose_b32",
        "graph.transpose",
        "elementwise.cu",
        "aicfc_permute_b32",
        _PERMUTE_ABI,
        ("f32", "i32"),
        launcher="launch_transpose",
    ),
    _k(
        "transpose_b16",
        "graph.transpose",
        "elementwise.cu",
        "aicfc_permute_b16",
        _PERMUTE_ABI,
        _B16,
        launcher="launch_transpose",
    ),
    _k(
        "transpose_b64",
        "graph.transpose",
        "elementwise.cu",
        "aicfc_permute_b64",
        _PERMUTE_ABI,
        ("f64", "i64"),
        launcher="launch_transpose",
    ),
    _k(
        "permute_rows_b32",
        "graph.transpose",
        "elementwise.cu",
        "aicfc_permute_rows_b32",
        _PERMUTE_ABI,
        ("f32", "i32"),
        flags=("auxiliary",),  # the transpose and broadcast launchers use it for whole rows
        launcher="launch_transpose",
    ),
    _k(
        "broadcast_to_b32",
        "graph.broadcast_to",
        "elementwise.cu",
        "aicfc_permute_b32",
        _PERMUTE_ABI,
        ("f32", "i32"),
        launcher="launch_broadcast_to",
    ),
    _k(
        "broadcast_to_b16",
        "graph.broadcast_to",
        "elementwise.cu",
        "aicfc_permute_b16",
        _PERMUTE_ABI,
        _B16,
        launcher="launch_broadcast_to",
    ),
    _k(
        "broadcast_to_b64",
        "graph.broadcast_to",
        "elementwise.cu",
        "aicfc_permute_b64",
        _PERMUTE_ABI,
        ("f64", "i64"),
        launcher="launch_broadcast_to",
    ),
]

_ROWS = (("rows", "int32_t"), ("C", "int32_t"))
_NC = (("N", "int32_t"), ("C", "int32_t"))

_LOSSES = (
    [
        _k(
            f"cross_entropy_f32_{lt}",
            "graph.cross_entropy",
            "loss.cu",
            f"aicfc_cross_entropy_f32_{lt}",
            _NC,
            constraints=Constraints(operand_dtypes=((1, (lt,)),)),
            flags=("workspace",),
            launcher="launch_cross_entropy",
        )
        for lt in ("i32", "i64")
    ]
    + [
        _k(
            f"cross_entropy_grad_f32_{lt}",
            "autodiff.cross_entropy_grad",
            "loss.cu",
            f"aicfc_cross_entropy_grad_f32_{lt}",
            _NC,
            constraints=Constraints(operand_dtypes=((1, (lt,)),)),
            launcher="launch_cross_entropy_grad",
        )
        for lt in ("i32", "i64")
    ]
    + [
        _k(
            f"cross_entropy_with_grad_f32_{lt}",
            "autodiff.cross_entropy_with_grad",
            "loss.cu",
            f"aicfc_cross_entropy_with_grad_f32_{lt}",
            _NC,
            constraints=Constraints(operand_dtypes=((1, (lt,)),)),
            flags=("workspace", "fused"),
            launcher="launch_cross_entropy_with_grad",
        )
        for lt in ("i32", "i64")
    ]
    + [
        _k(
            "softmax_f32",
            "graph.softmax",
            "loss.cu",
            "aicfc_softmax_f32",
            _ROWS,
            launcher="launch_softmax",
        ),
        _k(
            "softmax_grad_f32",
            "autodiff.softmax_grad",
            "loss.cu",
            "aicfc_softmax_grad_f32",
            _ROWS,
            launcher="launch_softmax",
        ),
        _k(
            "mse_loss_f32",
            "graph.mse_loss",
            "loss.cu",
            "aicfc_mse_loss_f32",
            _N,
            flags=("workspace",),
            launcher="launch_mse_loss",
        ),
        _k(
            "mse_loss_grad_f32",
            "autodiff.mse_loss_grad",
            "loss.cu",
            "aicfc_mse_loss_grad_f32",
            _N,
            launcher="launch_mse_loss_grad",
        ),
    ]
)

_REDUCE_SUM_ABI = (
    ("outer", "int64_t"),
    ("R", "int64_t"),
    ("inner", "int64_t"),
    ("rows", "int64_t"),
)
_EPILOGUE_GRAD_CHUNK_ABI = (
    ("M", "int32_t"),
    ("N", "int32_t"),
    ("act", "int32_t"),
    ("rows", "int32_t"),
)
_WIDE_REDUCTIONS = [
    spec
    for low in ("bf16", "f16")  # the wide ones: bf16/f16 in, the sums in float32 (reduce.cu)
    for spec in (
        _k(
            f"epilogue_grad_{low}_f32",
            "autodiff.epilogue_grad",
            "reduce.cu",
            f"aicfc_epilogue_grad_{low}_f32",
            _EPILOGUE_GRAD_CHUNK_ABI,
            (low,),
            flags=("fused", "workspace"),  # rows in chunks: f32 partials, as epilogue_grad_f32's
            constraints=Constraints(activations=EPILOGUE_ACTIVATIONS, param_values=WIDE_F32),
            launcher="launch_epilogue_grad",
        ),
        _k(
            f"reduce_sum_{low}_f32",
            "graph.reduce_sum",
            "reduce.cu",
            f"aicfc_reduce_sum_{low}_f32",
            _REDUCE_SUM_ABI,
            F32,
            flags=("workspace",),  # f32 partials, as reduce_sum_f32's
            constraints=Constraints(operand_dtypes=((0, (low,)),), param_values=WIDE_F32),
            launcher="launch_reduce_sum",
        ),
    )
]

_REDUCTIONS = [
    spec
    for dt in ("f32", "bf16", "f16")  # one template on the storage type (kernels/reduce.cu)
    # f32 splits its rows into chunks summed by sum_partials_f32 (a workspace); bf16/f16
    # run as one chunk so each result rounds once (launchers/reduce.py, may_split_rows)
    for spec in (
        _k(
            f"epilogue_grad_{dt}",
            "autodiff.epilogue_grad",
            "reduce.cu",
            f"aicfc_epilogue_grad_{dt}",
            (("M", "int32_t"), ("N", "int32_t"), ("act", "int32_t"), ("rows", "int32_t")),
            (dt,),
            flags=("fused", "workspace") if dt == "f32" else ("fused",),
            constraints=Constraints(activations=EPILOGUE_ACTIVATIONS),
            launcher="launch_epilogue_grad",
        ),
        _k(
            f"reduce_sum_{dt}",
            "graph.reduce_sum",
            "reduce.cu",
            f"aicfc_reduce_sum_{dt}",
            (("outer", "int64_t"), ("R", "int64_t"), ("inner", "int64_t"), ("rows", "int64_t")),
            (dt,),
            flags=("workspace",) if dt == "f32" else (),
            launcher="launch_reduce_sum",
        ),
    )
] + [
    _k(
        "sum_partials_f32",
        "autodiff.epilogue_grad",
        "reduce.cu",
        "aicfc_sum_partials_f32",
        (("chunks", "int32_t"), ("N", "int32_t")),
        flags=("auxiliary",),  # the second stage of epilogue_grad and reduce_sum over row chunks
        launcher="launch_epilogue_grad",
    ),
]

_DROPOUT_ABI = (("p", "double"), ("seed", "int64_t"), ("n", "int64_t"))
_ADAM_ABI = (
    ("meta", "uint64_t"),
    ("ntensors", "int32_t"),
    ("nchunks", "int32_t"),
    ("chunk", "int32_t"),
    ("decoupled_weight_decay", "int32_t"),
)
_SGD_ABI = (("nesterov", "int32_t"), ("n", "int64_t"))
_CLIP_ABI = (
    ("meta", "uint64_t"),
    ("ntensors", "int32_t"),
    ("nchunks", "int32_t"),
    ("chunk", "int32_t"),
    ("max_norm", "double"),
)
_F64_HYPERPARAMETERS = ("f64",)
# The hyperparameter operands are f64 and the control scalars f32 (the launchers check
# the variadic ones): adam_step's operands 5-9 and 10-11, sgd_step's 2-4 and 5-6;
# adam_step's optional low-precision copy (12) is bf16 or f16.
_ADAM_OPERANDS = (
    *((i, _F64_HYPERPARAMETERS) for i in range(5, 10)),
    (10, F32),
    (11, F32),
    (12, ("bf16", "f16")),
)
_SGD_OPERANDS = (*((i, _F64_HYPERPARAMETERS) for i in range(2, 5)), (5, F32), (6, F32))

_RANDOM_AND_OPTIM = [
    *(
        _k(
            f"{name}_{dt}",
            op,
            "dropout.cu",
            f"aicfc_dropout_{dt}",
            _DROPOUT_ABI,
            (dt,),
            constraints=Constraints(operand_dtypes=_I64_OFFSET),
            flags=_INPLACE,
            launcher="launch_dropout",
        )
        for dt in ("f32", "bf16", "f16")  # one template on the storage type
        for name, op in (("dropout", "graph.dropout"), ("dropout_grad", "autodiff.dropout_grad"))
    ),
    _k(
        "adam_step_multi_tensor_f32",
        "autodiff.adam_step",
        "optim.cu",
        "aicfc_adam_multi_tensor_f32",
        _ADAM_ABI,
        constraints=Constraints(operand_dtypes=_ADAM_OPERANDS),
        flags=("inplace_ok", "multi_tensor", "workspace"),
        launcher="launch_adam",
    ),
    _k(
        "sgd_step_f32",
        "autodiff.sgd_step",
        "optim.cu",
        "aicfc_sgd_f32",
        _SGD_ABI,
        constraints=Constraints(operand_dtypes=_SGD_OPERANDS),
        flags=_INPLACE,
        launcher="launch_sgd",
    ),
    _k(
        "lr_schedule",
        "autodiff.lr_schedule",
        "optim.cu",
        "aicfc_lr_schedule",
        (("meta", "uint64_t"), ("ngroups", "int32_t"), ("nsegments", "int32_t")),
        dtypes=("i64",),
        flags=_INPLACE,
        launcher="launch_lr_schedule",
    ),
    _k(
        "clip_grad_norm_f32",
        "autodiff.clip_grad_norm",
        "optim.cu",
        "aicfc_clip_grad_norm_f32",
        _CLIP_ABI,
        flags=("workspace",),
        launcher="launch_clip_grad_norm",
    ),
    _k(
        "accumulation_step",
        "autodiff.accumulation_step",
        "optim.cu",
        "aicfc_accumulation_step",
        (("every", "int64_t"),),
        dtypes=("i64",),
        flags=_INPLACE,
        launcher="launch_accumulation_step",
    ),
    _k(
        "accumulate_grad_f32",
        "autodiff.accumulate_grad",
        "optim.cu",
        "aicfc_accumulate_grad_f32",
        (("every", "int64_t"), ("n", "int64_t")),
        flags=_INPLACE,
        launcher="launch_accumulate_grad",
    ),
]

# autodiff.gemm_epilogue_grad: one launch (the split-K kernel with the backward epilogue)
# for products up to SPLIT_K_MAX_OUTPUTS outputs; for every other matmul kernel, a
# "composite" entry of two launches on one stream: that product kernel into dZ, then
# epilogue_grad in place. A composite copies its product's flags, constraints and
# priority, so the selector ranks the composites as it ranks the products: a large
# gemm_epilogue_grad runs the product the unfused program would run (COMPOSITE_PRODUCTS).
_BGRAD = "autodiff.gemm_epilogue_grad"
_BGRAD_ABI = (*_GEMM_ABI, ("splits", "int32_t"), ("k_chunk", "int32_t"))
_EPILOGUE_GRAD_ABI = (("M", "int32_t"), ("N", "int32_t"), ("act", "int32_t"))


def epilogue_grad_kernel(dtype: str, wide: bool = False) -> str:
    """The epilogue_grad kernel that a composite gemm_epilogue_grad of storage `dtype`
    ("f32", "bf16", "f16") runs in place on dZ after its product; `wide`: the one that
    writes dbias in float32 (bf16/f16 only)."""
    return f"cuda.epilogue_grad_{dtype}_f32" if wide else f"cuda.epilogue_grad_{dtype}"


_ONE_LAUNCH_EPILOGUE_GRADS = [
    KernelSpec(
        name=f"cuda.gemm_epilogue_grad_splitk_{suffix}",
        op=_BGRAD,
        family="cuda",
        dtypes=F32,
        transposes=(pair,),
        constraints=Constraints(activations=EPILOGUE_ACTIVATIONS, max_numel=SPLIT_K_MAX_OUTPUTS),
        flags=frozenset({"fused", "one_launch_epilogue_grad", "split_k", "workspace"}),
        abi=_BGRAD_ABI,
        source="gemm_small.cu",
        symbol=f"aicfc_gemm_epilogue_grad_f32_{suffix}",
        launcher="gemm_small:launch_gemm_epilogue_grad",
    )
    for suffix, pair in _PAIRS.items()
]


def _composite(product: KernelSpec, wide: bool = False) -> KernelSpec:
    """The composite gemm_epilogue_grad of `product`; `wide`: its dbias in float32 (a
    bf16/f16 product, then epilogue_grad_<dtype>_f32)."""
    library = "library" in product.flags
    name = product.name.replace("cuda.matmul_", "cuda.gemm_epilogue_grad_", 1)
    return KernelSpec(
        name=f"{name}_f32" if wide else name,
        op=_BGRAD,
        family="cuda",
        dtypes=product.dtypes,
        transposes=product.transposes,
        constraints=replace(
            product.constraints,
            activations=EPILOGUE_ACTIVATIONS,
            param_values=WIDE_F32 if wide else product.constraints.param_values,
        ),
        flags=(product.flags - {"workspace"}) | {"composite"},
        abi=() if library else _EPILOGUE_GRAD_ABI,
        source=None if library else "reduce.cu",
        symbol=None if library else f"aicfc_epilogue_grad_{product.dtypes[0]}",
        launcher="cublaslt:launch_cublaslt_then_epilogue_grad"
        if library
        else "reduce:launch_gemm_then_epilogue_grad",
        priority=product.priority,
    )


_PRODUCTS = [
    k for k in (*_GEMMS, *_CUBLASLT) if not k.flags & {"fused", "split_k", "batched"}
]  # the single matmul entries (a gemm_epilogue's are "fused"); the split-K one's range is the
# one-launch kernel's
_WIDE_PRODUCTS = [k for k in _PRODUCTS if k.dtypes[0] in CUBLASLT_LOW_PRECISION]
_COMPOSITE_EPILOGUE_GRADS = [_composite(k) for k in _PRODUCTS] + [
    _composite(k, wide=True) for k in _WIDE_PRODUCTS
]
COMPOSITE_PRODUCTS: dict[str, str] = {
    c.name: k.name
    for c, k in zip(_COMPOSITE_EPILOGUE_GRADS, [*_PRODUCTS, *_WIDE_PRODUCTS], strict=True)
}
"""A composite gemm_epilogue_grad entry -> the product kernel it runs first."""
# The layout ops of a transformer's unfused path (the rest of its kernels:
# runtime/registry_cuda_transformer.py).
_STRIDED_ABI = _PERMUTE_ABI
_LAYOUT_OPS = [
    _k("split_b32", "graph.split", "elementwise.cu", "aicfc_strided_copy_b32", _STRIDED_ABI,
       ("f32", "i32"), launcher="launch_split"),
    _k("split_b16", "graph.split", "elementwise.cu", "aicfc_strided_copy_b16", _STRIDED_ABI,
       _B16, launcher="launch_split"),
    _k("split_b64", "graph.split", "elementwise.cu", "aicfc_strided_copy_b64", _STRIDED_ABI,
       ("f64", "i64"), launcher="launch_split"),
    _k("concat_b32", "graph.concat", "elementwise.cu", "aicfc_strided_copy_b32", _STRIDED_ABI,
       ("f32", "i32"), launcher="launch_concat"),
    _k("concat_b16", "graph.concat", "elementwise.cu", "aicfc_strided_copy_b16", _STRIDED_ABI,
       _B16, launcher="launch_concat"),
    _k("concat_b64", "graph.concat", "elementwise.cu", "aicfc_strided_copy_b64", _STRIDED_ABI,
       ("f64", "i64"), launcher="launch_concat"),
    _k("scale_f32", "graph.scale", "elementwise.cu", "aicfc_scale_f32",
       (("n", "int64_t"), ("factor", "float")), flags=_INPLACE, launcher="launch_scale"),
    _k("causal_mask_f32", "graph.causal_mask", "elementwise.cu", "aicfc_causal_mask_f32",
       (("T", "int64_t"), ("S", "int64_t"), ("n", "int64_t"), ("fill", "float")),
       flags=_INPLACE, launcher="launch_causal_mask"),
]  # fmt: skip

# The whole train step of a small MLP in one persistent kernel (kernels/mlp_fused.cu;
# aicfc-fuse-train-step forms the op only where this entry takes it): batch and every
# layer's width at most 256 (the first dim of x and of each weight), at most 8 layers
# (10 + 8 * 8 operands), int32 labels, f64 hyperparameters and f32 control scalars.
# "grid_sync": its blocks wait for each other (a grid barrier), so they must all be
# resident (the launcher's grid is at most one block per multiprocessor).
MLP_STEP_MAX_ROWS = 256
_MLP_STEP = [
    _k(
        "mlp_train_step_f32",
        "autodiff.mlp_train_step",
        "mlp_fused.cu",
        "aicfc_mlp_train_step_f32",
        (("meta", "uint64_t"),),
        constraints=Constraints(
            operand_dtypes=(
                (1, ("i32",)),
                *((i, _F64_HYPERPARAMETERS) for i in range(3, 8)),
                (8, F32),
                (9, F32),
            ),
            max_matrix_rows=MLP_STEP_MAX_ROWS,
            max_operands=10 + 8 * 8,
        ),
        flags=("inplace_ok", "workspace", "grid_sync", "fused"),
        launcher="launch_mlp_train_step",
    ),
]

KERNELS: tuple[KernelSpec, ...] = (
    *_GEMMS,
    *_CUBLASLT,
    *_CUBLASLT_WIDE,
    *_CUBLASLT_SPLIT,
    *_ONE_LAUNCH_EPILOGUE_GRADS,
    *MMA_KERNELS,
    *_COMPOSITE_EPILOGUE_GRADS,
    *_ELEMENTWISE,
    *_CASTS,
    *_AMP,
    *_LAYOUT,
    *_LOSSES,
    *_REDUCTIONS,
    *_WIDE_REDUCTIONS,
    *_RANDOM_AND_OPTIM,
    *TRANSFORMER_KERNELS,
    *_LAYOUT_OPS,
    *_MLP_STEP,
)
"""Every CUDA kernel; runtime/registry.py appends these to its REGISTRY."""
