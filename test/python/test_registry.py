"""Registry gates (issue 5): every pass and every dialect has the pieces that keep it checked.

Passes. For each name that `aicfc.passes.get_all_passes()` registers (what
`aicfc-opt -p` accepts): the factory imports its class, the class's `name`
equals the registry key, the class is defined in `aicfc.passes.<name with
underscores>` (`passes/<name_with_underscores>.py`), and `test/passes/<name>.mlir`
exists with a RUN line that runs the pass. Conversely, every ModulePass
subclass defined in a module of passes/ is registered.

Dialects. For each of graph, autodiff and exec: `test/dialects/<d>/ops.mlir`
and `test/dialects/<d>/invalid.mlir` exist, ops.mlir writes every op of the
dialect in custom syntax, and invalid.mlir has one `// -----` case per
verifier message. Verifier messages are mapped to cases like this:

1. The sites are the `raise VerifyException(<message>)` statements of
   dialects/<d>.py (or of every module of the package dialects/<d>/, for a
   dialect split into one) that sit in a method named `verify`/`verify_` or in a
   module-level function (the helpers that verifiers call); a raise in any
   other method (e.g. `exec.program`'s `graph()` lookup) is not a verifier
   message. The sites of the shared helper modules (dialects/tensors.py,
   params.py, checks.py, wide_results.py) belong to no single dialect: each must be
   exercised by some dialect's invalid.mlir.
2. Each site's message must be a string literal, an f-string, or a
   concatenation of those. It becomes a regular expression: the literal parts
   verbatim, `{self.name}` replaced by the enclosing op class's `name` when
   the class sets one, every other replacement field by `.+?`.
3. `aicfc-opt invalid.mlir --split-input-file --verify-diagnostics` runs, and
   each case must yield exactly one `file:line:col: error: message`. Every
   site's expression must match the message of at least one case (so the
   message is really reachable, not just written down), every case's message
   must match some site (no stale cases), and every case must hold a CHECK line
   with its message and `invalid.mlir:[[# @LINE` (so lit checks the text and
   the location).

A missing piece fails with a message that names it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.ir import Dialect
from xdsl.passes import ModulePass

from aicfc.passes import get_all_passes, module_name

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = ("graph", "autodiff", "exec")
SHARED_HELPERS = ("tensors", "params", "checks", "wide_results")
SPLIT_MARKER = "// -----"
VERIFY_FLAGS = ("--split-input-file", "--verify-diagnostics")

# ----------------------------------------------------------------------------
# Passes
# ----------------------------------------------------------------------------

PASSES = get_all_passes()


@pytest.mark.parametrize("pass_name", sorted(PASSES))
def test_pass_class_matches_registry(pass_name: str) -> None:
    expected_module = module_name(pass_name)
    try:
        cls = PASSES[pass_name]()
    except (ImportError, AttributeError) as e:
        pytest.fail(
            f"pass '{pass_name}' is registered but its class cannot be loaded from "
            f"{expected_module} (passes/{pass_name.replace('-', '_')}.py): {e}"
        )
    assert issubclass(cls, ModulePass), f"{cls} registered as '{pass_name}' is not a ModulePass"
    assert cls.name == pass_name, (
        f"pass class {cls.__qualname__} has name '{cls.name}' but is registered as '{pass_name}'"
    )
    assert cls.__module__ == expected_module, (
        f"pass '{pass_name}' is defined in {cls.__module__}, expected {expected_module}"
    )


@pytest.mark.parametrize("pass_name", sorted(PASSES))
def test_pass_has_lit_file(pass_name: str) -> None:
    lit_file = ROOT / "test" / "passes" / f"{pass_name}.mlir"
    assert lit_file.is_file(), f"pass '{pass_name}' has no lit test test/passes/{pass_name}.mlir"
    run_lines = [line for line in lit_file.read_text().splitlines() if "RUN:" in line]
    runs_it = re.compile(r"-p[ =]?\S*?(?<![\w-])" + re.escape(pass_name) + r"(?![\w-])")
    assert any(runs_it.search(line) for line in run_lines), (
        f"test/passes/{pass_name}.mlir has no RUN line that runs `-p {pass_name}`"
    )


def _pass_modules() -> list[str]:
    import aicfc.passes

    return [
        f"aicfc.passes.{info.name}"
        for info in pkgutil.iter_modules(aicfc.passes.__path__)
        if not info.name.startswith("_")
    ]


@pytest.mark.parametrize("module", _pass_modules())
def test_every_pass_class_is_registered(module: str) -> None:
    mod = importlib.import_module(module)
    registered = {name: factory for name, factory in PASSES.items()}
    for _, cls in inspect.getmembers(mod, inspect.isclass):
        if cls.__module__ != module or not issubclass(cls, ModulePass) or inspect.isabstract(cls):
            continue
        name = getattr(cls, "name", None)
        assert name in registered, (
            f"{module}.{cls.__qualname__} defines pass '{name}' but passes/__init__.py "
            "does not register it (add it to PASS_CLASSES)"
        )


# ----------------------------------------------------------------------------
# Dialects: op coverage of ops.mlir
# ----------------------------------------------------------------------------


def dialect_object(d: str) -> Dialect:
    mod = importlib.import_module(f"aicfc.dialects.{d}")
    objs = [v for v in vars(mod).values() if isinstance(v, Dialect) and v.name == d]
    assert objs, f"{source_label(d)} defines no Dialect named '{d}'"
    return objs[0]


def code_lines(path: Path) -> list[str]:
    """The lines of a .mlir file that are not comments."""
    return [line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")]


@pytest.mark.parametrize("d", DIALECTS)
@pytest.mark.parametrize("kind", ["ops", "invalid"])
def test_dialect_lit_files_exist(d: str, kind: str) -> None:
    path = ROOT / "test" / "dialects" / d / f"{kind}.mlir"
    assert path.is_file(), f"dialect '{d}' has no test/dialects/{d}/{kind}.mlir"


@pytest.mark.parametrize("d", DIALECTS)
def test_ops_mlir_writes_every_op_in_custom_syntax(d: str) -> None:
    path = ROOT / "test" / "dialects" / d / "ops.mlir"
    text = "\n".join(code_lines(path))
    missing = [
        op.name
        for op in dialect_object(d).operations
        if not re.search(r'(?<!["\w.])' + re.escape(op.name) + r'(?![\w."])', text)
    ]
    assert not missing, f"test/dialects/{d}/ops.mlir has no custom-syntax case for: {missing}"


# ----------------------------------------------------------------------------
# Dialects: verifier messages of invalid.mlir
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """One `raise VerifyException(...)` of a dialect module and its message as a regex."""

    file: str
    line: int
    pattern: re.Pattern[str]
    source: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {' '.join(self.source.split())}"


def _op_name_of(cls: ast.ClassDef) -> str | None:
    for stmt in cls.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "name" for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            return stmt.value.value
    return None


def _is_self_name(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "name"
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def message_regex(node: ast.expr, op_name: str | None, where: str) -> str:
    """A regex for the message expression `node` (see the module docstring, step 2)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(re.escape(str(value.value)))
            elif isinstance(value, ast.FormattedValue) and op_name and _is_self_name(value.value):
                parts.append(re.escape(op_name))
            else:
                parts.append(".+?")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return message_regex(node.left, op_name, where) + message_regex(node.right, op_name, where)
    raise AssertionError(
        f"{where}: the message of this `raise VerifyException(...)` is not a string literal "
        "or an f-string, so test_registry.py cannot map it to an invalid.mlir case; write "
        "it as an f-string"
    )


