"""The CUDA kernels of a transformer, as plain data (joined by runtime/registry_cuda.py).

Layer norm (and its add-fused form, each also with its output stored in bf16/f16) with
its gradient (and that gradient with the residual stream's added), the embedding and its gradient
(chunked, then combined), scaled dot-product attention (attention.cu's tiled kernels for
head dims 32, 64 and 128; attention_rows.cu's for any head dim up to 128) and the packed
form that reads the heads of one qkv [N, T, 3D] in place, each with its gradient, and the
cross-entropy of a language model's head (rows of at least MANY_CLASSES classes). The
layout ops of the unfused path (split, concat, scale, causal mask: elementwise.cu) stay
in runtime/registry_cuda.py with the other elementwise kernels. The entries follow
registry_cuda.py's conventions (its docstring: ABI, launch order, launchers).

Imports nothing but the registry's dataclasses (a launcher is named, never imported).
"""

from __future__ import annotations

from dataclasses import replace

from aicfc.runtime.registry import F32, Constraints, KernelSpec
from aicfc.runtime.registry import cuda_kernel as _k

_LABELS = ("i32", "i64")
_AUX = ("auxiliary",)
_LN_ABI = (("N", "int32_t"), ("D", "int32_t"), ("eps", "float"))
_ATTENTION_SCALARS = (
    ("scale", "float"),
    ("causal", "int32_t"),
    ("p", "double"),
    ("seed", "int64_t"),
)
_TILED_ABI = (("BH", "int32_t"), ("T", "int32_t"), *_ATTENTION_SCALARS)
_ROWS_ABI = (
    ("BH", "int32_t"),
    ("T", "int32_t"),
    ("S", "int32_t"),
    ("d", "int32_t"),
    *_ATTENTION_SCALARS,
)
ATTENTION_HEAD_DIMS = (32, 64, 128)
"""Head dims of attention.cu's tiled kernels; attention_rows.cu takes any d <= 128."""
ATTENTION_ROWS_MAX_D = 128
_HEAD_DIMS = ((0, 1, ATTENTION_ROWS_MAX_D),)
MANY_CLASSES = 33
"""cross_entropy.cu's team-per-row kernel takes rows of at least this many classes (a
language model's vocabulary); loss.cu's warp-per-row kernels keep the narrow heads."""
LAYER_NORM_MAX_D = 8192
"""layernorm.cu holds a row in registers: 16 elements a thread, at most 512 threads."""
_LN = Constraints(last_dim_range=((0, 1, LAYER_NORM_MAX_D),))

_LAYER_NORM = [
    _k("layer_norm_f32", "graph.layer_norm", "layernorm.cu", "aicfc_layer_norm_f32", _LN_ABI,
       constraints=_LN, launcher="launch_layer_norm"),
    _k("add_layer_norm_f32", "graph.add_layer_norm", "layernorm.cu", "aicfc_add_layer_norm_f32",
       _LN_ABI, constraints=_LN, flags=("fused",), launcher="launch_add_layer_norm"),
    _k("layer_norm_grad_f32", "autodiff.layer_norm_grad", "layernorm.cu",
       "aicfc_layer_norm_grad_f32", (("N", "int32_t"), ("D", "int32_t")), constraints=_LN,
       flags=("workspace",), launcher="launch_layer_norm_grad"),
    _k("layer_norm_param_grad_f32", "autodiff.layer_norm_grad", "layernorm.cu",
       "aicfc_layer_norm_param_grad_f32", (("blocks", "int32_t"), ("D", "int32_t")),
       flags=_AUX, launcher="launch_layer_norm_grad"),
]  # fmt: skip

