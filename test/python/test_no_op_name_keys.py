"""No table in the compiler is keyed by an op's name string, and no code branches on one.

Op facts are rows keyed by the op class (REFERENCE, VJP_RULES, ACTIVATIONS, the fusion
tables), as xDSL's interpreter keys `@impl(Op)`; passes match flags. The sources of aicfc/,
dialects/, passes/, runtime/ and tools/ are read (never imported) and these are refused:

- a dict literal with a key like "graph.relu", "autodiff.adam_step" or "exec.copy";
- a comparison with such a string, or with a tuple/list/set of them
  (`op.name == "graph.relu"`, `spec.op in ("graph.matmul", ...)`);
- `.startswith("graph.")` (and the other dialects) on anything, and a `match` case on such
  a string.

The kernel registry keeps each kernel's op name as a field of its row (`KernelSpec.op`,
plain data that imports no xDSL; docs/architecture.md §5): rows are tuples and calls, which
this test allows. A violation names the file, the line and the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("aicfc", "dialects", "passes", "runtime", "tools")
OP_NAME = re.compile(r"^(graph|autodiff|exec)\.\w+$")
DIALECT_PREFIX = re.compile(r"^(graph|autodiff|exec)\.?$")


def _op_names(node: ast.AST) -> bool:
    """An op-name string literal, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(OP_NAME.match(node.value))
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_op_names(e) for e in node.elts)
    return False


def violations_in(path: Path, text: str) -> list[str]:
    """'file:line: code (why)' for each op-name key or comparison in one source."""
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    found: list[str] = []

    def report(node: ast.AST, why: str) -> None:
        code = ast.get_source_segment(text, node) or "?"
        found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {code.splitlines()[0]} ({why})")

    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Dict):
            if any(k is not None and _op_names(k) for k in node.keys):
                report(node, "a table keyed by op-name strings: key it by the op class")
        elif isinstance(node, ast.Compare):
            if any(_op_names(x) for x in (node.left, *node.comparators)):
                report(node, "compares with an op-name string: use the op class or its flags")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and DIALECT_PREFIX.match(node.args[0].value)
        ):
            report(node, "branches on an op's dialect prefix: use the op class or its flags")
        elif isinstance(node, ast.MatchValue) and _op_names(node.value):
            report(node, "a match case on an op-name string: use a class pattern")
    return found


def test_the_scan_finds_each_kind_of_violation(tmp_path):
    planted = tmp_path / "planted.py"
    text = (
        'TABLE = {"graph.relu": 1}\n'
        'ok = op.name == "graph.relu"\n'
        'ok = spec.op in ("graph.matmul", "graph.add")\n'
        'ok = op.name.startswith("autodiff.")\n'
        "match op.name:\n"
        '    case "exec.copy":\n'
        "        pass\n"
        # allowed: registry rows, other strings, field names
        'ROWS = (("graph.relu", 1),)\n'
        'spec = KernelSpec(op="graph.relu")\n'
        'ok = f.name != "name"\n'
        'D = {"relu": 1}\n'
    )
    planted.write_text(text)
    found = violations_in(planted, text)
    assert [v.split(":")[1] for v in found] == ["1", "2", "3", "4", "6"], found
    assert "a table keyed by op-name strings" in found[0]


def test_no_table_or_branch_is_keyed_by_an_op_name_string():
    found = [
        v
        for folder in SOURCES
        for path in sorted((ROOT / folder).rglob("*.py"))
        for v in violations_in(path, path.read_text())
    ]
    assert not found, "op-name strings used as keys or in comparisons:\n" + "\n".join(found)
