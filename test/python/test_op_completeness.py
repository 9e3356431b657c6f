"""Op completeness (issue 5): every graph and autodiff op has all of its parts.

For each op class of the graph and autodiff dialects:

- metadata: an `OpInfo` trait (dialects/flags.py) with its static flag mask,
  and for a graph op its operator-report name (`DISPLAY_NAME` on the class);
- meaning: a NumPy reference in `runtime/reference.py` `REFERENCE[op class]`
  whose positional parameters are the op's operands and whose keyword-only
  parameters include every property (the `kernel_params()` the interpreter
  and the NumPy kernels pass); the documented exceptions graph.constant (its
  value is data) and autodiff.backward (expanded before anything runs) must
  be absent from REFERENCE and named in REFERENCE's docstring;
- derivative: a rule in `passes/vjp_rules.py` `VJP_RULES[op class]`, or
  `OpInfo(differentiable=False, why_not=...)` with a non-empty reason;
- syntax: a custom-syntax case in `test/dialects/<dialect>/ops.mlir`, which
  its RUN lines round-trip through the generic form.

Each part is its own test, parametrized by op name, so a failure names the op
and the missing part.

For each activation (the second half): its row of facts, its Activation value and op
classes, the NumPy reference of both ops (the gradient checked against central
differences of the forward), its VJP rule, its code, row and device functions in
kernels/common.cuh, its elementwise kernels, its gemm epilogue and epilogue_grad forms
(everywhere or nowhere, as its row says), its cuBLASLt form (where the row names none,
no cuBLASLt entry takes it and the selector picks our kernels) and its aicfc.nn module.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, VarOperandDef

from aicfc.dialects.activation_table import FACTS, Saved
from aicfc.dialects.autodiff import Autodiff
from aicfc.dialects.flags import OpFlag, OpInfo, op_info
from aicfc.dialects.graph import ACTIVATIONS, Activation, ActivationOps, Graph
from aicfc.passes.fusion.constraints import EPILOGUE_FORMS
from aicfc.runtime import reference, registry
from aicfc.runtime.selector import Problem, select
from test_activation_table import header_codes, header_rows

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = {"graph": Graph, "autodiff": Autodiff}
NO_REFERENCE = ("graph.constant", "autodiff.backward")
"""Ops that have no REFERENCE entry by design (documented in REFERENCE's docstring)."""
STRUCTURAL_PROPERTIES = frozenset({"operandSegmentSizes", "resultSegmentSizes", "value"})

OPS: list[tuple[str, type[Operation]]] = [
    (d, op) for d, dialect in DIALECTS.items() for op in dialect.operations
]
IDS = [op.name for _, op in OPS]


DESIGN_OPS = [
    "graph.matmul",
    "graph.bias_add",
    "graph.add",
    "graph.sub",
    "graph.mul",
    "graph.relu",
    "graph.gelu",
    "graph.tanh",
    "graph.dropout",
    "graph.reshape",
    "graph.transpose",
    "graph.softmax",
    "graph.reduce_sum",
    "graph.cross_entropy",
    "graph.mse_loss",
    "graph.gemm_epilogue",
    "autodiff.backward",
    "autodiff.relu_grad",
    "autodiff.gelu_grad",
    "autodiff.cross_entropy_grad",
    "autodiff.softmax_grad",
    "autodiff.dropout_grad",
    "autodiff.adam_step",
    "autodiff.sgd_step",
]
"""The ops the design names (docs/architecture.md §2: names are contracts)."""


def test_dialects_define_the_design_ops() -> None:
    missing = sorted(set(DESIGN_OPS) - set(IDS))
    assert not missing, f"ops named by the design but not defined: {missing}"


@pytest.mark.parametrize(("d", "op"), OPS, ids=IDS)
def test_op_has_flag_mask(d: str, op: type[Operation]) -> None:
    info = op_info(op)
    assert info is not None, f"{op.name} has no OpInfo trait (dialects/flags.py) in its traits"
    assert isinstance(info, OpInfo)
    assert isinstance(info.flags, OpFlag), f"{op.name}: OpInfo.flags is not an OpFlag mask"
    assert info.flags != OpFlag.NONE, f"{op.name}: its static flag mask is empty"


GRAPH_OPS = [(d, op) for d, op in OPS if d == "graph"]


@pytest.mark.parametrize(("d", "op"), GRAPH_OPS, ids=[op.name for _, op in GRAPH_OPS])
def test_graph_op_has_a_display_name(d: str, op: type[Operation]) -> None:
    name = getattr(op, "DISPLAY_NAME", "")
    assert isinstance(name, str) and name, (
        f"{op.name} has no DISPLAY_NAME: the operator report would print '{op.name}'; set "
        '`DISPLAY_NAME: ClassVar[str] = "..."` on the class (PyTorch\'s module name where '
        "one exists)"
    )
    assert "DISPLAY_NAME" in vars(op), (
        f"{op.name} inherits DISPLAY_NAME {name!r} instead of setting its own"
    )


@pytest.mark.parametrize(("d", "op"), OPS, ids=IDS)
def test_op_has_numpy_reference(d: str, op: type[Operation]) -> None:
    if op.name in NO_REFERENCE:
        assert op not in reference.REFERENCE, (
            f"{op.name} is listed as having no reference by design, but REFERENCE has one: "
            "remove it from NO_REFERENCE in this test"
        )
        return
    assert op in reference.REFERENCE, (
        f"{op.name} has no NumPy reference: add a function to runtime/reference.py and a "
        f"REFERENCE entry keyed by its class ({op.__name__})"
    )
    fn = reference.REFERENCE[op]
    params = inspect.signature(fn).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in params if p.kind == p.KEYWORD_ONLY}
    assert issubclass(op, IRDLOperation), f"{op.name} is not an IRDL op"
    definition = op.get_irdl_definition()
    operands = [name for name, _ in definition.operands]
    variadic = [name for name, d in definition.operands if isinstance(d, VarOperandDef)]
    if variadic and any(p.kind == p.VAR_POSITIONAL for p in params):
        # The last operand is variadic: `*arrays` takes its values (the interpreter passes
        # the operands flattened), after one positional parameter per other operand.
        assert operands[-1] == variadic[-1] and len(variadic) == 1, (
            f"REFERENCE[{op.__name__}] = {fn.__name__} takes *args, which only a single, "
            f"last variadic operand can fill; the op has operands {operands}"
        )
        operands = operands[:-1]
    assert len(positional) == len(operands), (
        f"REFERENCE[{op.__name__}] = {fn.__name__} takes {len(positional)} arrays "
        f"({[p.name for p in positional]}) but the op has operands {operands}"
    )
    properties = set(definition.properties) - STRUCTURAL_PROPERTIES
    missing = sorted(properties - keywords)
    assert not missing, (
        f"REFERENCE[{op.__name__}] = {fn.__name__} has no keyword-only parameter for the "
        f"properties {missing}"
    )


