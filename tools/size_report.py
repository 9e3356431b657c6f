"""Lines per source file, against the project's size limits (CONTRIBUTING.md, "Invariants").

A source file above 1,000 lines fails the check (exit code 1, a `FAIL:` line);
a pass above 300 lines or a dialect file above 800 lines gets an advisory
`note:` line suggesting a split, and does not fail. Source files are the .py,
.cu and .cuh files that git tracks or would track (ignored files such as .venv/
and lit's Output/ are skipped); outside a git work tree every such file under
the root is counted.

    python tools/size_report.py [--root DIR] [--top N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SOURCE_SUFFIXES = (".py", ".cu", ".cuh")
SKIP_DIRS = frozenset({".git", ".venv", "build", "dist", "Output", "__pycache__", ".mypy_cache"})


@dataclass(frozen=True)
class Limit:
    """Files under `folder` ("" = everywhere) above `max_lines` lines fail or are reported."""

    what: str
    folder: str
    max_lines: int
    fails: bool

    def applies(self, path: str) -> bool:
        return path.startswith(self.folder)


LIMITS = (
    Limit("source file", "", 1000, fails=True),
    Limit("file in passes/", "passes/", 300, fails=False),
    Limit("file in dialects/", "dialects/", 800, fails=False),
)


@dataclass(frozen=True)
class Finding:
    path: str
    lines: int
    limit: Limit

    def __str__(self) -> str:
        if self.limit.fails:
            return (
                f"FAIL: {self.path} has {self.lines} lines, above the "
                f"{self.limit.max_lines}-line limit for a {self.limit.what}"
            )
        hard = max(limit.max_lines for limit in LIMITS if limit.fails)
        return (
            f"note: {self.path} has {self.lines} lines, above the {self.limit.max_lines}-line "
            f"guideline for a {self.limit.what}; consider splitting it (advisory; the check "
            f"fails only above {hard} lines)"
        )


def source_files(root: Path) -> list[str]:
    """Paths (relative, with '/') of the source files under `root`."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        paths = [p for p in out.splitlines() if p.endswith(SOURCE_SUFFIXES)]
        return sorted(p for p in paths if (root / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and not SKIP_DIRS & set(rel.parts):
            found.append(rel.as_posix())
    return sorted(found)


def count_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8", errors="replace").splitlines())


def scan(root: Path) -> tuple[dict[str, int], list[Finding]]:
    """Line counts of every source file and the limits they exceed (failures first)."""
    counts = {p: count_lines(root / p) for p in source_files(root)}
    findings = [
        Finding(p, n, limit)
        for p, n in counts.items()
        for limit in LIMITS
        if limit.applies(p) and n > limit.max_lines
    ]
    findings.sort(key=lambda f: (not f.limit.fails, -f.lines, f.path))
    return counts, findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--top", type=int, default=10, help="largest files to list")
    args = parser.parse_args(argv)
    counts, findings = scan(args.root)
    total = sum(counts.values())
    print(f"{len(counts)} source files, {total} lines; largest:")
    for path, n in sorted(counts.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {n:6d}  {path}")
    for f in findings:
        print(f)
    failures = [f for f in findings if f.limit.fails]
    if failures:
        print(f"{len(failures)} file(s) above the hard limit: split them.")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `size_report.py | head`: the reader left, nothing to report
        sys.stderr.close()
        sys.exit(0)
