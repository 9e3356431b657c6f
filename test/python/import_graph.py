"""The import graph of the aicfc package, read from the sources (no module is imported).

    graph = scan()                      # every aicfc module and the aicfc modules it imports
    graph.imports["aicfc.runtime.plan"] # [Import(target="aicfc.dialects.exec", line=..., ...)]
    find_cycles(graph)                  # [["aicfc.a", "aicfc.b", "aicfc.a"], ...]

A module's name is its installed one: pyproject.toml's `[tool.setuptools.package-dir]`
maps the folders (`runtime/` is `aicfc.runtime`, `runtime/cuda/abi.py` is
`aicfc.runtime.cuda.abi`). Every import is found, wherever it sits (module level,
inside a function, under `if TYPE_CHECKING:`): `import a.b`, `from a import b` (`a`,
and `a.b` when that is a module of the package), relative imports, and calls of
`importlib.import_module("a.b")`, `import_module(...)` and `__import__("a.b")` whose
name is a string literal (with `package=` for a relative one). Imports of modules
outside aicfc are left out. Dynamic names (a variable, an f-string) cannot be read
and are not edges.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Import:
    """One import of an aicfc module: where it is and how it is written."""

    target: str
    path: str
    line: int
    type_only: bool  # under `if TYPE_CHECKING:` (never runs)
    how: str  # "import", "from", "importlib"


@dataclass
class ImportGraph:
    """Module name -> its source path and the aicfc modules it imports."""

    paths: dict[str, str] = field(default_factory=dict)
    imports: dict[str, list[Import]] = field(default_factory=dict)

    def edges(self, include_type_only: bool = False) -> dict[str, set[str]]:
        return {
            m: {i.target for i in imps if include_type_only or not i.type_only}
            for m, imps in self.imports.items()
        }


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Installed package name -> its source folder (pyproject.toml's package-dir)."""
    with open(root / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {package: root / folder for package, folder in mapping.items()}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the installed package: name -> source file."""
    files: dict[str, Path] = {}
    for package, folder in package_dirs(root).items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if any(part in ("__pycache__", "Output") or part.startswith(".") for part in rel.parts):
                continue
            parts = [package, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, name: str | None, level: int) -> str | None:
    """The absolute name of a relative import `from .<name>` (level dots) in `module`."""
    if level == 0:
        return name
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, name] if name else base)


def _import_module_call(node: ast.Call) -> tuple[str, str | None] | None:
    """(name, package) of `importlib.import_module("x", package=...)` / `__import__("x")`."""
    f = node.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    package = None
    for kw in node.keywords:
        if kw.arg == "package" and isinstance(kw.value, ast.Constant):
            package = str(kw.value.value)
    if called == "import_module" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
        package = str(node.args[1].value)
    return first.value, package


def imports_of(module: str, path: Path, known: set[str], root: Path = ROOT) -> list[Import]:
    """The aicfc modules that the source of `module` imports, in source order."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    rel = str(path.relative_to(root))
    found: list[Import] = []

    def add(target: str | None, line: int, type_only: bool, how: str) -> None:
        if target and (target == "aicfc" or target.startswith("aicfc.")):
            found.append(Import(target, rel, line, type_only, how))

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, type_only, "import")
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.module, node.level)
            add(base, node.lineno, type_only, "from")
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    add(sub, node.lineno, type_only, "from")
        elif isinstance(node, ast.Call):
            call = _import_module_call(node)
            if call is not None:
                name, package = call
                if name.startswith(".") and package:
                    level = len(name) - len(name.lstrip("."))
                    name = _resolve(package, True, name.lstrip(".") or None, level) or name
                add(name, node.lineno, type_only, "importlib")
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return found


def scan(root: Path = ROOT) -> ImportGraph:
    """The import graph of every module of the package."""
    files = module_files(root)
    known = set(files)
    graph = ImportGraph()
    for module, path in files.items():
        graph.paths[module] = str(path.relative_to(root))
        graph.imports[module] = imports_of(module, path, known, root)
    return graph


def find_cycles(graph: ImportGraph) -> list[list[str]]:
    """Every strongly connected set of modules that import each other (not counting
    `if TYPE_CHECKING:` imports), each reported as one cycle through it: [a, b, ..., a]."""
    edges = graph.edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                components.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    return [_cycle_through(comp, edges) for comp in components]


def _cycle_through(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the component's first module back to itself."""
    start = component[0]
    members = set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    return [*paths[v], start]
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return [*component, start]
