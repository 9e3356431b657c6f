"""The compile cache: the planned exec IR of a compiled function, kept on disk.

A Program compiles each (function, batch shape) by building its graph-level IR and
running the pipeline (passes/pipelines.py) down to a planned exec program. The pipeline
is the slow part (seconds for a GPT), and its output depends only on:

- the graph-level module as built (printed in generic form: a structural text with
  SSA names renumbered by the printer, so equal models give equal text);
- the pipeline's steps and their options (backend, device capability: architecture,
  TF32, cuBLASLt, the device name, the autotune cache's path) and the autotune cache
  file's content (it may change a kernel choice);
- the compiler itself: aicfc's version and xDSL's, and a digest of the sources that
  decide the output (dialects/, passes/, the shared runtime modules: registry,
  selector, NumPy reference), so that an edited checkout never reads an entry written
  by other code.

`cache_key` hashes all of that (SHA-256); an entry is `<folder>/<key>.mlir`, the planned
module's text after a first line naming the format and the key. A second process that
compiles the same model for the same device parses that file instead of running the
pipeline. An entry that cannot be read, does not parse or verify, or names another key
or format (corrupt or stale) is ignored with a `CompileCacheWarning` and rewritten by
the compile that follows. Entries are written whole or not at all (runtime/files.py);
a folder that cannot be written warns once and the Program compiles on.

The folder: the `cache_dir` argument of `aicfc.compile` (a path, or False to disable
the cache), else `$AICFC_CACHE_DIR` (empty, "0", "off" or "none" disables it), else
`$XDG_CACHE_HOME/aicfc/compiled` (XDG_CACHE_HOME defaults to ~/.cache).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from aicfc.ir import IRError, parse_module, print_module
from aicfc.runtime.files import WriteError, write_text

CACHE_ENV = "AICFC_CACHE_DIR"
FORMAT = 1
"""The entry format: bump it when the file layout changes."""
OFF = ("", "0", "off", "none", "false")
"""Values of $AICFC_CACHE_DIR that disable the cache."""
HEADER = "// aicfc compile cache"

_PACKAGE = Path(__file__).resolve().parent
_SOURCES = ("dialects", "passes", "runtime")
"""Folders (beside aicfc/) whose Python sources decide the planned IR. runtime/'s own
modules only (registry, selector, reference); its backends load, they do not compile."""


class CompileCacheWarning(UserWarning):
    """A compile-cache entry or folder that cannot be used: it is ignored (the pipeline
    runs instead) and rewritten."""


def _source_root() -> Path:
    """The folder holding dialects/, passes/ and runtime/: the repository for an editable
    install, the installed `aicfc` package for a wheel."""
    repo = _PACKAGE.parent
    return repo if (repo / "passes").is_dir() else _PACKAGE


def _files(root: Path) -> Iterable[Path]:
    for name in _SOURCES:
        folder = root / name
        if not folder.is_dir():
            continue
        pattern = "*.py" if name == "runtime" else "**/*.py"
        yield from sorted(folder.glob(pattern))
    yield from sorted(_PACKAGE.glob("*.py"))


@cache
def compiler_digest() -> str:
    """aicfc's and xDSL's versions and the SHA-256 of the compiler's sources (once per
    process: a few milliseconds)."""
    h = hashlib.sha256()
    for dist in ("aicfc", "xdsl"):
        try:
            h.update(f"{dist} {version(dist)}\n".encode())
        except PackageNotFoundError:
            h.update(f"{dist} unknown\n".encode())
    root = _source_root()
    for path in _files(root):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes ("missing" when it cannot be read), for inputs such as
    the autotune cache that change what the pipeline selects."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def cache_key(module: ModuleOp, passes: Iterable[str], inputs: Mapping[str, str]) -> str:
    """SHA-256 of the graph-level `module` (generic form), the pipeline's pass specs in
    order, further `inputs` that decide its output (name -> value) and the compiler."""
    h = hashlib.sha256()
    h.update(f"format {FORMAT}\ncompiler {compiler_digest()}\n".encode())
    for spec in passes:
        h.update(f"pass {spec}\n".encode())
    for name in sorted(inputs):
        h.update(f"input {name} = {inputs[name]}\n".encode())
    h.update(print_module(module, generic=True).encode())
    return h.hexdigest()


def cache_folder(cache_dir: str | os.PathLike[str] | bool | None = None) -> Path | None:
    """The cache's folder for the `cache_dir` argument (see the module docstring), or None
    when the cache is disabled."""
    if cache_dir is False or cache_dir == "":
        return None
    if cache_dir is None or cache_dir is True:
        env = os.environ.get(CACHE_ENV)
        if env is not None:
            return None if env.strip().lower() in OFF else Path(env).expanduser()
        home = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
        return (Path(home) / "aicfc" / "compiled").expanduser()
    return Path(cache_dir).expanduser()


class CompileCache:
    """Planned exec modules by key in `folder` (created on the first store)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._warned_write = False

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.mlir"

    def load(self, key: str, ctx: Context, programs: Iterable[str]) -> ModuleOp | None:
        """The module stored under `key`, or None when there is none; an entry that is
        corrupt, stale or lacks one of the exec.programs named `programs` warns and is
        ignored."""
        path = self.path(key)
        try:
            text = path.read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError) as e:
            return self._unusable(path, f"it cannot be read ({e})")
        first, _, body = text.partition("\n")
        if first != self._header(key):
            return self._unusable(path, f"its first line is {first[:120]!r}, not this key's")
        try:
            module = parse_module(body, str(path), ctx, line_offset=1)
        except IRError as e:
            return self._unusable(path, f"it does not parse ({str(e).splitlines()[0]})")
        names = {getattr(op, "sym_name", None) for op in module.ops}
        found = {n.data for n in names if n is not None and hasattr(n, "data")}
        missing = [p for p in programs if p not in found]
        if missing:
            return self._unusable(path, f"it has no exec.program @{missing[0]}")
        return module

    def store(self, key: str, module: ModuleOp) -> None:
        """Write the entry whole (atomically); a folder that cannot be written warns once."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_text(self.path(key), self._header(key) + "\n" + print_module(module))
        except (OSError, WriteError) as e:
            if not self._warned_write:
                self._warned_write = True
                warnings.warn(
                    CompileCacheWarning(
                        f"compile cache folder '{self.folder}' cannot be written ({e}); "
                        "compiled programs are not cached"
                    ),
                    stacklevel=4,
                )

    @staticmethod
    def _header(key: str) -> str:
        return f"{HEADER} format {FORMAT} key {key}"

    @staticmethod
    def _unusable(path: Path, why: str) -> None:
        warnings.warn(
            CompileCacheWarning(
                f"compile cache entry '{path}' is ignored: {why}; the program is compiled "
                "again and the entry rewritten"
            ),
            stacklevel=4,
        )
        return None
