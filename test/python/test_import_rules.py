"""The layers import one way, and no modules import each other in a circle.

The sources are read, never imported (test/python/import_graph.py): every import
counts, at module level, inside a function, under `if TYPE_CHECKING:`, and
`importlib.import_module("...")` / `__import__("...")` with a literal name. The
layers (docs/architecture.md §0):

    dialects        aicfc.dialects.*
    passes          aicfc.passes.*
    runtime         the shared runtime: aicfc.runtime and its modules outside numpy/, cuda/
    runtime.numpy   aicfc.runtime.numpy.*   (the NumPy backend)
    runtime.cuda    aicfc.runtime.cuda.*    (the CuPy backend)
    tools           aicfc.tools.*
    api             aicfc and its other modules (compile, Program, backends, ...)

Rules: a dialect imports no pass, no runtime and no API; a pass imports no
concrete backend and no API, and of the shared runtime only `PASSES_MAY_READ`
(the data and rules that compiling needs); the shared runtime imports no
concrete backend, no pass and no API; the two backends never import each other
(nor passes, nor the API). A violation names the importing file, its line and the
rule.

Cycles: the import graph without `if TYPE_CHECKING:` imports (they never run) must
have no cycle; a function-level import counts (a lazy import is still a
dependency). `ALLOWED_EDGES` lists the imports that may close a cycle, each with
its reason; an entry that no longer closes one fails the test, so it is deleted
when it stops being needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from import_graph import ROOT, ImportGraph, find_cycles, scan

LAYERS: tuple[tuple[str, str], ...] = (
    ("aicfc.dialects", "dialects"),
    ("aicfc.passes", "passes"),
    ("aicfc.runtime.numpy", "runtime.numpy"),
    ("aicfc.runtime.cuda", "runtime.cuda"),
    ("aicfc.runtime", "runtime"),
    ("aicfc.tools", "tools"),
    ("aicfc.kernels", "kernels"),
    ("aicfc", "api"),
)
"""Module prefix -> layer, most specific first."""

FORBIDDEN: dict[str, frozenset[str]] = {
    "dialects": frozenset({"passes", "runtime", "runtime.numpy", "runtime.cuda", "api", "tools"}),
    "passes": frozenset({"runtime.numpy", "runtime.cuda", "api", "tools"}),
    "runtime": frozenset({"runtime.numpy", "runtime.cuda", "passes", "api", "tools"}),
    "runtime.numpy": frozenset({"runtime.cuda", "passes", "api", "tools"}),
    "runtime.cuda": frozenset({"runtime.numpy", "passes", "api", "tools"}),
    "api": frozenset({"tools"}),
}
"""Layer -> the layers it must not import."""

PASSES_MAY_READ = (
    "aicfc.runtime",
    "aicfc.runtime.backend_names",
    "aicfc.runtime.registry",
    "aicfc.runtime.registry_cuda",
    "aicfc.runtime.selector",
    "aicfc.runtime.reference",
    "aicfc.runtime.interpreter",
    "aicfc.runtime.schedule",
)
"""The shared runtime modules a pass may import: backend and kernel-family names, the
kernel registry (plain data), the selector's rules, the NumPy reference with its
interpreter (constant folding), and the launches' hazards (memory planning).
docs/architecture.md lists the same."""

ALLOWED_EDGES: dict[tuple[str, str], str] = {
    (
        "aicfc.dialects.canonicalization",
        "aicfc.dialects.canonicalization.graph",
    ): "GraphCanonicalization.get_patterns imports the patterns when canonicalize first asks "
    "(xDSL's lazy attachment): the dialect stays declarative and its import starts no cycle",
}
"""Imports (importer, imported) that may close a cycle, with the reason."""


def layer_of(module: str) -> str:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"{module} is in no layer")


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return scan()


def violations(graph: ImportGraph) -> list[str]:
    """Every import that breaks a layer rule, as 'path:line: a imports b (rule)'."""
    found = []
    for module, imports in sorted(graph.imports.items()):
        layer = layer_of(module)
        for imp in imports:
            target = layer_of(imp.target)
            if target in FORBIDDEN.get(layer, ()):
                found.append(
                    f"{imp.path}:{imp.line}: {module} ({layer}) imports {imp.target} "
                    f"({target}), which the {layer} layer must not import"
                )
            elif layer == "passes" and target == "runtime" and imp.target not in PASSES_MAY_READ:
                found.append(
                    f"{imp.path}:{imp.line}: {module} imports {imp.target}, not one of the "
                    f"runtime modules passes may read ({', '.join(PASSES_MAY_READ)})"
                )
    return found


def test_the_scan_sees_every_layer_and_every_kind_of_import(graph):
    layers = {layer_of(m) for m in graph.paths}
    assert layers >= {"dialects", "passes", "runtime", "runtime.numpy", "runtime.cuda", "api"}
    hows = {i.how for imports in graph.imports.values() for i in imports}
    assert hows >= {"import", "from"}  # importlib calls: see test_a_planted_violation_is_found
    assert any(i.type_only for imports in graph.imports.values() for i in imports)
    # A function-level import is seen: the CuPy backend's lazy `import aicfc.kernels`.
    assert any(i.target == "aicfc.kernels" for i in graph.imports["aicfc.runtime.cuda.abi"])


def test_the_layers_import_one_way(graph):
    found = violations(graph)
    assert not found, "import rules broken:\n" + "\n".join(found)


def test_no_modules_import_each_other_in_a_circle(graph):
    pruned = ImportGraph(
        graph.paths,
        {
            m: [i for i in imports if (m, i.target) not in ALLOWED_EDGES]
            for m, imports in graph.imports.items()
        },
    )
    cycles = find_cycles(pruned)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("edge", list(ALLOWED_EDGES), ids=lambda e: f"{e[0]}->{e[1]}")
def test_each_allowed_edge_still_closes_a_cycle(graph, edge):
    importer, imported = edge
    assert any(i.target == imported for i in graph.imports.get(importer, ())), (
        f"{importer} no longer imports {imported}: delete its ALLOWED_EDGES entry"
    )
    only = ImportGraph(
        graph.paths,
        {
            m: [i for i in imports if (m, i.target) not in ALLOWED_EDGES or (m, i.target) == edge]
            for m, imports in graph.imports.items()
        },
    )
    assert any(importer in c and imported in c for c in find_cycles(only)), (
        f"{importer} -> {imported} closes no cycle any more: delete its ALLOWED_EDGES entry"
    )


def test_the_architecture_doc_lists_what_passes_may_read():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for module in PASSES_MAY_READ[1:]:
        path = "runtime/" + module.rsplit(".", 1)[1] + ".py"
        assert f"`{path}`" in doc, f"docs/architecture.md does not list {path} for passes"


def test_a_planted_violation_is_found(tmp_path: Path):
    """The rules can fail: shared runtime modules that reach a backend lazily, through a
    literal importlib call and a relative import, and a dialect that imports a pass."""
    import import_graph

    files = {
        "pyproject.toml": "[tool.setuptools.package-dir]\n"
        + "".join(f'"aicfc.{p}" = "{p}"\n' for p in ("runtime", "dialects"))
        + '"aicfc" = "aicfc"\n',
        "aicfc/__init__.py": "",
        "dialects/__init__.py": "",
        "dialects/ops.py": "x = __import__('aicfc.passes.fuse')\n",
        "runtime/__init__.py": "",
        "runtime/cuda/__init__.py": "",
        "runtime/cuda/abi.py": "from aicfc.runtime import plan\n",
        "runtime/plan.py": "def f():\n    import importlib\n\n"
        "    return importlib.import_module('aicfc.runtime.cuda.abi')\n",
        "runtime/store.py": "def g():\n    from .cuda import abi\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    planted = import_graph.scan(tmp_path)
    found = violations(planted)
    assert [v.split(" (")[0] for v in found] == [
        "dialects/ops.py:1: aicfc.dialects.ops",
        "runtime/plan.py:4: aicfc.runtime.plan",
        "runtime/store.py:2: aicfc.runtime.store",  # the package runtime/cuda/
        "runtime/store.py:2: aicfc.runtime.store",  # and its module abi
    ]
    assert "imports aicfc.passes.fuse (passes), which the dialects layer" in found[0]
    assert "imports aicfc.runtime.cuda.abi (runtime.cuda)" in found[1]
    assert "imports aicfc.runtime.cuda (runtime.cuda)" in found[2]
    assert "imports aicfc.runtime.cuda.abi (runtime.cuda)" in found[3]
    assert find_cycles(planted) == [
        ["aicfc.runtime.cuda.abi", "aicfc.runtime.plan", "aicfc.runtime.cuda.abi"]
    ]