# Layer norm with y stored in bf16/f16 over float32 operands (a narrow result,
# aicfc-fold-narrowing-casts; out_dtype names y's dtype): the f32 kernels' math and
# launch geometry, y rounded to nearest even as it is stored. graph.layer_norm's result #0
# is y (the entry's dtype); graph.add_layer_norm's is the f32 sum.
_LAYER_NORM_NARROW = [
    spec
    for low in ("bf16", "f16")
    for spec in (
        _k(f"layer_norm_f32_{low}", "graph.layer_norm", "layernorm.cu",
           f"aicfc_layer_norm_f32_{low}", _LN_ABI, (low,),
           constraints=replace(
               _LN, operand_dtypes=((0, ("f32",)),), param_values=(("out_dtype", (low,)),)
           ),
           launcher="launch_layer_norm"),
        _k(f"add_layer_norm_f32_{low}", "graph.add_layer_norm", "layernorm.cu",
           f"aicfc_add_layer_norm_f32_{low}", _LN_ABI,
           constraints=replace(_LN, param_values=(("out_dtype", (low,)),)), flags=("fused",),
           launcher="launch_add_layer_norm"),
    )
]  # fmt: skip

# The layer norm backward with the residual stream's gradient added to dx
# (autodiff.add_layer_norm_grad, aicfc-fuse): the f32 kernel with its dres operand; dw and
# db by layer_norm_param_grad_f32 above, as layer_norm_grad's.
_LAYER_NORM_GRAD_ADD = [
    _k("add_layer_norm_grad_f32", "autodiff.add_layer_norm_grad", "layernorm.cu",
       "aicfc_layer_norm_grad_f32", (("N", "int32_t"), ("D", "int32_t")), constraints=_LN,
       flags=("workspace", "fused"), launcher="launch_add_layer_norm_grad"),
]  # fmt: skip

_EMBEDDING = (
    [
        _k(f"embedding_f32_{lt}", "graph.embedding", "embedding.cu", f"aicfc_embedding_f32_{lt}",
           (("N", "int32_t"), ("V", "int32_t"), ("D", "int32_t")),
           constraints=Constraints(operand_dtypes=((0, (lt,)),)), launcher="launch_embedding")
        for lt in _LABELS
    ]
    + [
        _k(f"embedding_grad_f32_{lt}", "autodiff.embedding_grad", "embedding.cu",
           f"aicfc_embedding_grad_chunks_f32_{lt}",
           (("N", "int32_t"), ("V", "int32_t"), ("D", "int32_t"), ("chunk", "int32_t")),
           constraints=Constraints(operand_dtypes=((1, (lt,)),)), flags=("workspace",),
           launcher="launch_embedding_grad")
        for lt in _LABELS
    ]
    + [
        _k("embedding_grad_combine_f32", "autodiff.embedding_grad", "embedding.cu",
           "aicfc_embedding_grad_combine_f32",
           (("N", "int32_t"), ("V", "int32_t"), ("D", "int32_t"), ("chunk", "int32_t"),
            ("split", "int32_t")),
           flags=_AUX, launcher="launch_embedding_grad"),
    ]
)  # fmt: skip

_ATTENTION = (
    [
        KernelSpec(
            name=f"cuda.scaled_dot_product_attention{grad}_f32_d{d}",
            op=f"{op}",
            family="cuda",
            dtypes=F32,
            constraints=Constraints(
                last_dims=((0 if not grad else 1, (d,)),),
                equal_shapes=(0, 1, 2) if not grad else (0, 1, 2, 3, 4),
                operand_dtypes=((3 if not grad else 6, ("i64",)),),
            ),
            flags=frozenset({"fused", "workspace"} if grad else {"fused"}),
            abi=_TILED_ABI,
            source="attention.cu",
            symbol=f"aicfc_attention_{'bwd' if grad else 'fwd'}_f32_d{d}",
            launcher=f"attention:launch_attention{grad}",
            priority=1,  # over attention_rows.cu where both run it
        )
        for grad, op in (
            ("", "graph.scaled_dot_product_attention"),
            ("_grad", "autodiff.scaled_dot_product_attention_grad"),
        )
        for d in ATTENTION_HEAD_DIMS
    ]
    + [
        _k("attention_bwd_delta_f32", "autodiff.scaled_dot_product_attention_grad",
           "attention.cu", "aicfc_attention_bwd_delta_f32",
           (("rows", "int32_t"), ("d", "int32_t")), flags=_AUX,
           launcher="launch_attention_grad"),
        _k("scaled_dot_product_attention_rows_f32", "graph.scaled_dot_product_attention",
           "attention_rows.cu", "aicfc_attention_rows_fwd_f32", _ROWS_ABI,
           constraints=Constraints(operand_dtypes=((3, ("i64",)),), last_dim_range=_HEAD_DIMS),
           flags=("fused",),
           launcher="launch_attention_rows"),
        _k("scaled_dot_product_attention_grad_rows_f32",
           "autodiff.scaled_dot_product_attention_grad", "attention_rows.cu",
           "aicfc_attention_rows_bwd_dq_f32", _ROWS_ABI,
           constraints=Constraints(
               operand_dtypes=((6, ("i64",)),), last_dim_range=((1, 1, ATTENTION_ROWS_MAX_D),)
           ),
           flags=("fused", "workspace"), launcher="launch_attention_rows_grad"),
        _k("attention_rows_bwd_dkdv_f32", "autodiff.scaled_dot_product_attention_grad",
           "attention_rows.cu", "aicfc_attention_rows_bwd_dkdv_f32", _ROWS_ABI, flags=_AUX,
           launcher="launch_attention_rows_grad"),
    ]
)  # fmt: skip