def source_files(module: str) -> list[Path]:
    """dialects/<module>.py, or every module of the package dialects/<module>/."""
    package = ROOT / "dialects" / module
    if package.is_dir():
        return sorted(package.glob("*.py"))
    return [ROOT / "dialects" / f"{module}.py"]


def source_label(module: str) -> str:
    package = ROOT / "dialects" / module
    return f"dialects/{module}/" if package.is_dir() else f"dialects/{module}.py"


def verifier_sites(module: str) -> list[Site]:
    """The verifier message sites of a dialect module or package (module docstring, step 1)."""
    return [site for path in source_files(module) for site in file_verifier_sites(path)]


def file_verifier_sites(path: Path) -> list[Site]:
    """The verifier message sites of one source file."""
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(), filename=str(path))
    sites: list[Site] = []

    def visit(node: ast.AST, cls: ast.ClassDef | None, counted: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child, counted)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                in_scope = child.name in ("verify", "verify_") if cls is not None else True
                visit(child, cls, in_scope)
            elif isinstance(child, ast.Raise) and counted and _raises_verify(child):
                assert isinstance(child.exc, ast.Call)
                where = f"{rel}:{child.lineno}"
                op_name = _op_name_of(cls) if cls is not None else None
                regex = message_regex(child.exc.args[0], op_name, where)
                source = ast.get_source_segment(path.read_text(), child.exc.args[0]) or "?"
                sites.append(Site(rel, child.lineno, re.compile(regex), source))
            else:
                visit(child, cls, counted)

    visit(tree, None, True)
    return sites


def _raises_verify(node: ast.Raise) -> bool:
    exc = node.exc
    return (
        isinstance(exc, ast.Call)
        and isinstance(exc.func, ast.Name)
        and exc.func.id == "VerifyException"
        and len(exc.args) == 1
    )


@dataclass(frozen=True)
class Case:
    """One `// -----` chunk of an invalid.mlir and the diagnostics it produced."""

    first_line: int
    text: str
    messages: tuple[str, ...]


_DIAG = re.compile(r"^\S*:(\d+):(\d+): error: (.*)$")