def _reference_docstring() -> str:
    """The string literal right after `REFERENCE = {...}` in runtime/reference.py."""
    path = ROOT / "runtime" / "reference.py"
    body = ast.parse(path.read_text()).body
    for stmt, nxt in itertools.pairwise(body):
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "REFERENCE":
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                return str(nxt.value.value)
            return ""
    raise AssertionError("runtime/reference.py has no annotated `REFERENCE: ... = {...}`")


@pytest.mark.parametrize("name", NO_REFERENCE)
def test_missing_reference_is_documented(name: str) -> None:
    doc = _reference_docstring()
    assert name in doc, (
        f"{name} has no NumPy reference by design, but the docstring after REFERENCE in "
        "runtime/reference.py does not say so"
    )


def _vjp_rules() -> dict[type, object]:
    try:
        module = importlib.import_module("aicfc.passes.vjp_rules")
    except ImportError as e:
        pytest.fail(f"passes/vjp_rules.py cannot be imported: {e}")
    rules = getattr(module, "VJP_RULES", None)
    assert isinstance(rules, dict), "passes/vjp_rules.py has no `VJP_RULES: dict[op class, rule]`"
    return rules


@pytest.mark.parametrize(("d", "op"), OPS, ids=IDS)
def test_op_has_vjp_rule_or_says_why_not(d: str, op: type[Operation]) -> None:
    rules = _vjp_rules()
    info = op_info(op)
    assert info is not None, f"{op.name} has no OpInfo trait"
    if not info.differentiable:
        assert info.why_not.strip(), (
            f"{op.name} is declared not differentiable (OpInfo differentiable=False) but "
            "gives no reason in why_not"
        )
        assert op not in rules, (
            f"{op.name} has a VJP rule but OpInfo says it is not differentiable "
            f"({info.why_not}); drop one of the two"
        )
        return
    assert op in rules, (
        f"{op.name} has no VJP rule in passes/vjp_rules.py VJP_RULES and is not declared "
        "OpInfo(differentiable=False, why_not=...)"
    )
    assert callable(rules[op]), f"VJP_RULES[{op.__name__}] is not callable"


