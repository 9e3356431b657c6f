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
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import re
from pathlib import Path

import pytest
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation

from aicfc.dialects.autodiff import Autodiff
from aicfc.dialects.flags import OpFlag, OpInfo, op_info
from aicfc.dialects.graph import Graph
from aicfc.runtime import reference

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
