"""The CUDA launch ABI without a GPU: scalar conversion, the launchers, grouping,
and the errors a missing GPU or a broken kernel source gives.

These run everywhere (no device, no CuPy): `cuda_abi.get_function` is replaced
by a stub, and buffers by objects that have only a shape, dtype and address,
so each registry entry's launcher is checked to produce exactly the scalars
its ABI names, with their exact C types, in order after the buffers. The
compile errors are checked with a stand-in `cupy` module whose NVRTC fails. The
stand-ins are gpu/fake_launch.py's; the launches of whole lowered programs are checked in
test_abi_lowered_cpu.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from aicfc.dialects.activation_table import ACTIVATION_FACTS
from aicfc.runtime import registry
from aicfc.runtime.cuda import abi as cuda_abi
from aicfc.runtime.cuda.abi import CudaKernelError, pack_scalars, to_c_scalar
from aicfc.runtime.cuda.backend import CupyBackend
from aicfc.runtime.cuda.launch import group_steps, launcher_of, launches_for
from aicfc.runtime.cuda.launchers.elementwise import (
    broadcast_strides,
    permute_table,
    transpose_strides,
)
from aicfc.runtime.cuda.launchers.gemm import gemm_mnk
from aicfc.runtime.cuda.launchers.optim import launch_adam_group
from aicfc.runtime.cuda.launchers.reduce import reduce_view
from aicfc.runtime.errors import BackendUnavailable
from aicfc.runtime.registry_cuda import COMPOSITE_PRODUCTS, epilogue_grad_kernel
from aicfc.runtime.selector import gemm_dims
from gpu.fake_launch import (
    CublasLtCtx,
    FakeArray,
    FakeCtx,
    d,
    f,
    i,
    stub_kernels,  # noqa: F401  (autouse: no kernel is compiled)
)

# --- scalar conversion -----------------------------------------------------------


@pytest.mark.parametrize(
    ("ctype", "value", "expected"),
    [
        ("float", 0.5, np.float32(0.5)),
        ("double", 1e-3, np.float64(1e-3)),
        ("int32_t", 7, np.int32(7)),
        ("int64_t", 2**40, np.int64(2**40)),
        ("uint64_t", 2**63, np.uint64(2**63)),
        ("int32_t", True, np.int32(1)),
        ("int32_t", 3.0, np.int32(3)),
        ("bool", 1, np.bool_(True)),
    ],
)
def test_scalars_take_exactly_their_c_type(ctype, value, expected):
    got = to_c_scalar("k", "x", ctype, value)
    assert type(got) is type(expected) and got == expected


@pytest.mark.parametrize(
    ("ctype", "value", "message"),
    [
        ("int32_t", 2**31, "does not fit"),
        ("int32_t", 0.5, "non-integer"),
        ("float", "relu", "expected a number"),
        ("char*", 1, "unknown C type"),
    ],
)
def test_bad_scalars_are_errors_naming_kernel_and_parameter(ctype, value, message):
    pattern = re.escape(f"kernel \"k\": scalar 'x' ({ctype})") + ".*" + message
    with pytest.raises(CudaKernelError, match=pattern):
        to_c_scalar("k", "x", ctype, value)


def test_pack_scalars_follows_the_abi_order_and_names_a_missing_one():
    spec = registry.get("cuda.clip_grad_norm_f32")
    values = {"max_norm": 1.0, "chunk": 1024, "nchunks": 3, "ntensors": 2, "meta": 1 << 40}
    packed = pack_scalars(spec, values)
    assert [type(v) for v in packed] == [np.uint64] + [np.int32] * 3 + [np.float64]
    del values["max_norm"]
    with pytest.raises(CudaKernelError, match="its ABI lists scalar 'max_norm'"):
        pack_scalars(spec, values)


# --- every registry entry's launcher, with stub buffers ------------------------------


HYPER_ADAM = [d(), d(), d(), d(), d(), f(), f()]
"""lr, beta1, beta2, eps, weight_decay, grad_scale, apply."""
HYPER_SGD = [d(), d(), d(), f(), f()]
"""lr, momentum, weight_decay, grad_scale, apply."""
SCHEDULE = {"kinds": "linear,cosine", "milestones": (5,), "coefficients": (0.1, 1.0, 5.0, 0.0) * 2}


# op -> (inputs, outputs, params) of a representative launch
CASES: dict[str, tuple[list[Any], list[Any], dict[str, Any]]] = {
    "graph.matmul": ([f(8, 4), f(4, 6)], [f(8, 6)], {}),
    "graph.gemm_epilogue": ([f(8, 4), f(4, 6), f(6)], [f(8, 6), f(8, 6)], {"act": "gelu"}),
    "autodiff.epilogue_grad": ([f(8, 6), f(8, 6)], [f(8, 6), f(6)], {"act": "relu"}),
    "autodiff.gemm_epilogue_grad": (
        [f(8, 4), f(4, 6), f(8, 6)],
        [f(8, 6), f(6)],
        {"act": "relu"},
    ),
    "graph.reduce_sum": ([f(8, 6)], [f(6)], {"axes": (0,)}),
    "graph.cross_entropy": ([f(8, 10), i(8)], [f()], {}),
    "autodiff.cross_entropy_grad": ([f(8, 10), i(8), f()], [f(8, 10)], {}),
    "autodiff.cross_entropy_with_grad": ([f(8, 10), i(8), f()], [f(), f(8, 10), f(10)], {}),
    "graph.softmax": ([f(8, 10)], [f(8, 10)], {"axis": 1}),
    "autodiff.softmax_grad": ([f(8, 10), f(8, 10)], [f(8, 10)], {"axis": -1}),
    "graph.mse_loss": ([f(8, 3), f(8, 3)], [f()], {}),
    "autodiff.mse_loss_grad": ([f(8, 3), f(8, 3), f()], [f(8, 3)], {}),
    "graph.bias_add": ([f(8, 6), f(6)], [f(8, 6)], {}),
    "exec.copy": ([f(8, 6)], [f(8, 6)], {}),
    "graph.reshape": ([f(8, 6)], [f(48)], {"shape": (48,)}),
    "graph.transpose": ([f(2, 3, 4)], [f(4, 2, 3)], {"perm": (2, 0, 1)}),
    "graph.broadcast_to": ([f(3, 1)], [f(2, 3, 4)], {"shape": (2, 3, 4)}),
    "graph.dropout": ([f(8, 6), i(dtype=np.int64)], [f(8, 6)], {"p": 0.1, "seed": 3}),
    "autodiff.dropout_grad": ([f(8, 6), i(dtype=np.int64)], [f(8, 6)], {"p": 0.1, "seed": 3}),
    "autodiff.sgd_step": ([f(6), f(6), *HYPER_SGD, f(6)], [f(6), f(6)], {"nesterov": True}),
    "autodiff.adam_step": ([f(6), f(6), f(6), f(6), f(), *HYPER_ADAM], [f(6), f(6), f(6), f()], {}),
    "autodiff.mlp_train_step": (
        [
            f(8, 12),
            i(8),
            f(),
            *HYPER_ADAM[:7],
            *(f(6, 12), f(6, 12), f(6, 12), f()),
            f(6),
            f(6),
            f(6),
            f(),
            f(4, 6),
            f(4, 6),
            f(4, 6),
            f(),
        ],
        [f(), f(6, 12), f(6, 12), f(6, 12), f(), f(6), f(6), f(6), f(), *[f(4, 6)] * 3, f()],
        {"acts": "relu,none", "bias": (1, 0)},
    ),
    "autodiff.lr_schedule": (
        [i(dtype=np.int64), f(), d(), d()],
        [i(dtype=np.int64), d(), d()],
        SCHEDULE,
    ),
    "autodiff.clip_grad_norm": ([f(8, 6), f(6), f(3000)], [f(), f()], {"max_norm": 1.0}),
    "autodiff.accumulation_step": ([i(dtype=np.int64)], [i(dtype=np.int64), f()], {"every": 4}),
    "autodiff.accumulate_grad": ([f(8, 6), f(8, 6), f()], [f(8, 6), f(8, 6)], {"every": 4}),
    "graph.layer_norm": ([f(2, 5, 48), f(48), f(48)], [f(2, 5, 48), f(2, 5), f(2, 5)], {}),
    "graph.add_layer_norm": (
        [f(2, 5, 48), f(2, 5, 48), f(48), f(48)],
        [f(2, 5, 48), f(2, 5, 48), f(2, 5), f(2, 5)],
        {"eps": 1e-5},
    ),
    "autodiff.layer_norm_grad": (
        [f(2, 5, 48), f(2, 5, 48), f(2, 5), f(2, 5), f(48)],
        [f(2, 5, 48), f(48), f(48)],
        {},
    ),
    "autodiff.add_layer_norm_grad": (
        [f(2, 5, 48), f(2, 5, 48), f(2, 5, 48), f(2, 5), f(2, 5), f(48)],
        [f(2, 5, 48), f(48), f(48)],
        {},
    ),
    "graph.embedding": ([i(2, 5), f(65, 48)], [f(2, 5, 48)], {}),
    "autodiff.embedding_grad": ([f(2, 5, 48), i(2, 5)], [f(65, 48)], {"num_embeddings": 65}),
    "graph.scaled_dot_product_attention": (
        [f(2, 3, 70, 64), f(2, 3, 70, 64), f(2, 3, 70, 64), i(dtype=np.int64)],
        [f(2, 3, 70, 64), f(2, 3, 70)],
        {"causal": True, "dropout_p": 0.1, "seed": 3},
    ),
    "autodiff.scaled_dot_product_attention_grad": (
        [f(2, 3, 70, 64)] * 5 + [f(2, 3, 70), i(dtype=np.int64)],
        [f(2, 3, 70, 64)] * 3,
        {"causal": True, "dropout_p": 0.1, "seed": 3},
    ),
    # packed qkv [N, T, 3 H d] with H = 3 (head dim d filled in by `case`)
    "graph.packed_qkv_attention": (
        [i(dtype=np.int64)],
        [],
        {"num_heads": 3, "causal": True, "dropout_p": 0.1, "seed": 3},
    ),
    "autodiff.packed_qkv_attention_grad": (
        [i(dtype=np.int64)],
        [],
        {"num_heads": 3, "causal": True, "dropout_p": 0.1, "seed": 3},
    ),
    "graph.split": ([f(2, 5, 144)], [f(2, 5, 48)] * 3, {"axis": 2, "sizes": (48, 48, 48)}),
    "graph.concat": ([f(2, 5, 48)] * 3, [f(2, 5, 144)], {"axis": -1}),
    "graph.scale": ([f(8, 6)], [f(8, 6)], {"factor": 0.125}),
    "graph.causal_mask": ([f(2, 8, 6)], [f(2, 8, 6)], {}),
    "graph.cast": ([f(8, 6)], [f(8, 6)], {}),
    "autodiff.unscale_grad": ([f(8, 6), f()], [f(8, 6), f()], {}),
    "autodiff.amp_select": ([f(), f(8, 6), f(8, 6)], [f(8, 6)], {}),
    "autodiff.update_scale": ([f(), f(), f()], [f(), f()], {"growth_interval": 10}),
}
LAUNCHES = {
    "autodiff.unscale_grad": 2,
    "autodiff.layer_norm_grad": 2,
    "autodiff.add_layer_norm_grad": 2,
    "autodiff.embedding_grad": 2,
    "autodiff.scaled_dot_product_attention_grad": 2,
    "autodiff.packed_qkv_attention_grad": 2,
    "graph.split": 3,
    "graph.concat": 3,
}
"""Ops whose launcher binds more than one launch (the registry's auxiliary kernels, or a
strided copy per part)."""
UNARY = tuple(a.op for a in ACTIVATION_FACTS)
"""Every activation's forward op (the activation table's rows)."""
BINARY = ("graph.add", "graph.sub", "graph.mul", *(a.grad_op for a in ACTIVATION_FACTS))


def case(spec: registry.KernelSpec) -> tuple[list[Any], list[Any], dict[str, Any]]:
    dt = np.dtype(
        {"f32": np.float32, "i32": np.int32, "i64": np.int64}.get(spec.dtypes[0], np.float32)
    )
    if spec.op in UNARY:
        return [FakeArray((8, 6), dt)], [FakeArray((8, 6), dt)], {}
    if spec.op in BINARY:
        return [FakeArray((8, 6), dt)] * 2, [FakeArray((8, 6), dt)], {}
    ins, outs, params = CASES[spec.op]
    labels = np.int64 if spec.name.endswith("i64") else np.int32
    if spec.op in (
        "graph.cross_entropy",
        "autodiff.cross_entropy_grad",
        "autodiff.cross_entropy_with_grad",
    ):
        ins = [ins[0], i(8, dtype=labels), *ins[2:]]
        if spec.source == "cross_entropy.cu":  # a language model's head: V >= 33
            ins, outs = [f(8, 65), ins[1], ins[2]], [f(), f(8, 65)]
    if spec.op == "graph.embedding":
        ins = [i(2, 5, dtype=labels), ins[1]]
    if spec.op == "autodiff.embedding_grad":
        ins = [ins[0], i(2, 5, dtype=labels)]
    if spec.op.endswith("scaled_dot_product_attention_grad") and "rows" in spec.name:
        ins = [f(2, 3, 70, 16)] * 5 + ins[5:]  # a head dim the tiled kernels do not take
        outs = [f(2, 3, 70, 16)] * 3
    elif spec.op.endswith("scaled_dot_product_attention") and "rows" in spec.name:
        ins, outs = [f(2, 3, 70, 16)] * 3 + ins[3:], [f(2, 3, 70, 16), outs[1]]
    elif spec.op.endswith("scaled_dot_product_attention_grad"):
        d = int(spec.name.rsplit("_d", 1)[1])
        ins, outs = [f(2, 3, 70, d)] * 5 + ins[5:], [f(2, 3, 70, d)] * 3
    elif spec.op.endswith("scaled_dot_product_attention"):
        d = int(spec.name.rsplit("_d", 1)[1])
        ins, outs = [f(2, 3, 70, d)] * 3 + ins[3:], [f(2, 3, 70, d), outs[1]]
    if "packed_qkv_attention" in spec.op:
        d = 16 if "rows" in spec.name else int(spec.name.rsplit("_d", 1)[1])
        qkv, out, lse = f(2, 70, 9 * d), f(2, 70, 3 * d), f(2, 3, 70)
        if spec.op.endswith("_grad"):
            ins, outs = [out, qkv, out, lse, *ins], [qkv]
        else:
            ins, outs = [qkv, *ins], [out, lse]
    if spec.transposes:
        ta, tb = spec.transposes[0]
        params = {**params, "transpose_a": ta, "transpose_b": tb}
        a = f(4, 8) if ta else f(8, 4)
        b = f(6, 4) if tb else f(4, 6)
        ins = [a, b, *ins[2:]]
    return ins, outs, params


OWN_SOURCE = [
    k for k in registry.REGISTRY if k.family == "cuda" and not {"library", "auxiliary"} & k.flags
]


@pytest.mark.parametrize("spec", OWN_SOURCE, ids=lambda k: k.name)
def test_each_launcher_gives_buffers_then_exactly_its_abi_scalars(spec):
    """Every launch (the entry's own, and any auxiliary kernel's of its family) passes
    buffers, then exactly its kernel's ABI scalars in their C types. A "composite" entry
    runs its product kernel (COMPOSITE_PRODUCTS), then the epilogue_grad kernel its
    symbol names, each an entry of its own."""
    ins, outs, params = case(spec)
    launches = launches_for(spec, ins, outs, params, FakeCtx())
    if "composite" in spec.flags:
        product, follow = COMPOSITE_PRODUCTS[spec.name], epilogue_grad_kernel(spec.dtypes[0])
        assert [la.name for la in launches] == [product, follow]
        assert registry.get(follow).symbol == spec.symbol
    else:
        assert len(launches) == LAUNCHES.get(spec.op, 1)
        assert spec.name in [la.name for la in launches]
    for la in launches:
        kernel = registry.get(la.name)
        if "composite" not in spec.flags:
            assert kernel.source == spec.source
            assert kernel is spec or "auxiliary" in kernel.flags
        assert isinstance(la, cuda_abi.KernelLaunch) and la.function == f"<{kernel.symbol}>"
        scalars = la.args[len(la.args) - len(kernel.abi) :]
        c_types = [cuda_abi.C_SCALAR_TYPES[c] for _, c in kernel.abi]
        assert [type(s) for s in scalars] == c_types
        buffers = la.args[: len(la.args) - len(kernel.abi)]
        assert all(isinstance(b, FakeArray) or b == np.uint64(0) for b in buffers)
        assert all(g >= 1 for g in la.grid) and np.prod(la.block) <= 1024


def test_auxiliary_kernels_are_never_candidates_but_each_is_bound_by_an_entry():
    aux = [k for k in registry.REGISTRY if "auxiliary" in k.flags]
    assert aux
    for k in aux:
        assert k.name not in {c.name for c in registry.candidates(k.op, "cuda")}
        assert any(s.op == k.op and s.source == k.source for s in OWN_SOURCE), k.name


CUDA_KERNELS = [k for k in registry.REGISTRY if k.family == "cuda"]


@pytest.mark.parametrize("spec", CUDA_KERNELS, ids=lambda k: k.name)
def test_every_cuda_kernel_names_a_launcher_of_its_family(spec):
    module, _, function = (spec.launcher or "").partition(":")
    family = spec.source.removesuffix(".cu") if spec.source else "cublaslt"
    assert module == family, f"{spec.name}: launcher {spec.launcher} is not in {family}.py"
    module_of_family = importlib.import_module(f"aicfc.runtime.cuda.launchers.{family}")
    assert launcher_of(spec) is getattr(module_of_family, function)


def test_a_launcher_that_does_not_resolve_is_named():
    spec = registry.get("cuda.relu_f32")
    for reference, message in [
        ("nope:launch", "no module runtime/cuda/launchers/nope.py"),
        ("elementwise:launch_nope", "elementwise.py has no function 'launch_nope'"),
    ]:
        bad = dataclasses.replace(
            spec, source=None, flags=frozenset({"library"}), launcher=reference
        )
        with pytest.raises(CudaKernelError, match=rf'kernel "cuda.relu_f32": launcher .*{message}'):
            launches_for(bad, [f(8)], [f(8)], {}, FakeCtx())


COMPOSITES = [k for k in registry.REGISTRY if "composite" in k.flags]
STORAGE = {
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
}


@pytest.mark.parametrize("spec", COMPOSITES, ids=lambda k: k.name)
def test_a_composite_epilogue_grad_runs_the_epilogue_kernel_of_its_storage_dtype(spec):
    """cuBLASLt's composites too: a bf16 product's dZ [M, N] is 2 bytes an element, so the
    f32 epilogue_grad on it reads and writes past its end (an illegal address on the GPU,
    a NaN loss before that)."""
    dt = STORAGE[spec.dtypes[0]]
    ta, tb = spec.transposes[0] if spec.transposes else (False, False)
    a = FakeArray((4, 8) if ta else (8, 4), dt)
    b = FakeArray((6, 4) if tb else (4, 6), dt)
    ins = [a, b, FakeArray((8, 6), dt)]
    outs = [FakeArray((8, 6), dt), FakeArray((6,), dt)]
    params = {"act": "relu", "transpose_a": ta, "transpose_b": tb}
    launches = launches_for(spec, ins, outs, params, CublasLtCtx())
    assert launches[-1].name == f"cuda.epilogue_grad_{spec.dtypes[0]}"
    assert registry.get(launches[-1].name).dtypes == spec.dtypes


def test_cublaslt_entries_fuse_the_epilogue_or_keep_z_then_run_our_activation():
    spec = registry.get("cuda.gemm_epilogue_cublaslt_tf32")
    x, w, b, y, z = f(8, 4), f(4, 6), f(6), f(8, 6), f(8, 6)
    ctx = CublasLtCtx()
    (only,) = launches_for(spec, [x, w, b], [y], {"act": "relu"}, ctx)
    assert only.name == spec.name and ctx.lt.plans == [(spec.name, y, "relu", True)]
    ctx = CublasLtCtx()
    first, then = launches_for(spec, [x, w, b], [y, z], {"act": "relu"}, ctx)
    assert first.name == spec.name
    assert ctx.lt.plans == [(spec.name, z, "none", True)]  # GEMM + bias into Z
    assert isinstance(then, cuda_abi.KernelLaunch) and then.name == "cuda.relu_f32"
    assert then.args[:2] == (z, y)
    ctx = CublasLtCtx()
    strict = registry.get("cuda.gemm_epilogue_cublaslt_f32")
    _, copy = launches_for(strict, [x, w], [y, z], {}, ctx)
    assert ctx.lt.plans[0][2:] == ("none", False) and copy.name == "cuda.copy"
    with pytest.raises(CudaKernelError, match="cuBLASLt runs act none or relu, not gelu"):
        launches_for(spec, [x, w, b], [y], {"act": "gelu"}, CublasLtCtx())


@pytest.mark.parametrize("prec", ["f32", "tf32"])
@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_split_cublaslt_entries_run_the_product_and_bias_then_our_activation(act, prec):
    """A split entry: cuBLASLt's product + bias (no activation) into Z, then our act kernel
    from Z to Y; without Z, into Y and the activation in place on Y."""
    spec = registry.get(f"cuda.gemm_epilogue_cublaslt_then_act_{prec}")
    x, w, b, y, z = f(2, 8, 4), f(6, 4), f(6), f(2, 8, 6), f(2, 8, 6)
    params = {"act": act, "transpose_b": True}
    ctx = CublasLtCtx()
    first, then = launches_for(spec, [x, w, b], [y, z], params, ctx)
    assert first.name == spec.name and ctx.lt.plans == [(spec.name, z, "none", prec == "tf32")]
    assert isinstance(then, cuda_abi.KernelLaunch) and then.name == f"cuda.{act}_f32"
    assert then.args[:3] == (z, y, np.int64(2 * 8 * 6))
    ctx = CublasLtCtx()
    _, in_place = launches_for(spec, [x, w, b], [y], params, ctx)
    assert ctx.lt.plans == [(spec.name, y, "none", prec == "tf32")]
    assert isinstance(in_place, cuda_abi.KernelLaunch) and in_place.args[:2] == (y, y)
    with pytest.raises(CudaKernelError, match="act none is one cuBLASLt launch"):
        launches_for(spec, [x, w, b], [y, z], {"transpose_b": True}, CublasLtCtx())
    with pytest.raises(CudaKernelError, match=r"Z is float32\[2, 8, 5\], 80 elements"):
        launches_for(spec, [x, w, b], [y, f(2, 8, 5)], params, CublasLtCtx())


@pytest.mark.parametrize(
    ("m", "n", "chunks", "rows"),
    [(16384, 1536, 11, 1504), (2048, 512, 16, 128), (37, 45, 1, 64), (600, 45, 4, 160)],
    ids=["nanogpt_mlp", "gpt_tiny_mlp", "short", "ragged"],
)
def test_epilogue_grad_splits_its_rows_over_the_device(m, n, chunks, rows):
    """Chunks for ~4 blocks of 32 x 32 per SM over the N / 32 column tiles, at least 128
    rows each (worked by hand: nanoGPT's MLP has 48 tiles, 528 / 48 = 11 chunks of 1,490
    rows, 1,504 rounded to 32); one chunk writes dbias itself, more add a second launch."""
    spec = registry.get("cuda.epilogue_grad_f32")
    dbias = f(n)
    launches = launches_for(spec, [f(m, n), f(m, n)], [f(m, n), dbias], {"act": "gelu"}, FakeCtx())
    first = launches[0]
    assert isinstance(first, cuda_abi.KernelLaunch)
    assert first.grid == (-(-n // 32), chunks) and first.block == (32, 32)
    assert first.args[4:] == (np.int32(m), np.int32(n), np.int32(2), np.int32(rows))
    assert (chunks - 1) * rows < m <= chunks * rows
    if chunks == 1:
        assert len(launches) == 1 and first.args[3] is dbias
        return
    _, second = launches
    partial = first.args[3]
    assert partial is not dbias and partial.shape == (4 * chunks * n,)
    assert isinstance(second, cuda_abi.KernelLaunch) and second.name == "cuda.sum_partials_f32"
    assert second.args == (partial, dbias, np.int32(chunks), np.int32(n))
    assert second.grid == (-(-n // 256),) and second.block == (256,)


def test_gemm_scalars_and_grid():
    spec = registry.get("cuda.gemm_epilogue_f32_s64_nt")
    la = launches_for(
        spec,
        [f(130, 40), f(70, 40), f(70)],
        [f(130, 70)],
        {"act": "relu", "transpose_b": True},
        FakeCtx(),
    )[0]
    assert isinstance(la, cuda_abi.KernelLaunch)
    assert la.args[4] == np.uint64(0)  # no pre-activation output: a null pointer
    assert la.args[5:] == (np.int32(130), np.int32(70), np.int32(40), np.int32(1))
    assert la.grid == (2, 3)


# kernel -> (inputs, outputs, params, the error) of a launch whose buffers do not fit it
# (hand-written exec IR): every one is refused at load, before a kernel could read or
# write out of bounds.
BAD_BUFFERS: dict[str, tuple[list[Any], list[Any], dict[str, Any], str]] = {
    "cuda.gemm_epilogue_f32_s64_nn": (
        [f(8, 4), f(4, 6), f(6)],
        [f(8, 5)],
        {},
        r"Y is float32\[8, 5\], 40 elements; the launch needs 48",
    ),
    "cuda.gemm_epilogue_skinny_nn": (
        [f(8, 4), f(4, 6), f(6)],
        [f(8, 6), f(6, 6)],
        {},
        r"Z is float32\[6, 6\]",
    ),
    "cuda.gemm_epilogue_splitk_nt": (
        [f(8, 4), f(6, 4), f(8)],
        [f(8, 6)],
        {"transpose_b": True},
        r"bias is float32\[8\], 8 elements; the launch needs 6",
    ),
    "cuda.matmul_f32_s64_nn": (
        [f(2, 8, 4), f(2, 4, 6)],
        [f(2, 8, 6)],
        {},
        r"operands \[2, 8, 4\] and \[2, 4, 6\] are a batch of 2 products; this kernel runs one",
    ),
    "cuda.matmul_batched_f32_tn": (
        [f(2, 8, 4), f(2, 8, 6)],
        [f(2, 8, 6)],
        {"transpose_a": True},
        r"Y is float32\[2, 8, 6\], 96 elements; the launch needs 48",
    ),
    "cuda.matmul_batched_f32_nn": (
        [f(2, 3, 8, 4), f(3, 4, 6)],
        [f(2, 3, 8, 6)],
        {},
        r"GEMM operands \[2, 3, 8, 4\] and \[3, 4, 6\] are not matrices or strided batches of them",
    ),
    "cuda.epilogue_grad_f32": (
        [f(8, 6), f(8, 6)],
        [f(8, 6), f(8)],
        {"act": "relu"},
        "dbias is float32",
    ),
    "cuda.reduce_sum_f32": ([f(8, 6)], [f(8)], {"axes": (0,)}, "result is float32"),
    "cuda.cross_entropy_f32_i32": ([f(8, 10), i(7)], [f()], {}, "labels is int32"),
    "cuda.cross_entropy_grad_f32_i32": (
        [f(8, 10), i(8), f()],
        [f(8, 9)],
        {},
        "dlogits is float32",
    ),
    "cuda.cross_entropy_with_grad_f32_i32": (
        [f(8, 10), i(8), f()],
        [f(), f(8, 10), f(8)],
        {},
        r"dbias is float32\[8\]",
    ),
    "cuda.softmax_grad_f32": (
        [f(8, 10), f(8, 10)],
        [f(4, 10)],
        {"axis": -1},
        "result #0 is float32",
    ),
    "cuda.mse_loss_f32": ([f(8, 3), f(8, 2)], [f()], {}, "operand #1 is float32"),
    "cuda.add_f32": ([f(8, 6), f(6)], [f(8, 6)], {}, "operand #1 is float32"),
    "cuda.bias_add_f32": ([f(8, 6), f(8)], [f(8, 6)], {}, r"bias is float32\[8\]"),
    "cuda.copy": ([f(8, 6)], [f(8, 5)], {}, "copies 192 bytes into float32"),
    "cuda.transpose_b32": (
        [f(2, 3, 4)],
        [f(4, 3, 2)],
        {"perm": (2, 0, 1)},
        r"perm \(2, 0, 1\) does not take \[2, 3, 4\] to \[4, 3, 2\]",
    ),
    "cuda.broadcast_to_b32": (
        [f(3, 2)],
        [f(2, 3, 4)],
        {"shape": (2, 3, 4)},
        r"\[3, 2\] does not broadcast to \[2, 3, 4\]",
    ),
    "cuda.dropout_f32": (
        [f(8, 6), i(dtype=np.int64)],
        [f(8, 5)],
        {"p": 0.1, "seed": 3},
        "x is float32",
    ),
    "cuda.sgd_step_f32": (
        [f(6), f(6), *HYPER_SGD, f(6)],
        [f(6)],
        {},
        "a momentum buffer needs both its value and its next value",
    ),
    "cuda.sgd_step_f32 ": (
        [f(6), f(6), f(), d(), d(), f(), f()],
        [f(6)],
        {},
        r"lr must be a float64 scalar, got float32\[\]",
    ),
    "cuda.lr_schedule": (
        [i(dtype=np.int64), f(), d()],
        [i(dtype=np.int64), d(), d()],
        SCHEDULE,
        "one lr result per initial_lr",
    ),
    "cuda.clip_grad_norm_f32": (
        [f(8, 6), FakeArray((6,), np.dtype(np.float64))],
        [f(), f()],
        {"max_norm": 1.0},
        r"gradient #1 must be float32, got float64\[6\]",
    ),
    # hand-written IR without the attribute: an error naming it, not float(None)'s TypeError
    "cuda.clip_grad_norm_f32 ": (
        [f(8, 6)],
        [f(), f()],
        {},
        "parameter max_norm = None is not a number",
    ),
    "cuda.clip_grad_norm_f32  ": (
        [f(8, 6)],
        [f(), f()],
        {"max_norm": 0.0},
        "max_norm = 0.0 is not a positive finite number",
    ),
    "cuda.accumulation_step": (
        [i(dtype=np.int64)],
        [i(dtype=np.int64), f()],
        {"every": 0},
        "every = 0 is below 1",
    ),
    "cuda.accumulation_step ": (
        [i(dtype=np.int64)],
        [i(dtype=np.int64), f()],
        {},
        "parameter every = None is not a number",
    ),
    "cuda.dropout_f32 ": (
        [f(8, 6), i(dtype=np.int64)],
        [f(8, 6)],
        {"p": 0.1},
        "parameter seed = None is not a number",
    ),
    "cuda.accumulate_grad_f32": (
        [f(8, 6), f(8, 5), f()],
        [f(8, 6), f(8, 6)],
        {"every": 2},
        "operand #1 is float32",
    ),
    # The tiled attention kernels are one symbol per head dim: the d = 64 one must not
    # run a d = 32 problem (it would read 64 columns a row), though 32 has a kernel too.
    "cuda.scaled_dot_product_attention_f32_d64": (
        [f(2, 3, 70, 32)] * 3,
        [f(2, 3, 70, 32), f(2, 3, 70)],
        {},
        "head dim 32; the kernel is compiled for 64",
    ),
    "cuda.scaled_dot_product_attention_grad_f32_d128": (
        [f(2, 3, 70, 64)] * 5 + [f(2, 3, 70)],
        [f(2, 3, 70, 64)] * 3,
        {},
        "head dim 64; the kernel is compiled for 128",
    ),
}


@pytest.mark.parametrize("case_name", list(BAD_BUFFERS))
def test_buffers_that_do_not_fit_the_kernel_are_refused_naming_it(case_name):
    kernel = case_name.strip()  # a trailing space: a second case of the kernel
    ins, outs, params, message = BAD_BUFFERS[case_name]
    with pytest.raises(CudaKernelError, match=re.escape(f'kernel "{kernel}": ') + message):
        launches_for(registry.get(kernel), ins, outs, params, FakeCtx())


def test_a_buffer_count_the_kernel_does_not_take_is_refused_naming_it():
    spec = registry.get("cuda.cross_entropy_grad_f32_i32")
    with pytest.raises(
        CudaKernelError,
        match=r'kernel "cuda.cross_entropy_grad_f32_i32" cannot run on inputs '
        r"\(float32\[8, 10\], int32\[8\]\) and outputs \(float32\[8, 10\]\)",
    ):
        launches_for(spec, [f(8, 10), i(8)], [f(8, 10)], {}, FakeCtx())
    adam = registry.get("cuda.adam_step_multi_tensor_f32")
    with pytest.raises(CudaKernelError, match="takes param, grad, exp_avg, exp_avg_sq, step, lr"):
        launch_adam_group(adam, [([f(6), f(6)], [f(6)])], {}, FakeCtx())


def test_linear_on_rank_3_inputs_folds_the_leading_dims_into_one_product():
    spec = registry.get("cuda.gemm_epilogue_f32_s64_nt")
    (la,) = launches_for(
        spec, [f(4, 33, 40), f(70, 40), f(70)], [f(4, 33, 70)], {"transpose_b": True}, FakeCtx()
    )
    assert isinstance(la, cuda_abi.KernelLaunch)
    assert la.args[5:8] == (np.int32(132), np.int32(70), np.int32(40))  # M = 4 x 33
    assert la.grid == (2, 3)


@pytest.mark.parametrize(
    ("a", "b", "ta", "tb", "dims"),
    [
        ((6, 5, 8, 4), (6, 5, 4, 3), False, False, (30, 8, 3, 4, 32, 12)),
        ((6, 5, 4, 8), (6, 5, 3, 4), True, True, (30, 8, 3, 4, 32, 12)),
        ((8, 4), (7, 4, 3), False, False, (7, 8, 3, 4, 0, 12)),  # A broadcast: stride 0
        ((1, 5, 8, 4), (6, 5, 4, 3), False, False, None),  # part of A's batch dims broadcast
        ((3, 8, 4), (8, 3), True, False, (3, 4, 3, 8, 32, 0)),  # transposed A cannot fold
    ],
)
def test_batched_products_become_strided_batches(a, b, ta, tb, dims):
    spec = registry.get(f"cuda.matmul_batched_f32_{'t' if ta else 'n'}{'t' if tb else 'n'}")
    g = gemm_dims(a, b, ta, tb)
    if dims is None:
        assert g is None
        return
    batch, m, n, k, sa, sb = dims
    assert (g.batch, g.m, g.n, g.k, g.stride_a, g.stride_b) == dims
    out = f(batch * m * n)
    (la,) = launches_for(
        spec, [f(*a), f(*b)], [out], {"transpose_a": ta, "transpose_b": tb}, FakeCtx()
    )
    assert isinstance(la, cuda_abi.KernelLaunch)
    assert la.grid == (-(-n // 64), -(-m // 64), batch)
    assert la.args[5:] == (
        np.int32(m),
        np.int32(n),
        np.int32(k),
        np.int32(0),
        np.int64(sa),
        np.int64(sb),
    )


def test_gemm_operands_that_disagree_on_k_are_an_error():
    with pytest.raises(CudaKernelError, match=r"disagree on K"):
        gemm_mnk(f(8, 4), f(5, 6), False, False)


def test_permute_tables_for_transpose_and_broadcast():
    t = permute_table(transpose_strides, (2, 3, 4), (4, 2, 3), {"perm": (2, 0, 1)})
    assert t.tolist() == [4, 2, 3, 1, 12, 4]
    b = permute_table(broadcast_strides, (3, 1), (2, 3, 4), {})
    assert b.tolist() == [2, 3, 4, 0, 1, 0]


def test_reduce_view():
    assert reduce_view((4, 5, 6), (1, 2)) == (4, 30, 1)
    assert reduce_view((4, 5, 6), (-3,)) == (1, 4, 30)
    with pytest.raises(CudaKernelError, match="contiguous run"):
        reduce_view((4, 5, 6), (0, 2))


def test_adam_steps_with_equal_params_group_into_one_launch():
    adam = registry.get("cuda.adam_step_multi_tensor_f32")
    relu = registry.get("cuda.relu_f32")
    p1, p2 = {}, {"decoupled_weight_decay": True}
    groups = group_steps([relu, adam, adam, None, adam, adam, adam], [{}, p1, p1, {}, p1, p1, p2])
    assert [g.indices for g in groups] == [(0,), (1, 2), (3,), (4, 5), (6,)]
    ctx = FakeCtx()
    group = [
        ([f(3000), f(3000), f(3000), f(3000), f(), *HYPER_ADAM], [f(3000), f(3000), f(3000), f()]),
        ([f(5), f(5), f(5), f(5), f(), *HYPER_ADAM], [f(5), f(5), f(5), f()]),
    ]
    (la,) = launch_adam_group(adam, group, p1, ctx)
    assert isinstance(la, cuda_abi.KernelLaunch)
    chunk = int(la.args[4])
    assert la.grid == (-(-3000 // chunk) + 1,)
    table = ctx.last_table  # per tensor: 12 inputs, 4 outputs, no low copy (0, 0, 0), its size
    assert table.size == 2 * 20 + 2 * la.grid[0] and table[19] == 3000 and table[39] == 5
    assert not table[16:19].any() and not table[36:39].any()


def test_fused_loss_sums_the_bias_gradient_itself_only_while_that_is_cheap():
    spec = registry.get("cuda.cross_entropy_with_grad_f32_i32")
    small = launches_for(spec, [f(128, 10), i(128), f()], [f(), f(128, 10), f(10)], {}, FakeCtx())
    assert len(small) == 1 and isinstance(small[0], cuda_abi.KernelLaunch)
    assert isinstance(small[0].args[5], FakeArray)  # dbias summed in the launch
    large = launches_for(
        spec, [f(1024, 1024), i(1024), f()], [f(), f(1024, 1024), f(1024)], {}, FakeCtx()
    )
    # 1024 rows of 1024 columns: 32 column tiles, 8 row chunks, then their sum
    assert [la.name for la in large] == [spec.name, "cuda.reduce_sum_f32", "cuda.sum_partials_f32"]
    assert large[0].args[5] == np.uint64(0)  # no dbias in the first launch


# --- a missing GPU, a kernel source that does not compile ----------------------------


def test_the_cupy_backend_where_no_gpu_is_usable_is_backend_unavailable(monkeypatch):
    """Built directly (not through get_backend), it says why instead of an ImportError."""
    reason = classmethod(lambda cls: "CuPy sees no CUDA device")
    monkeypatch.setattr(CupyBackend, "unavailable_reason", reason)
    with pytest.raises(
        BackendUnavailable, match="backend 'cupy' cannot run here: CuPy sees no CUDA device"
    ):
        CupyBackend()


@pytest.fixture
def failing_nvrtc(monkeypatch):
    """A stand-in `cupy` whose RawModule fails to compile with an NVRTC-style log."""

    class RawModule:
        def __init__(self, code: str, options: tuple[str, ...]):
            assert "AICFC_EXPORT_ABI_VERSION" in code and "-std=c++17" in options

        def compile(self) -> None:
            raise RuntimeError(
                'elementwise.cu(3): error: identifier "undefined_thing" is undefined'
            )

    fake = types.ModuleType("cupy")
    fake.RawModule = RawModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(cuda_abi, "_MODULES", {})


def test_a_kernel_source_that_fails_to_compile_is_an_error_with_the_compiler_log(failing_nvrtc):
    with pytest.raises(
        CudaKernelError,
        match=r'kernels/elementwise\.cu failed to compile: .*"undefined_thing" is undefined',
    ):
        cuda_abi.load_module("elementwise.cu")


def test_a_missing_kernel_source_is_an_error_naming_it(failing_nvrtc):
    with pytest.raises(CudaKernelError, match=r"kernel source 'absent\.cu' not found in"):
        cuda_abi.load_module("absent.cu")
