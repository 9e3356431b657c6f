"""The common base of graph and autodiff ops: flags and per-op analysis.

`AicfcOp` gives every op of our dialects the analysis methods (docs/design.md#operator-analysis):
FLOPs, bytes moved, parameter count and human-readable properties
(`semantic_properties()`), and the report's name of the op (`DISPLAY_NAME`). Counting
conventions (stated once, used by the report):

- FLOPs: a multiply-add is 2 FLOPs (a [M,K]x[K,N] product is 2*M*N*K); an
  elementwise op costs `FLOPS_PER_ELEMENT` per output element, counting a
  transcendental (exp, erf, tanh) as one.
- Bytes moved: each operand read once plus each result written once, at the
  tensors' element sizes (the minimum traffic; a kernel may move more).
- Parameters: elements of operands that are function arguments with
  `aicfc.role = "param"`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.irdl import IRDLOperation

from aicfc.dialects.flags import OpFlag, all_flags, op_info, static_flags
from aicfc.dialects.params import ParamValue, properties_to_params
from aicfc.dialects.roles import arg_role
from aicfc.dialects.tensors import numel, tensor_bytes
from aicfc.dialects.wide_results import OUT_DTYPE_PARAM, out_dtype


class AicfcOp(IRDLOperation):
    """Base of every graph and autodiff op (analysis methods, no IR fields)."""

    FLOPS_PER_ELEMENT: ClassVar[int] = 0
    DISPLAY_NAME: ClassVar[str] = ""
    """The op's name in the operator report, PyTorch's module name where one exists
    ("MatMul", "ReLU", "MSELoss"); empty: the report prints the op name (`display_name()`)."""

    @classmethod
    def display_name(cls) -> str:
        """DISPLAY_NAME, or the op name (e.g. "autodiff.relu_grad") when the class sets none."""
        return cls.DISPLAY_NAME or cls.name

    def flops(self) -> int:
        """Floating-point operations of one execution (see module docstring)."""
        if not self.results:
            return 0
        t = self.results[0].type
        shape = t.get_shape() if hasattr(t, "get_shape") else ()
        return numel(shape) * self.FLOPS_PER_ELEMENT

    def bytes_moved(self) -> int:
        """Minimum bytes read and written by one execution."""
        return sum(tensor_bytes(v.type) for v in self.operands) + sum(
            tensor_bytes(r.type) for r in self.results
        )

    def param_count(self) -> int:
        """Elements of the distinct trainable parameters this op reads."""
        seen: set[int] = set()
        count = 0
        for v in self.operands:
            if arg_role(v) == "param" and id(v) not in seen:
                seen.add(id(v))
                t = v.type
                count += numel(t.get_shape()) if hasattr(t, "get_shape") else 0
        return count

    def kernel_params(self) -> dict[str, ParamValue]:
        """Scalar parameters of the kernel that runs this op (its properties as Python values).

        Ops whose meaning depends on the result type (reshape, broadcast_to)
        add it here, so an exec launch and the NumPy reference see one dict. An op whose
        wide results are float32 over bf16/f16 operands (dialects/wide_results.py) adds
        out_dtype = "f32", so the kernel that runs it is one that writes them unrounded; one
        whose narrow results are bf16/f16 over float32 operands adds out_dtype = "bf16" or
        "f16", so its kernel is one that rounds them as it stores them.
        """
        params = properties_to_params(self)
        dtype = out_dtype(self)
        if dtype is not None:
            params[OUT_DTYPE_PARAM] = dtype
        return params

    def why_not_differentiable(self) -> str | None:
        """Why this instance has no VJP by design, else None (aicfc-expand-backward asks).

        The class's OpInfo reason when it is declared not differentiable; an op whose
        differentiability depends on a property (epilogue_grad's act) overrides this.
        """
        info = op_info(self)
        if info is not None and not info.differentiable:
            return info.why_not or "it is declared not differentiable"
        return None

    def is_identity(self) -> bool:
        """True when this instance returns its first operand unchanged (a reshape to the
        same type, an identity permutation): canonicalize removes it."""
        return False

    def flags(self) -> OpFlag:
        """Static and derived flags of this instance (one 64-bit mask)."""
        return all_flags(self)

    def semantic_flags(self) -> OpFlag:
        """The static flags as they hold for this instance's attributes.

        Equal to the class's static flags, except for ops whose meaning depends
        on a property (a gemm_epilogue with act none is affine, not an activation).
        """
        return static_flags(self)

    def semantic_properties(self) -> list[str]:
        """Human-readable properties (docs/design.md#operator-analysis): linear, trainable, ...

        Not named `properties`: that is xDSL's dict of the op's IR properties,
        which an instance attribute of that name would hide a method behind.
        """
        f = self.semantic_flags()
        props: list[str] = []
        if f & OpFlag.IS_CONSTANT:
            return ["constant"]
        if f & OpFlag.IS_LINEAR:
            props.append("linear")
        elif f & OpFlag.IS_AFFINE:
            props.append("affine")
        if self.param_count() > 0:
            props.append("trainable")
        if not f & (OpFlag.IS_LINEAR | OpFlag.IS_AFFINE | OpFlag.IS_LAYOUT):
            props.append("nonlinear")
        if not f & (OpFlag.IS_INVERTIBLE | OpFlag.IS_LINEAR | OpFlag.IS_AFFINE):
            props.append("irreversible")
        if f & OpFlag.COLLAPSES_INFO:
            props.append("collapse-producing")
        if f & OpFlag.IS_STOCHASTIC:
            props.append("stochastic")
        if f & OpFlag.IS_GATHER:
            props.append("gather")
        if f & (OpFlag.IS_LAYOUT | OpFlag.IS_SHAPE_ONLY):
            props.append("shape-only")
        return props