@pytest.mark.parametrize(("d", "op"), OPS, ids=IDS)
def test_op_has_round_trip_case(d: str, op: type[Operation]) -> None:
    path = ROOT / "test" / "dialects" / d / "ops.mlir"
    assert path.is_file(), f"test/dialects/{d}/ops.mlir is missing"
    text = path.read_text()
    assert "--print-op-generic | aicfc-opt" in text, (
        f"test/dialects/{d}/ops.mlir has no custom -> generic -> custom RUN line"
    )
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    custom = re.compile(r'(?<!["\w.])' + re.escape(op.name) + r'(?![\w."])')
    assert custom.search(code), f"{op.name} has no custom-syntax case in test/dialects/{d}/ops.mlir"


# ----------------------------------------------------------------------------
# Activations: every row of the activation table has all of its pieces
# ----------------------------------------------------------------------------
#
# An activation is one row of dialects/activation_table.py (its facts) and of
# ACTIVATIONS in dialects/graph/activations.py (its Activation value and its op
# classes), NumPy math in runtime/reference.py, C math in kernels/common.cuh and an
# aicfc.nn module; everything else derives from those (CONTRIBUTING.md, "Add an
# activation"). Each piece is its own test, parametrized by the activation's name, so
# a half-added activation fails naming itself and the missing piece.

ACTIVATION_NAMES = sorted(
    {a.value for a in Activation if a != Activation.NONE}
    | set(FACTS)
    | {a.value for a in ACTIVATIONS}
    | {name for name, _ in header_rows((ROOT / "kernels" / "common.cuh").read_text())}
)
"""Every activation any of its homes knows of (the enum, the facts, the classes, the C rows)."""


def _row(name: str) -> ActivationOps:
    assert name in {a.value for a in Activation}, (
        f"activation {name}: no Activation value; add {name.upper()} = {name!r} to Activation "
        "in dialects/graph/activations.py"
    )
    row = ACTIVATIONS.get(Activation(name))
    assert row is not None, (
        f"activation {name}: no row in ACTIVATIONS (dialects/graph/activations.py): its "
        "forward op class graph.{name} and gradient op class autodiff.{name}_grad"
    )
    return row


