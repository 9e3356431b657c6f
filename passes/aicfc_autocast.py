"""aicfc-autocast: mixed precision as visible casts, chosen by a per-op policy.

Products run in a low-precision dtype (bf16 or fp16) with float32 accumulation, while
parameters stay float32 master weights and the numerically delicate ops (losses,
softmax, layer norm and its statistics, reductions) stay float32. The pass inserts
`graph.cast` ops where an op's policy wants an operand in another dtype and retypes
the op's float results to the dtype it computes in; nothing else changes, so the
casts are data flow that the later passes see, differentiate and fold:

- it runs on the forward graph (after the first aicfc-fuse, so the fused products
  and layers carry their policy) and before aicfc-expand-backward: the backward of
  each op is then built in its forward's dtypes, and the VJP of a cast casts the
  gradient back, so every parameter's gradient reaches the optimizer in float32;
- values that leave the graph ops (a function result, an autodiff op's operand: the
  loss of autodiff.backward, an optimizer's param) keep their declared type: a cast
  back is inserted where one changed;
- one cast per (value, dtype): a value cast twice reuses the first cast, and a cast
  back of a widened value reads the narrow original (widening is exact).

The policy follows PyTorch's autocast op lists (torch.amp, "CUDA Ops that can
autocast to float16/bfloat16" and "... to float32"); docs/passes.md writes it down:

    LOWER   every f32 float operand cast to the low dtype: matmul, gemm_epilogue
            (torch: mm, matmul, linear, addmm, bmm), and packed_qkv_attention (torch:
            scaled_dot_product_attention), whose lse stays float32 (`F32_RESULTS`: the
            row statistics its backward reads, as kernels/attention_mma.cu writes them)
    FP32    every low float operand cast to f32: softmax, reduce_sum, cross_entropy,
            mse_loss, layer_norm, add_layer_norm (torch: softmax, sum, nll_loss,
            mse_loss, layer_norm), and scaled_dot_product_attention (torch lists it as
            lower; ours has no low-precision kernel of the unpacked form yet)
    FOLLOW  float operands cast to operand 0's dtype: bias_add (the bias of torch's
            linear is cast with its product)
    PROMOTE (every other graph op) the widest float operand dtype (torch's type
            promotion: bf16 + f32 is f32; cat is on torch's promote list)

Only float32 values are lowered: float64 programs (the gradient checks) are left as
they are, and an op with an f64 operand is skipped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import graph as g
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.graph import CastOp, GraphOp
from aicfc.dialects.tensors import is_float, itemsize, tensor
from aicfc.dialects.wide_results import OUT_DTYPE_PARAM
from aicfc.passes.aicfc_lower_exec import problem_of
from aicfc.runtime import backend_names
from aicfc.runtime.registry import candidates
from aicfc.runtime.selector import DEFAULT_CAPABILITY, refusal

LOW_DTYPES: dict[str, Attribute] = {"bf16": BFloat16Type(), "fp16": Float16Type()}
"""The values of the dtype option and their element types."""

PIPELINE_PRECISIONS = ("fp32", *LOW_DTYPES)
"""The precisions of aicfc-train-pipeline's option (fp32: no autocast step)."""


class Policy(enum.Enum):
    """What dtype an op computes in under autocast (see the module docstring)."""

    LOWER = "lower"
    FP32 = "fp32"
    FOLLOW = "follow"
    PROMOTE = "promote"


AUTOCAST_POLICY: dict[type[Operation], Policy] = {
    g.MatmulOp: Policy.LOWER,
    g.GemmEpilogueOp: Policy.LOWER,
    g.BiasAddOp: Policy.FOLLOW,
    g.SoftmaxOp: Policy.FP32,
    g.ReduceSumOp: Policy.FP32,
    g.CrossEntropyOp: Policy.FP32,
    g.MseLossOp: Policy.FP32,
    g.LayerNormOp: Policy.FP32,
    g.AddLayerNormOp: Policy.FP32,
    g.ScaledDotProductAttentionOp: Policy.FP32,
    g.PackedQKVAttentionOp: Policy.LOWER,
}
"""Op class -> policy; a graph op not listed here is PROMOTE."""

F32_RESULTS: dict[type[Operation], tuple[int, ...]] = {
    g.PackedQKVAttentionOp: (1,),
}
"""Op class -> the indices of the float results that stay float32 when the op computes in
the low dtype (statistics its backward reads: packed attention's log-sum-exp)."""

LOWER_WHERE_KERNEL: frozenset[type[Operation]] = frozenset({g.PackedQKVAttentionOp})
"""LOWER ops that lower only where a low-precision CUDA kernel of the registry takes them
(packed attention: attention_mma.cu's head dims, no dropout); elsewhere they stay FP32,
where the float32 kernels take any head dim and dropout."""

_F32 = Float32Type()


def policy_of(op: Operation) -> Policy | None:
    """The op's policy, or None for ops the pass leaves alone (not a graph op, a cast,
    a constant)."""
    if not isinstance(op, GraphOp) or isinstance(op, CastOp | g.ConstantOp):
        return None
    return AUTOCAST_POLICY.get(type(op), Policy.PROMOTE)


def _element(v: SSAValue) -> Attribute | None:
    """The float element type of a tensor value, else None."""
    t = v.type
    return t.element_type if isinstance(t, TensorType) and is_float(t.element_type) else None


