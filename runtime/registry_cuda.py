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
the tanh approximation, not the exact erf GELU of graph.gelu, so cuBLASLt entries
refuse act=gelu: they take the activations whose row of the activation table
(dialects/activation_table.py) names a cuBLASLt epilogue, our GEMM kernels those
with an epilogue form, and every activation has its elementwise kernel and that of
its gradient. cuBLASLt has no row-alignment constraint: the GPU tests run it on rows
of 524 bytes (K = 131) and 40 bytes (N = 10) within the fp32 tolerance.

Imports nothing but the registry's dataclasses and the activation table (a launcher is
named, never imported).
"""

from __future__ import annotations

from dataclasses import replace

from aicfc.dialects.activation_table import (
    ACTIVATION_FACTS,
    CUBLASLT_ACTIVATIONS,
    EPILOGUE_ACTIVATIONS,
)
from aicfc.runtime.registry import Constraints, KernelSpec

F32 = ("f32",)
_I64_OFFSET = ((1, ("i64",)),)
_PAIRS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}
_GEMM_ABI = (("M", "int32_t"), ("N", "int32_t"), ("K", "int32_t"), ("act", "int32_t"))
_SKINNY_ABI = (*_GEMM_ABI, ("mode", "int32_t"))
_SPLIT_K_ABI = (*_GEMM_ABI, ("splits", "int32_t"), ("k_chunk", "int32_t"))
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
        Constraints(activations=_ACTS),
        0,
    )
    + _gemm_family(
        "f32",
        "aicfc_gemm_f32",
        "gemm:launch_gemm_128",
        frozenset(),
        Constraints(activations=_ACTS, min_mnk=(512, 512, 8)),
        0,
    )
    + _gemm_family(
        "tf32",
        "aicfc_gemm_tf32",
        "gemm_tf32:launch_gemm_tf32",
        frozenset({"tensor_core", "tf32"}),
        Constraints(activations=_ACTS, min_arch=80, requires=("tf32",)),
        0,
        source="gemm_tf32.cu",
    )
    + _gemm_family(
        "skinny",
        "aicfc_gemm_skinny_f32",
        "gemm_small:launch_gemm_skinny",
        frozenset({"skinny"}),
        Constraints(activations=_ACTS, max_short_side=SKINNY_SIDE),
        0,
        source="gemm_small.cu",
        abi=_SKINNY_ABI,
    )
    + _gemm_family(
        "splitk",
        "aicfc_gemm_splitk_f32",
        "gemm_small:launch_gemm_splitk",
        frozenset({"split_k", "workspace"}),
        Constraints(activations=_ACTS, max_numel=SPLIT_K_MAX_OUTPUTS),
        1,  # over the 64x64 tile when no rule decides (no cuBLASLt): fewer idle SMs
        source="gemm_small.cu",
        abi=_SPLIT_K_ABI,
    )
)

_CUBLASLT = tuple(
    KernelSpec(
        name=f"cuda.{_short(op)}_cublaslt_{prec}",
        op=op,
        family="cuda",
        dtypes=F32,
        constraints=Constraints(
            activations=("none", *CUBLASLT_ACTIVATIONS),
            min_arch=80 if prec == "tf32" else 0,
            requires=("cublaslt", "tf32") if prec == "tf32" else ("cublaslt",),
        ),
        flags=frozenset({"library", "cublaslt"})
        | (frozenset({"tensor_core", "tf32"}) if prec == "tf32" else frozenset())
        | op_flags,
        launcher="cublaslt:launch_cublaslt",
        priority=10,
    )
    for op, op_flags in _GEMM_FLAGS
    for prec in ("f32", "tf32")
)


def _k(
    name: str,
    op: str,
    source: str,
    symbol: str,
    abi: tuple[tuple[str, str], ...],
    dtypes: tuple[str, ...] = F32,
    constraints: Constraints | None = None,
    flags: tuple[str, ...] = (),
    *,
    launcher: str,
) -> KernelSpec:
    return KernelSpec(
        name=f"cuda.{name}",
        op=op,
        family="cuda",
        dtypes=dtypes,
        constraints=constraints or Constraints(),
        flags=frozenset(flags),
        abi=abi,
        source=source,
        symbol=symbol,
        launcher=f"{source.removesuffix('.cu')}:{launcher}",
    )


_N = (("n", "int64_t"),)
_INPLACE = ("inplace_ok",)

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
        for dt in ("f32", "i32", "i64")
    ]
    + [
        _k(
            "bias_add_f32",
            "graph.bias_add",
            "elementwise.cu",
            "aicfc_bias_add_f32",
            (("n", "int64_t"), ("C", "int64_t")),
            flags=_INPLACE,
            launcher="launch_bias_add",
        ),
    ]
    + [
        # aicfc_<act>_f32 (x, out, n) and aicfc_<act>_grad_f32 (dy, saved, dx, n), one pair
        # per activation (kernels/elementwise.cu instantiates them from kernels/common.cuh)
        _k(
            f"{name}_f32",
            op,
            "elementwise.cu",
            f"aicfc_{name}_f32",
            _N,
            flags=_INPLACE,
            launcher="launch_elementwise",
        )
        for names in (
            [(f.name, f.op) for f in ACTIVATION_FACTS],
            [(f"{f.name}_grad", f.grad_op) for f in ACTIVATION_FACTS],
        )
        for name, op in names
    ]
)

ACTIVATION_KERNELS: dict[str, str] = {
    "none": "cuda.copy",
    **{f.name: f"cuda.{f.name}_f32" for f in ACTIVATION_FACTS},
}
"""Activation -> the kernel that writes Y = act(Z) from Z (a copy for none)."""

_ANY = ("f16", "f32", "f64", "i1", "i32", "i64")
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
        "transpose_b64",
        "graph.transpose",
        "elementwise.cu",
        "aicfc_permute_b64",
        _PERMUTE_ABI,
        ("f64", "i64"),
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

_REDUCTIONS = [
    _k(
        "epilogue_grad_f32",
        "autodiff.epilogue_grad",
        "reduce.cu",
        "aicfc_epilogue_grad_f32",
        (("M", "int32_t"), ("N", "int32_t"), ("act", "int32_t")),
        flags=("fused",),
        constraints=Constraints(activations=EPILOGUE_ACTIVATIONS),
        launcher="launch_epilogue_grad",
    ),
    _k(
        "reduce_sum_f32",
        "graph.reduce_sum",
        "reduce.cu",
        "aicfc_reduce_sum_f32",
        (("outer", "int64_t"), ("R", "int64_t"), ("inner", "int64_t")),
        launcher="launch_reduce_sum",
    ),
]

_DROPOUT_ABI = (("p", "double"), ("seed", "int64_t"), ("n", "int64_t"))
_ADAM_ABI = (
    ("meta", "uint64_t"),
    ("ntensors", "int32_t"),
    ("nchunks", "int32_t"),
    ("chunk", "int32_t"),
    ("lr", "double"),
    ("beta1", "double"),
    ("beta2", "double"),
    ("eps", "double"),
    ("weight_decay", "double"),
    ("decoupled_weight_decay", "int32_t"),
)
_SGD_ABI = (
    ("lr", "double"),
    ("momentum", "double"),
    ("weight_decay", "double"),
    ("nesterov", "int32_t"),
    ("n", "int64_t"),
)

_RANDOM_AND_OPTIM = [
    _k(
        "dropout_f32",
        "graph.dropout",
        "dropout.cu",
        "aicfc_dropout_f32",
        _DROPOUT_ABI,
        constraints=Constraints(operand_dtypes=_I64_OFFSET),
        flags=_INPLACE,
        launcher="launch_dropout",
    ),
    _k(
        "dropout_grad_f32",
        "autodiff.dropout_grad",
        "dropout.cu",
        "aicfc_dropout_f32",
        _DROPOUT_ABI,
        constraints=Constraints(operand_dtypes=_I64_OFFSET),
        flags=_INPLACE,
        launcher="launch_dropout",
    ),
    _k(
        "adam_step_multi_tensor_f32",
        "autodiff.adam_step",
        "optim.cu",
        "aicfc_adam_multi_tensor_f32",
        _ADAM_ABI,
        flags=("inplace_ok", "multi_tensor", "workspace"),
        launcher="launch_adam",
    ),
    _k(
        "sgd_step_f32",
        "autodiff.sgd_step",
        "optim.cu",
        "aicfc_sgd_f32",
        _SGD_ABI,
        flags=_INPLACE,
        launcher="launch_sgd",
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
EPILOGUE_GRAD_KERNEL = "cuda.epilogue_grad_f32"
"""The kernel that a composite gemm_epilogue_grad runs after its product."""

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


def _composite(product: KernelSpec) -> KernelSpec:
    library = "library" in product.flags
    return KernelSpec(
        name=product.name.replace("cuda.matmul_", "cuda.gemm_epilogue_grad_", 1),
        op=_BGRAD,
        family="cuda",
        dtypes=product.dtypes,
        transposes=product.transposes,
        constraints=replace(product.constraints, activations=EPILOGUE_ACTIVATIONS),
        flags=(product.flags - {"workspace"}) | {"composite"},
        abi=() if library else _EPILOGUE_GRAD_ABI,
        source=None if library else "reduce.cu",
        symbol=None if library else "aicfc_epilogue_grad_f32",
        launcher="cublaslt:launch_cublaslt_then_epilogue_grad"
        if library
        else "reduce:launch_gemm_then_epilogue_grad",
        priority=product.priority,
    )


_PRODUCTS = [
    k for k in (*_GEMMS, *_CUBLASLT) if not k.flags & {"fused", "split_k"}
]  # the matmul entries (a gemm_epilogue's are "fused"); the split-K one's range is the
# one-launch kernel's
_COMPOSITE_EPILOGUE_GRADS = [_composite(k) for k in _PRODUCTS]
COMPOSITE_PRODUCTS: dict[str, str] = {
    c.name: k.name for c, k in zip(_COMPOSITE_EPILOGUE_GRADS, _PRODUCTS, strict=True)
}
"""A composite gemm_epilogue_grad entry -> the product kernel it runs first."""

KERNELS: tuple[KernelSpec, ...] = (
    *_GEMMS,
    *_CUBLASLT,
    *_ONE_LAUNCH_EPILOGUE_GRADS,
    *_COMPOSITE_EPILOGUE_GRADS,
    *_ELEMENTWISE,
    *_LAYOUT,
    *_LOSSES,
    *_REDUCTIONS,
    *_RANDOM_AND_OPTIM,
)
"""Every CUDA kernel; runtime/registry.py appends these to its REGISTRY."""
