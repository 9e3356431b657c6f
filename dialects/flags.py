"""Op metadata: the 64-bit flag mask, alias policies and derived flags.

Every graph and autodiff op class carries an `OpInfo` trait whose `flags` field
is its static 64-bit fingerprint (docs/design.md#op-flags). Passes ask "is this op
gemm-like?" with one bit AND, never by comparing op names. Bits 0-31 are static
(what the op *is*); bits 32-63 are derived per op instance from its context
(dtype, contiguity, single use, safe to move) by `derived_flags`.

Alias policies (docs/design.md#in-place-folding) say which outputs an op *may* write into which of
its inputs; `aicfc-fold-inplace` applies them only where use-def proves it safe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    TensorType,
)
from xdsl.ir import Operation, SSAValue
from xdsl.traits import OpTrait


class OpFlag(enum.IntFlag):
    """Bits of the 64-bit op fingerprint. Bits 0-31 static, 32-63 derived."""

    NONE = 0
    # --- static: what the op is (bits 0-31) ---
    IS_GEMM_LIKE = 1 << 0
    """A matrix product (matmul, gemm_epilogue)."""
    IS_ELEMENTWISE = 1 << 1
    """out[i] depends only on the operands' element i (after explicit broadcast)."""
    IS_ACTIVATION = 1 << 2
    """A pointwise nonlinearity (relu, gelu, tanh)."""
    HAS_PARAM = 1 << 3
    """Consumes a trainable parameter by role (a linear layer's weight or bias)."""
    IS_REDUCTION = 1 << 4
    """Reduces one or more axes."""
    IS_LAYOUT = 1 << 5
    """Moves or reinterprets elements without arithmetic (reshape, transpose)."""
    IS_LINEAR = 1 << 6
    """Linear in its (non-constant) tensor operands."""
    IS_INVERTIBLE = 1 << 7
    """A bijection on its input: no information is lost."""
    COLLAPSES_INFO = 1 << 8
    """Maps many inputs to one output (relu's negative half, a reduction)."""
    IS_STOCHASTIC = 1 << 9
    """Draws random numbers."""
    IS_BIAS_ADD = 1 << 10
    """Adds a per-channel vector along the last dimension."""
    IS_LOSS = 1 << 11
    """Produces a scalar training loss."""
    IS_FUSED = 1 << 12
    """The result of a fusion: one op standing for a composite of several."""
    IS_BACKWARD = 1 << 13
    """A backward primitive (a VJP building block)."""
    IS_OPTIMIZER = 1 << 14
    """An optimizer update in SSA form."""
    IS_SHAPE_ONLY = 1 << 15
    """Changes only the shape metadata; the element order is kept (reshape)."""
    IS_CONSTANT = 1 << 16
    """Has no operands and a compile-time value."""
    IS_ACTIVATION_GRAD = 1 << 17
    """dx = dy * act'(.) for a pointwise activation."""
    IS_BROADCAST = 1 << 18
    """Replicates its operand along new or unit axes."""
    IS_AFFINE = 1 << 19
    """Linear up to a constant offset: x -> A x + c (bias_add)."""
    TAKES_CLASS_LABELS = 1 << 20
    """Operand #0 is logits [..., C] and operand #1 integer class labels [...] in [0, C)."""
    IS_GATHER = 1 << 21
    """Reads rows of a table selected by integer indices (embedding)."""
    IS_NORMALIZATION = 1 << 22
    """Normalises along the last dim by statistics of its own input (layer_norm)."""
    IS_CAST = 1 << 23
    """Changes only the element type (graph.cast: a narrowing cast rounds to nearest even)."""
    # --- derived: computed per instance in context (bits 32-63) ---
    DTYPE_F32 = 1 << 32
    DTYPE_F16 = 1 << 33
    DTYPE_BF16 = 1 << 34
    DTYPE_F64 = 1 << 35
    LAYOUT_CONTIG = 1 << 40
    """All tensor results are dense row-major (always true for value tensors)."""
    SINGLE_USE = 1 << 41
    """Every result has exactly one use."""
    SAFE_NODE = 1 << 42
    """No side effects and no randomness: safe to move or fuse."""


STATIC_MASK = (1 << 32) - 1
"""The static half of the mask (bits 0-31); derived flags use bits 32-63."""


@dataclass(frozen=True)
class AliasPolicy:
    """Which outputs an op may write into which inputs (docs/design.md#in-place-folding).

    `pairs` holds (output index, input index) tuples. `name` is the policy's
    stable name, shown in exec IR as the launch's `alias` property.
    """

    name: str
    pairs: tuple[tuple[int, int], ...]


OUT0_IN0 = AliasPolicy("out0_in0", ((0, 0),))
# adam_step(param, grad, m, v, step, 7 scalars[, low_copy]) -> (param', m', v', step'[,
# low_copy']): the grad (in1) is never a destination.
ADAM_TRIPLET = AliasPolicy("adam_triplet", ((0, 0), (1, 2), (2, 3), (3, 4), (4, 12)))
# sgd_step(param, grad, lr, momentum, weight_decay, grad_scale, apply[, momentum_buffer])
#   -> (param'[, momentum_buffer'])
SGD_PAIR = AliasPolicy("sgd_pair", ((0, 0), (1, 7)))
# accumulate_grad(grad, accum, reset) -> (mean, accum'): the mean may overwrite the
# gradient it is computed from, the sum its running buffer.
ACCUMULATE_PAIR = AliasPolicy("accumulate_pair", ((0, 0), (1, 1)))