@dataclass
class _Casts:
    """Inserts and reuses the casts of one block; `declared` holds the element type each
    retyped result had before the pass (what a consumer outside the graph ops expects)."""

    made: dict[tuple[SSAValue, Attribute], SSAValue]
    declared: dict[SSAValue, Attribute]

    def to(self, v: SSAValue, dtype: Attribute, before: Operation) -> SSAValue:
        if _element(v) in (None, dtype):
            return v
        owner = v.owner
        if isinstance(owner, CastOp) and _element(owner.input) == dtype:
            src = _element(owner.input)
            if src is not None and itemsize(src) <= itemsize(_element(v) or src):
                return owner.input  # cast back of an exact widening
        key = (v, dtype)
        if key not in self.made:
            cast = CastOp(v, dtype)
            copy_location(before, cast)
            assert before.parent is not None
            before.parent.insert_op_before(cast, before)
            self.made[key] = cast.result
        return self.made[key]


def _low_kernel_takes(op: Operation, low: Attribute) -> bool:
    """True when a CUDA kernel of the registry takes `op` computed in `low` (its float32
    operands in `low`, its F32_RESULTS float32: a widened op, out_dtype "f32")."""
    assert isinstance(op, AicfcOp)
    f32, name = str(_F32), str(low)
    problem = problem_of(op)
    problem = replace(
        problem,
        dtype=name if problem.dtype == f32 else problem.dtype,
        input_dtypes=tuple(name if d == f32 else d for d in problem.input_dtypes),
        params={**problem.params, OUT_DTYPE_PARAM: "f32"} if op_f32_results(op) else problem.params,
    )
    family = backend_names.BACKEND_KERNEL_FAMILY["cupy"]
    capability = DEFAULT_CAPABILITY[family]
    return any(refusal(s, problem, capability) is None for s in candidates(op.name, family))


def op_f32_results(op: Operation) -> tuple[int, ...]:
    """The results of `op` that stay float32 when it computes in the low dtype."""
    return F32_RESULTS.get(type(op), ())


def _compute_dtype(
    op: Operation, policy: Policy, dtypes: list[Attribute], low: Attribute
) -> Attribute:
    if policy == Policy.LOWER:
        if type(op) in LOWER_WHERE_KERNEL and not _low_kernel_takes(op, low):
            return _F32
        return low
    if policy == Policy.FP32:
        return _F32
    if policy == Policy.FOLLOW:
        return dtypes[0]
    return max(dtypes, key=itemsize)


def _result_types(op: Operation, dtype: Attribute) -> list[Attribute]:
    """The types of `op`'s results when it computes in `dtype`: float results in `dtype`
    (float32 at the op's F32_RESULTS), the others as they are."""
    keep = op_f32_results(op) if dtype != _F32 else ()
    results: list[Attribute] = []
    for i, r in enumerate(op.results):
        t = r.type
        if isinstance(t, TensorType) and is_float(t.element_type):
            results.append(tensor(t.get_shape(), _F32 if i in keep else dtype))
        else:
            results.append(t)
    return results


def _retype(op: Operation, operands: list[SSAValue], results: list[Attribute]) -> Operation:
    """A copy of `op` on `operands` with result types `results`."""
    new = type(op).create(
        operands=operands,
        result_types=results,
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    copy_location(op, new)
    return new


def autocast_block(block: Block, low: Attribute) -> None:
    """Apply the policy to every op of `block`, in order (see the module docstring)."""
    casts = _Casts({}, {})
    for op in list(block.ops):
        policy = policy_of(op)
        if policy is None:
            for i, v in enumerate(op.operands):  # a consumer outside the graph ops
                declared = casts.declared.get(v)
                if declared is not None:
                    op.operands[i] = casts.to(v, declared, op)
            continue
        dtypes = [d for d in map(_element, op.operands) if d is not None]
        if not dtypes or any(d not in (_F32, low) for d in dtypes):
            continue  # no float operand, or f64 / another low dtype: not ours
        dtype = _compute_dtype(op, policy, dtypes, low)
        operands = [casts.to(v, dtype, op) for v in op.operands]
        results = _result_types(op, dtype)
        if operands == list(op.operands) and results == [r.type for r in op.results]:
            continue
        new = _retype(op, operands, results)
        block.insert_op_before(new, op)
        for old, res in zip(op.results, new.results, strict=True):
            res.name_hint = old.name_hint
            was = _element(old)
            if res.type != old.type and was is not None:
                casts.declared[res] = casts.declared.get(old, was)
            old.replace_all_uses_with(res)
        block.erase_op(op)


@dataclass(frozen=True)
class AicfcAutocastPass(ModulePass):
    """Insert the casts of mixed precision (see the module docstring).

    dtype: "bf16" (default) or "fp16", the dtype the products compute in; anything
           else raises ValueError.
    """

    name = "aicfc-autocast"

    dtype: str = "bf16"

    def __post_init__(self) -> None:
        if self.dtype not in LOW_DTYPES:
            raise ValueError(
                f"aicfc-autocast: unknown value '{self.dtype}' for option 'dtype'; "
                f"expected one of: {', '.join(LOW_DTYPES)}"
            )

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in op.walk():
            if isinstance(f, func.FuncOp):
                for block in f.body.blocks:
                    autocast_block(block, LOW_DTYPES[self.dtype])
