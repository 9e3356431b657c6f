"""Run mypy on the `aicfc` package as it is installed, reporting errors at the source paths.

The source folders are installed as subpackages of one namespace
(`aicfc.dialects` is `dialects/`, see `[tool.setuptools.package-dir]` in
pyproject.toml). setuptools' editable install maps them with an import hook
that mypy cannot follow, so this script lays out the installed names as a tree
of symlinks under build/typecheck/ (rebuilt on every run, so new files are
seen), runs `python -m mypy` with the configuration in pyproject.toml, and
rewrites each reported path back to the file in the repository.

    python .ci/typecheck.py            # exit code is mypy's
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"


def package_dirs() -> dict[str, str]:
    """Installed package name -> source folder, from pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return mapping


def build_tree() -> dict[str, str]:
    """Lay out the symlink tree; return tree prefix -> source prefix (both with a slash)."""
    shutil.rmtree(TREE, ignore_errors=True)
    prefixes: dict[str, str] = {}
    packages = package_dirs()
    for package, folder in sorted(packages.items(), key=lambda kv: kv[0].count(".")):
        dest = TREE.joinpath(*package.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        src = ROOT / folder
        for entry in sorted(src.iterdir()):
            if entry.name == "__pycache__" or entry.name.startswith("."):
                continue
            if entry.is_dir() and f"{package}.{entry.name}" in packages:
                continue  # a mapped subpackage gets its own folder
            (dest / entry.name).symlink_to(entry)
        prefixes[os.path.relpath(dest, ROOT) + "/"] = folder.rstrip("/") + "/"
    return prefixes


def main() -> int:
    prefixes = build_tree()
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    # Longest tree prefix first, so build/typecheck/aicfc/dialects/ wins over .../aicfc/.
    ordered = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))
    for line in (proc.stdout + proc.stderr).splitlines():
        for tree_prefix, src_prefix in ordered:
            if line.startswith(tree_prefix):
                line = src_prefix + line[len(tree_prefix) :]
                break
        print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