def invalid_cases(d: str) -> list[Case]:
    path = ROOT / "test" / "dialects" / d / "invalid.mlir"
    proc = subprocess.run(
        [sys.executable, "-m", "aicfc.tools.aicfc_opt", str(path), *VERIFY_FLAGS],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"aicfc-opt failed on {path}:\n{proc.stderr}"
    lines = path.read_text().splitlines()
    starts = [1] + [i + 2 for i, line in enumerate(lines) if line.strip() == SPLIT_MARKER]
    chunks = [(s, e) for s, e in zip(starts, [*starts[1:], len(lines) + 2], strict=True)]
    by_chunk: dict[int, list[str]] = {s: [] for s, _ in chunks}
    for out in proc.stdout.splitlines():
        m = _DIAG.match(out)
        if m:
            line = int(m.group(1))
            start = max(s for s, _ in chunks if s <= line)
            by_chunk[start].append(m.group(3))
    return [
        Case(s, "\n".join(lines[s - 1 : e - 2]), tuple(by_chunk[s]))
        for s, e in chunks
        if any(not ln.lstrip().startswith("//") and ln.strip() for ln in lines[s - 1 : e - 2])
    ]


@pytest.fixture(scope="module")
def cases() -> dict[str, list[Case]]:
    return {
        d: invalid_cases(d)
        for d in DIALECTS
        if (ROOT / "test" / "dialects" / d / "invalid.mlir").is_file()
    }


def _check_line_has(case: Case, message: str) -> bool:
    literal = message.split("[[")[0]
    return any(
        "CHECK" in line and literal in line and "invalid.mlir:[[# @LINE" in line
        for line in case.text.splitlines()
    )


@pytest.mark.parametrize("d", DIALECTS)
def test_each_invalid_case_is_one_checked_verifier_message(
    d: str, cases: dict[str, list[Case]]
) -> None:
    if d not in cases:
        pytest.fail(f"dialect '{d}' has no test/dialects/{d}/invalid.mlir")
    sites = verifier_sites(d) + [s for h in SHARED_HELPERS for s in verifier_sites(h)]
    where = f"test/dialects/{d}/invalid.mlir"
    for case in cases[d]:
        assert len(case.messages) == 1, (
            f"{where}: the case starting at line {case.first_line} gives "
            f"{len(case.messages)} errors ({list(case.messages)}); a case must give exactly one"
        )
        message = case.messages[0]
        assert any(s.pattern.search(message) for s in sites), (
            f"{where}: the case starting at line {case.first_line} gives '{message}', which is "
            f"no verifier message of {source_label(d)} or the shared helpers; move it or "
            "remove it"
        )
        assert _check_line_has(case, message), (
            f"{where}: the case starting at line {case.first_line} has no "
            f"`// CHECK: {{{{.*}}}}invalid.mlir:[[# @LINE + n]]:col: error: {message}` line"
        )


@pytest.mark.parametrize("d", DIALECTS)
def test_every_verifier_message_has_a_case(d: str, cases: dict[str, list[Case]]) -> None:
    if d not in cases:
        pytest.fail(f"dialect '{d}' has no test/dialects/{d}/invalid.mlir")
    messages = [m for case in cases[d] for m in case.messages]
    missing = [s for s in verifier_sites(d) if not any(s.pattern.search(m) for m in messages)]
    assert not missing, (
        f"verifier messages of {source_label(d)} with no case in test/dialects/{d}/invalid.mlir:\n"
        + "\n".join(f"  {s}" for s in missing)
    )


def test_every_shared_helper_message_has_a_case(cases: dict[str, list[Case]]) -> None:
    messages = [m for ds in cases.values() for case in ds for m in case.messages]
    missing = [
        s
        for h in SHARED_HELPERS
        for s in verifier_sites(h)
        if not any(s.pattern.search(m) for m in messages)
    ]
    assert not missing, (
        "verifier messages of the shared helpers with no case in any "
        "test/dialects/*/invalid.mlir:\n" + "\n".join(f"  {s}" for s in missing)
    )


def test_site_extraction_finds_known_messages() -> None:
    """The AST walk sees verifier messages where they are and skips non-verifier raises."""
    graph = verifier_sites("graph")
    assert any(
        s.pattern.fullmatch("graph.reshape: cannot reshape [8] (8 elements) to [3] (3 elements)")
        for s in graph
    )
    # The graph dialect is a package: every module of it is scanned.
    assert {Path(s.file).name for s in graph} >= {
        "base.py",
        "matrix.py",
        "elementwise.py",
        "layout.py",
        "normalization.py",
        "attention.py",
    }
    assert any(s.pattern.fullmatch("graph.dropout: p must be in [0, 1), got 1.0") for s in graph)
    # {self.name} is resolved to the op's name: another op's message does not match.
    assert not any(
        s.pattern.fullmatch("graph.mse_loss: cannot reshape [8] (8 elements) to [3] (3 elements)")
        for s in graph
    )
    exec_sites = verifier_sites("exec")
    # ProgramOp.graph() raises VerifyException but is a lookup, not a verifier.
    assert not any("has no exec.graph region" in s.source for s in exec_sites)
    assert any("expected exactly one exec.graph" in s.source for s in exec_sites)