# mlp_train_step(x, labels, dloss, 7 hyperparameters and flags, per layer its params and
# states) -> (loss, their next values): result 1 + j may overwrite operand 10 + j (up to
# 8 layers of 8; aicfc-fold-inplace skips pairs past an instance's operands).
TRAIN_STEP_STATE = AliasPolicy("train_step_state", tuple((1 + j, 10 + j) for j in range(64)))

# reshape: the result is the operand's bytes read with another shape, so beyond writing
# output 0 into input 0 the two may share storage while both are live, as long as neither
# is written again meanwhile (exec.view_groups; aicfc-plan-memory places them together).
VIEW = AliasPolicy("view", ((0, 0),))

ALIAS_POLICIES: dict[str, AliasPolicy] = {
    p.name: p for p in (OUT0_IN0, ADAM_TRIPLET, SGD_PAIR, ACCUMULATE_PAIR, TRAIN_STEP_STATE, VIEW)
}


@dataclass(frozen=True)
class OpInfo(OpTrait):
    """Class-level metadata of a graph or autodiff op.

    flags:        the op's static OpFlag bits.
    alias:        the alias policy, or None if it never runs in place.
    differentiable: False for ops that have no VJP by design (say why in `why_not`).
    why_not:      the reason an op is not differentiable, shown in errors.
    wide_results: indices of the results that may be float32 while the float operands are
                  bf16/f16: the op accumulates in fp32 and writes that sum as float32,
                  unrounded (aicfc-fold-casts folds a widening cast into them;
                  dialects/wide_results.py).
    narrow_results: indices of the results that may be bf16/f16 while the float operands
                  are float32: the op computes them in float32 and rounds each to nearest
                  even as it stores it, which is what a graph.cast of the float32 result
                  computes (aicfc-fold-narrowing-casts folds such a cast into them;
                  dialects/wide_results.py).
    """

    flags: OpFlag
    alias: AliasPolicy | None = None
    differentiable: bool = True
    why_not: str = ""
    wide_results: tuple[int, ...] = ()
    narrow_results: tuple[int, ...] = ()

    def verify(self, op: Operation) -> None:
        return None


def op_info(op: Operation | type[Operation]) -> OpInfo | None:
    """The OpInfo trait of an op instance or class, or None for foreign ops."""
    return op.get_trait(OpInfo)


def static_flags(op: Operation | type[Operation]) -> OpFlag:
    """The static flag mask of an op (0 for ops without OpInfo)."""
    info = op_info(op)
    return info.flags if info is not None else OpFlag.NONE


def constant_value(value: SSAValue) -> DenseIntOrFPElementsAttr | None:
    """The dense literal of `value` when a constant op (IS_CONSTANT, graph.constant)
    defines it, else None."""
    owner = value.owner
    if not isinstance(owner, Operation) or not static_flags(owner) & OpFlag.IS_CONSTANT:
        return None
    attr = owner.properties.get("value")
    return attr if isinstance(attr, DenseIntOrFPElementsAttr) else None


_DTYPE_FLAGS = {
    Float32Type: OpFlag.DTYPE_F32,
    Float16Type: OpFlag.DTYPE_F16,
    BFloat16Type: OpFlag.DTYPE_BF16,
    Float64Type: OpFlag.DTYPE_F64,
}


def dtype_flag(value: SSAValue) -> OpFlag:
    """DTYPE_* bit of a tensor value's element type (0 for integers)."""
    t = value.type
    if isinstance(t, TensorType):
        return _DTYPE_FLAGS.get(type(t.element_type), OpFlag.NONE)
    return OpFlag.NONE


def derived_flags(op: Operation) -> OpFlag:
    """The per-instance flags of `op` in its current context.

    DTYPE_*: of the first result. LAYOUT_CONTIG: value tensors are dense
    row-major, so every op whose results are tensors is contiguous.
    SINGLE_USE: every result has exactly one use. SAFE_NODE: the op has no
    memory effect and is not stochastic.
    """
    from xdsl.traits import is_side_effect_free

    flags = OpFlag.NONE
    if op.results:
        flags |= dtype_flag(op.results[0])
        if all(isinstance(r.type, TensorType) for r in op.results):
            flags |= OpFlag.LAYOUT_CONTIG
        if all(r.has_one_use() for r in op.results):
            flags |= OpFlag.SINGLE_USE
    if is_side_effect_free(op) and not static_flags(op) & OpFlag.IS_STOCHASTIC:
        flags |= OpFlag.SAFE_NODE
    return flags


def all_flags(op: Operation) -> OpFlag:
    """Static and derived flags of `op` in one 64-bit mask."""
    return static_flags(op) | derived_flags(op)
