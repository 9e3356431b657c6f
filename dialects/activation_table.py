"""The activation table, plain data: one row of facts per pointwise activation.

A row says, for one activation (by its name, the value of its `Activation` in
dialects/graph/activations.py): its code in the kernels (the `act` scalar of
the GEMM and epilogue kernels, `AICFC_ACT_<NAME>` in kernels/common.cuh), what
its gradient op saves from the forward pass (the input x or the output y),
whether it collapses information (many inputs to one output, as relu's
negative half-line), whether a `graph.gemm_epilogue` can apply it (our GEMM
kernels fuse it, `autodiff.epilogue_grad` has its backward form, aicfc-fuse
fuses it), and which cuBLASLt epilogue applies it, if any. Its ops are
`graph.<name>` and `autodiff.<name>_grad`; their classes, with this row, are
`ACTIVATIONS` in dialects/graph/activations.py.

Why a module of its own: the kernel registry (runtime/registry.py) and the
CUDA launchers read these facts, and the registry is plain data that imports
no xDSL and no NumPy. Any module inside dialects/graph/ loads xDSL through the
package's `__init__` (and `Activation` must be an xDSL `StrEnum` for its
`EnumAttribute`), so the facts live here, one level up, keyed by name, and the
enum and the op classes next to the ops.

Every reader derives what it needs from these rows: the verifiers of
gemm_epilogue and epilogue_grad, `semantic_flags`, the fusion tables, the VJP
rules, the registry's `activations=` constraints and activation kernels, the
NumPy reference of the fused ops, the launchers' `act` codes and cuBLASLt's
epilogues. test/python/test_activation_table.py checks the codes against
kernels/common.cuh, and test_op_completeness.py that every row has all its
pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Saved(StrEnum):
    """What an activation's gradient op reads besides dY: the forward input x or output y."""

    INPUT = "input"
    OUTPUT = "output"


@dataclass(frozen=True)
class ActivationFacts:
    """One row of the activation table (see the module docstring).

    name:           the activation's name ("relu"): its `Activation` value, the `act` kernel
                    parameter, the ops graph.<name> and autodiff.<name>_grad.
    code:           the `act` scalar of the kernels (`AICFC_ACT_<NAME>`, kernels/common.cuh).
    saves:          what `autodiff.<name>_grad` reads: the forward input or output.
    collapses_info: many inputs map to one output (the COLLAPSES_INFO flag of its ops).
    epilogue:       a gemm_epilogue applies it (our GEMM kernels, epilogue_grad, aicfc-fuse).
    cublaslt:       the cublasLtEpilogue_t names (without, with a bias) that apply exactly
                    this activation, or None where cuBLASLt has none.
    """

    name: str
    code: int
    saves: Saved
    collapses_info: bool
    epilogue: bool
    cublaslt: tuple[str, str] | None = None

    @property
    def op(self) -> str:
        """The name of its forward op: "graph.relu"."""
        return f"graph.{self.name}"

    @property
    def grad_op(self) -> str:
        """The name of its gradient op: "autodiff.relu_grad"."""
        return f"autodiff.{self.name}_grad"


ACTIVATION_FACTS: tuple[ActivationFacts, ...] = (
    # relu'(z) = (y > 0) reads the output; cuBLASLt's RELU epilogue is exact.
    ActivationFacts(
        "relu",
        code=1,
        saves=Saved.OUTPUT,
        collapses_info=True,
        epilogue=True,
        cublaslt=("RELU", "RELU_BIAS"),
    ),
    # gelu'(x) needs x. cuBLASLt's GELU epilogue is the tanh approximation, not this exact
    # erf form (Hendrycks and Gimpel 2016): no cuBLASLt epilogue.
    ActivationFacts("gelu", code=2, saves=Saved.INPUT, collapses_info=False, epilogue=True),
    # tanh'(x) = 1 - y^2 reads the output. No epilogue form: cuBLASLt has no TANH
    # epilogue, and aicfc-fuse leaves Linear + Tanh unfused.
    ActivationFacts("tanh", code=3, saves=Saved.OUTPUT, collapses_info=False, epilogue=False),
    # silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), needs x. Our GEMM kernels fuse it;
    # cuBLASLt has no SiLU epilogue.
    ActivationFacts("silu", code=4, saves=Saved.INPUT, collapses_info=False, epilogue=True),
)
"""The rows, in code order."""

FACTS: dict[str, ActivationFacts] = {f.name: f for f in ACTIVATION_FACTS}
"""An activation's name ("relu", the `act` kernel parameter) -> its row (none has none)."""

EPILOGUE_ACTIVATIONS: tuple[str, ...] = tuple(f.name for f in ACTIVATION_FACTS if f.epilogue)
"""The activations a gemm_epilogue applies and epilogue_grad differentiates ("relu", ...)."""

CUBLASLT_ACTIVATIONS: tuple[str, ...] = tuple(
    f.name for f in ACTIVATION_FACTS if f.cublaslt is not None
)
"""The activations a cuBLASLt epilogue applies exactly."""


def one_of(names: tuple[str, ...]) -> str:
    """Names as prose for a message: "relu", "relu or gelu", "relu, gelu or silu"."""
    if len(names) < 2:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def facts(name: str) -> ActivationFacts:
    """The row of activation `name`; KeyError naming this table where it has none."""
    row = FACTS.get(name)
    if row is None:
        raise KeyError(
            f"activation {name!r} has no row in ACTIVATION_FACTS (dialects/activation_table.py)"
        )
    return row


def _check_rows() -> None:
    """Names and codes are distinct, codes non-zero (0 is none)."""
    codes = [f.code for f in ACTIVATION_FACTS]
    if 0 in codes or len(set(codes)) != len(codes) or len(FACTS) != len(codes):
        raise ValueError(
            f"activation names and codes must be distinct, codes non-zero; got "
            f"{[(f.name, f.code) for f in ACTIVATION_FACTS]}"
        )


_check_rows()