# graph.packed_qkv_attention and its gradient: the same kernels on the heads of qkv [N, T,
# 3D] in place (attention_layout.cuh), so no split, transpose or concat runs around them.
_PACKED_ABI = (("BH", "int32_t"), ("H", "int32_t"), ("T", "int32_t"), *_ATTENTION_SCALARS)
_PACKED_ROWS_ABI = (*_PACKED_ABI[:3], ("d", "int32_t"), *_ATTENTION_SCALARS)
_PACKED_ATTENTION = (
    [
        KernelSpec(
            name=f"cuda.packed_qkv_attention{grad}_f32_d{d}",
            op=op,
            family="cuda",
            dtypes=F32,
            constraints=Constraints(
                packed_head_dim_range=((qkv, d, d),), operand_dtypes=((off, ("i64",)),)
            ),
            flags=frozenset({"fused", "workspace"} if grad else {"fused"}),
            abi=_PACKED_ABI,
            source="attention.cu",
            symbol=f"aicfc_attention_{'bwd' if grad else 'fwd'}_packed_f32_d{d}",
            launcher=f"attention:launch_packed_attention{grad}",
            priority=1,  # over attention_rows.cu where both run it
        )
        for grad, op, qkv, off in (
            ("", "graph.packed_qkv_attention", 0, 1),
            ("_grad", "autodiff.packed_qkv_attention_grad", 1, 4),
        )
        for d in ATTENTION_HEAD_DIMS
    ]
    + [
        _k("attention_bwd_delta_packed_f32", "autodiff.packed_qkv_attention_grad",
           "attention.cu", "aicfc_attention_bwd_delta_packed_f32",
           (("rows", "int32_t"), ("d", "int32_t"), ("H", "int32_t"), ("T", "int32_t")),
           flags=_AUX, launcher="launch_packed_attention_grad"),
        _k("packed_qkv_attention_rows_f32", "graph.packed_qkv_attention", "attention_rows.cu",
           "aicfc_attention_rows_fwd_packed_f32", _PACKED_ROWS_ABI,
           constraints=Constraints(
               operand_dtypes=((1, ("i64",)),),
               packed_head_dim_range=((0, 1, ATTENTION_ROWS_MAX_D),),
           ),
           flags=("fused",), launcher="launch_packed_attention_rows"),
        _k("packed_qkv_attention_grad_rows_f32", "autodiff.packed_qkv_attention_grad",
           "attention_rows.cu", "aicfc_attention_rows_bwd_dq_packed_f32", _PACKED_ROWS_ABI,
           constraints=Constraints(
               operand_dtypes=((4, ("i64",)),),
               packed_head_dim_range=((1, 1, ATTENTION_ROWS_MAX_D),),
           ),
           flags=("fused", "workspace"), launcher="launch_packed_attention_rows_grad"),
        _k("attention_rows_bwd_dkdv_packed_f32", "autodiff.packed_qkv_attention_grad",
           "attention_rows.cu", "aicfc_attention_rows_bwd_dkdv_packed_f32", _PACKED_ROWS_ABI,
           flags=_AUX, launcher="launch_packed_attention_rows_grad"),
    ]
)  # fmt: skip