def _activation_input(name: str, shape: tuple[int, ...] = (6, 7)) -> np.ndarray:
    """Fresh float64 inputs away from 0 (relu's kink), in +-[0.2, 2]."""
    rng = np.random.default_rng(sum(map(ord, name)))
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_a_row_of_facts(name: str) -> None:
    assert name in FACTS, (
        f"activation {name}: no row in ACTIVATION_FACTS (dialects/activation_table.py): its "
        "code, what its gradient saves, whether it collapses information, its epilogue forms"
    )


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_its_forward_and_gradient_op_classes(name: str) -> None:
    row = _row(name)
    assert row.forward.name == f"graph.{name}", (
        f"activation {name}: its forward op class {row.forward.__name__} is "
        f"{row.forward.name}, expected graph.{name}"
    )
    assert row.grad.name == f"autodiff.{name}_grad", (
        f"activation {name}: its gradient op class {row.grad.__name__} is {row.grad.name}, "
        f"expected autodiff.{name}_grad"
    )
    assert row.forward in list(Graph.operations), f"activation {name}: graph.{name} not in Graph"
    assert row.grad in list(Autodiff.operations), (
        f"activation {name}: autodiff.{name}_grad not in Autodiff"
    )
    assert row.forward.DISPLAY_NAME, f"activation {name}: graph.{name} has no DISPLAY_NAME"


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_the_numpy_reference_of_both_ops_and_its_gradient_is_its_derivative(
    name: str,
) -> None:
    row = _row(name)
    for cls in (row.forward, row.grad):
        assert cls in reference.REFERENCE, (
            f"activation {name}: {cls.name} has no NumPy reference (runtime/reference.py "
            f"REFERENCE[{cls.__name__}])"
        )
    # dx = grad(dy, saved) must be dy * f'(x) by central differences of the forward
    # reference, with saved the input or the output as the row says.
    f = reference.REFERENCE[row.forward]
    x = _activation_input(name)
    dy = _activation_input(name + "dy")
    saved = x if row.facts.saves == Saved.INPUT else f(x)[0]
    (dx,) = reference.REFERENCE[row.grad](dy, saved)
    h = 1e-6
    fd = dy * (f(x + h)[0] - f(x - h)[0]) / (2 * h)
    err = np.linalg.norm(dx - fd) / np.linalg.norm(fd)
    assert err < 1e-6, (
        f"activation {name}: autodiff.{name}_grad's reference is not dy * f'(x) of graph.{name}'s "
        f"(relative error {err:.2e}; is `saves` = {row.facts.saves.value} right?)"
    )


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_a_vjp_rule(name: str) -> None:
    rules = _vjp_rules()
    row = _row(name)
    assert row.forward in rules, (
        f"activation {name}: graph.{name} has no rule in passes/vjp_rules.py VJP_RULES"
    )


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_its_c_code_and_math_in_common_cuh(name: str) -> None:
    text = (ROOT / "kernels" / "common.cuh").read_text()
    code = FACTS[name].code if name in FACTS else None
    codes = header_codes(text)
    macro = f"AICFC_ACT_{name.upper()}"
    assert name in codes, (
        f"activation {name}: kernels/common.cuh has no `#define {macro} {code}` (its code in "
        "the activation table)"
    )
    assert codes[name] == code, (
        f"activation {name}: kernels/common.cuh has `#define {macro} {codes[name]}`, the "
        f"activation table's code is {code}"
    )
    assert (name, macro) in header_rows(text), (
        f"activation {name}: no `X({name}, {macro})` row in AICFC_ACTIVATIONS of "
        "kernels/common.cuh (elementwise.cu makes its kernels and activate() applies it "
        "from that row)"
    )
    for fn in (f"{name}(float x)", f"{name}_grad(float dy, float "):
        assert re.search(r"__device__ __forceinline__ float " + re.escape(fn), text), (
            f"activation {name}: kernels/common.cuh defines no `__device__ float aicfc::{fn}...`"
        )


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_its_elementwise_kernels(name: str) -> None:
    row = _row(name)
    for kernel, op in ((f"{name}_f32", row.forward), (f"{name}_grad_f32", row.grad)):
        spec = registry.KERNELS_BY_NAME.get(f"cuda.{kernel}")
        assert spec is not None and spec.op == op.name, (
            f"activation {name}: no CUDA kernel cuda.{kernel} for {op.name} in the registry"
        )
        assert (spec.source, spec.symbol) == ("elementwise.cu", f"aicfc_{kernel}")
        numpy_spec = registry.KERNELS_BY_NAME.get(f"numpy.{op.name.split('.', 1)[1]}")
        assert numpy_spec is not None, f"activation {name}: no NumPy kernel for {op.name}"
    text = (ROOT / "kernels" / "elementwise.cu").read_text()
    assert "AICFC_ACTIVATIONS(AICFC_ACTIVATION_KERNELS)" in text, (
        "kernels/elementwise.cu no longer makes the kernels of every AICFC_ACTIVATIONS row"
    )


