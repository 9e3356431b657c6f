"""Every lit file checks what it runs (CONTRIBUTING: RUN line first, FileCheck).

For each .mlir file that lit runs (test/lit.cfg.py: everything under test/ except
python/, Inputs/ and Output/):

- it has RUN lines, and every RUN line either pipes into `filecheck %s` or
  compares two outputs with `diff` (a RUN line that only runs a tool checks
  nothing but its exit code);
- every check prefix written in the file (`// FOO:`, `// FOO-NOT:`, ...) is
  checked by some RUN line: a prefix that no RUN line passes to filecheck is a
  set of cases, often the negative ones, that never runs. (FileCheck itself
  already fails on the converse, a RUN prefix without check lines.)
- no `FOO-NOT:` is followed directly by a `FOO-NEXT:`: the NOT would check the
  empty range between two adjacent lines, and so could never fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEST = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {"python", "Inputs", "Output"}
LIT_FILES = sorted(
    p for p in TEST.rglob("*.mlir") if not SKIPPED_DIRS & set(p.relative_to(TEST).parts)
)
IDS = [p.relative_to(TEST).as_posix() for p in LIT_FILES]

SUFFIXES = ("", "-NEXT", "-NOT", "-LABEL", "-SAME", "-DAG", "-EMPTY", "-COUNT")
CHECK_LINE = re.compile(r"//\s*([A-Z][A-Z0-9_]*?)(" + "|".join(SUFFIXES[1:]) + r")?:")
NOT_PREFIXES = {"RUN", "COM", "NOTE", "TODO", "XFAIL", "REQUIRES", "UNSUPPORTED"}
PREFIX_OPTION = re.compile(r"--check-prefix(?:es)?[= ](\S+)")


def run_lines(text: str) -> list[str]:
    return [line.split("RUN:", 1)[1].strip() for line in text.splitlines() if "RUN:" in line]


def checked_prefixes(run: str) -> set[str]:
    """The prefixes a RUN line hands to filecheck (CHECK unless it names others)."""
    if "filecheck" not in run:
        return set()
    named = PREFIX_OPTION.findall(run.split("filecheck", 1)[1])
    return {p for option in named for p in option.split(",")} or {"CHECK"}


def test_the_lit_files_are_found():
    assert len(LIT_FILES) > 30 and "passes/aicfc-fuse.mlir" in IDS


@pytest.mark.parametrize("path", LIT_FILES, ids=IDS)
def test_every_run_line_is_checked(path: Path):
    runs = run_lines(path.read_text())
    assert runs, f"{path.name} has no RUN line"
    for run in runs:
        assert re.search(r"\|\s*filecheck\s+%s", run) or re.search(r"&&\s*diff\s", run), (
            f"{path.name}: RUN line checks only an exit code (pipe it into `filecheck %s` "
            f"or compare with `diff`): {run}"
        )


@pytest.mark.parametrize("path", LIT_FILES, ids=IDS)
def test_every_check_prefix_is_run(path: Path):
    text = path.read_text()
    ran = set().union(*(checked_prefixes(r) for r in run_lines(text)))
    written = {m.group(1) for m in CHECK_LINE.finditer(text)} - NOT_PREFIXES
    never_run = sorted(written - ran)
    assert not never_run, (
        f"{path.name}: check lines with prefix {never_run} are never run (no RUN line passes "
        f"--check-prefix={never_run[0]} to filecheck)"
    )


@pytest.mark.parametrize("path", LIT_FILES, ids=IDS)
def test_no_check_not_right_before_a_check_next(path: Path):
    previous: dict[str, tuple[str | None, int]] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = CHECK_LINE.search(line)
        if not m or m.group(1) in NOT_PREFIXES:
            continue
        prefix, suffix = m.group(1), m.group(2)
        last, at = previous.get(prefix, (None, 0))
        assert not (suffix == "-NEXT" and last == "-NOT"), (
            f"{path.name}:{at}: {prefix}-NOT right before the {prefix}-NEXT of line {number} "
            "checks an empty range; pin the lines with -NEXT or move the NOT"
        )
        previous[prefix] = (suffix, number)