# graph.packed_qkv_attention on tensor cores (attention_mma.cu): bf16 / f16 qkv, out, dout and
# dqkv, the lse and D float32 (the forward's lse a wide result: out_dtype "f32"). No
# dropout: p > 0 has no low-precision entry (the f32 rows above run it).
PACKED_ATTENTION_MMA_DTYPES = ("bf16", "f16")
"""Storage dtypes of attention_mma.cu's packed attention kernels."""
_MMA_ONLY = (("dropout_p", (0.0,)),)
_PACKED_ATTENTION_MMA = [
    KernelSpec(
        name=f"cuda.packed_qkv_attention{grad}_{dt}_d{d}",
        op=op,
        family="cuda",
        dtypes=(dt,),
        constraints=Constraints(
            packed_head_dim_range=((qkv, d, d),),
            operand_dtypes=((off, ("i64",)),) + (((3, ("f32",)),) if grad else ()),
            param_values=_MMA_ONLY + ((("out_dtype", ("f32",)),) if not grad else ()),
            min_arch=80,  # mma.sync m16n8k16 bf16 / f16
        ),
        flags=frozenset({"fused", "workspace"} if grad else {"fused"}),
        abi=_PACKED_ABI,
        source="attention_mma.cu",
        symbol=f"aicfc_attention_{'bwd' if grad else 'fwd'}_packed_{dt}_d{d}",
        launcher=f"attention_mma:launch_packed_attention{grad}",
        priority=1,
    )
    for grad, op, qkv, off in (
        ("", "graph.packed_qkv_attention", 0, 1),
        ("_grad", "autodiff.packed_qkv_attention_grad", 1, 4),
    )
    for dt in PACKED_ATTENTION_MMA_DTYPES
    for d in ATTENTION_HEAD_DIMS
] + [
    KernelSpec(
        name=f"cuda.attention_bwd_delta_packed_{dt}",
        op="autodiff.packed_qkv_attention_grad",
        family="cuda",
        dtypes=(dt,),
        constraints=Constraints(),
        flags=frozenset(_AUX),
        abi=(("rows", "int32_t"), ("d", "int32_t"), ("H", "int32_t"), ("T", "int32_t")),
        source="attention_mma.cu",
        symbol=f"aicfc_attention_bwd_delta_packed_{dt}",
        launcher="attention_mma:launch_packed_attention_grad",
    )
    for dt in PACKED_ATTENTION_MMA_DTYPES
]  # fmt: skip

_MANY_CLASSES = [
    KernelSpec(
        name=f"cuda.softmax_cross_entropy_f32_{lt}",
        op="autodiff.cross_entropy_with_grad",
        family="cuda",
        dtypes=F32,
        constraints=Constraints(
            operand_dtypes=((1, (lt,)),), last_dim_range=((0, MANY_CLASSES, 2**31 - 1),)
        ),
        flags=frozenset({"workspace", "fused"}),
        abi=(("N", "int32_t"), ("V", "int32_t")),
        source="cross_entropy.cu",
        symbol=f"aicfc_softmax_cross_entropy_f32_{lt}",
        launcher="cross_entropy:launch_softmax_cross_entropy",
        priority=1,  # over loss.cu's warp-per-row kernel for wide rows
    )
    for lt in _LABELS
]

TRANSFORMER_KERNELS: tuple[KernelSpec, ...] = (
    *_LAYER_NORM,
    *_LAYER_NORM_NARROW,
    *_LAYER_NORM_GRAD_ADD,
    *_EMBEDDING,
    *_ATTENTION,
    *_PACKED_ATTENTION,
    *_PACKED_ATTENTION_MMA,
    *_MANY_CLASSES,
)
"""The transformer's CUDA kernels; runtime/registry_cuda.py's KERNELS includes them."""