def _gemm_kernels(cublaslt: bool) -> list[registry.KernelSpec]:
    """The CUDA gemm_epilogue kernels that apply the activation in one launch: cuBLASLt's
    epilogue (`cublaslt`) or our GEMM kernels (the split entries run our act kernel)."""
    return [
        k
        for k in registry.REGISTRY
        if k.op == "graph.gemm_epilogue"
        and k.family == "cuda"
        and "split_epilogue" not in k.flags
        and ("cublaslt" in k.flags) == cublaslt
    ]


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_epilogue_forms_are_everywhere_or_nowhere(name: str) -> None:
    row = _row(name)
    fused = [r.act for r in EPILOGUE_FORMS]
    numpy_gemm = registry.KERNELS_BY_NAME["numpy.gemm_epilogue"].constraints.activations or ()
    grads = [k for k in registry.REGISTRY if k.op == "autodiff.epilogue_grad"]
    if not row.facts.epilogue:
        assert row.act not in fused and name not in numpy_gemm, name
        return
    assert row.act in fused, f"activation {name}: not in EPILOGUE_FORMS of passes/fusion"
    assert name in numpy_gemm, f"activation {name}: numpy.gemm_epilogue refuses it"
    for k in _gemm_kernels(cublaslt=False) + grads:
        assert name in (k.constraints.activations or (name,)), (
            f"activation {name}: {k.name} refuses act={name} (its activations= constraint)"
        )
    # the fused forms' reference is the activation's: Y = f(Z) and dZ = grad(dY, saved)
    rng = np.random.default_rng(3)
    a, b, bias = rng.standard_normal((5, 4)), rng.standard_normal((4, 6)), rng.standard_normal(6)
    y, z = reference.gemm_epilogue(a, b, bias, act=name)
    assert np.allclose(y, reference.REFERENCE[row.forward](z)[0], rtol=1e-12)
    dy, saved = _activation_input(name, (5, 6)), _activation_input(name + "s", (5, 6))
    dz, db = reference.epilogue_grad(dy, saved, act=name)
    assert np.allclose(dz, reference.REFERENCE[row.grad](dy, saved)[0], rtol=1e-12)
    assert np.allclose(db, dz.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_cublaslt_form_is_what_the_row_says(name: str) -> None:
    from aicfc.runtime.cuda.cublaslt import EPILOGUES

    row = _row(name)
    lt = _gemm_kernels(cublaslt=True)
    if row.facts.cublaslt is not None:
        assert EPILOGUES.get(name) == row.facts.cublaslt, f"activation {name}: cuBLASLt epilogue"
        assert all(name in (k.constraints.activations or ()) for k in lt), name
        return
    assert name not in EPILOGUES, f"activation {name}: cuBLASLt has no epilogue for it"
    f32 = [k for k in lt if k.dtypes == ("f32",)]
    assert all(name not in (k.constraints.activations or ()) for k in f32), (
        f"activation {name}: a cuBLASLt entry accepts act={name}, but cuBLASLt has no "
        "epilogue for it (the row's cublaslt is None)"
    )
    # bf16/f16 products run only on cuBLASLt: an activation without its epilogue follows
    # the GEMM as our elementwise kernel of that dtype (runtime/cuda/launchers/cublaslt.py)
    from aicfc.runtime.registry_cuda import activation_kernel

    for k in lt:
        if k.dtypes != ("f32",) and row.facts.epilogue:
            assert name in (k.constraints.activations or ()), (k.name, name)
            registry.get(activation_kernel(name, k.dtypes[0]))
    split = [k for k in registry.REGISTRY if "split_epilogue" in k.flags]
    assert split and all(
        (name in (k.constraints.activations or ())) == row.facts.epilogue for k in split
    ), f"activation {name}: the split cuBLASLt entries (product, then our kernel) must take it"
    if row.facts.epilogue:  # where cuBLASLt wins, the product is its, the activation ours
        problem = Problem(
            "graph.gemm_epilogue",
            "f32",
            ((1024, 1024), (1024, 1024), (1024,)),
            ((1024, 1024),),
            params={"act": name},
        )
        chosen = select(problem, "cuda")
        assert "split_epilogue" in chosen.spec.flags, (name, chosen.spec.name)
        assert select(
            Problem(problem.op, "f32", problem.input_shapes, problem.output_shapes),
            "cuda",
        ).spec.flags >= {"cublaslt"}, "at this size cuBLASLt wins with act none"


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_activation_has_an_nn_module(name: str) -> None:
    from aicfc import nn

    row = _row(name)
    modules = [
        m
        for m in vars(nn).values()
        if isinstance(m, type)
        and issubclass(m, nn.Module)
        and getattr(m, "OP", None) is row.forward
    ]
    assert modules, (
        f"activation {name}: no aicfc.nn module emits graph.{name} (a _Pointwise subclass with "
        f"OP = {row.forward.__name__} in aicfc/nn.py, listed in __all__)"
    )
    assert modules[0].__name__ in nn.__all__, (
        f"activation {name}: aicfc.nn.{modules[0].__name__} emits graph.{name} but is not in "
        "aicfc.nn's __all__"
    )
