"""The user docs cannot drift from the code: every pass, option, pipeline step and stage
that the code defines is documented where the README says it is."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

import aicfc
from aicfc.passes import get_all_passes
from aicfc.tools.aicfc_opt import XDSL_PASSES

ROOT = Path(__file__).resolve().parents[2]
PASSES_MD = (ROOT / "docs/passes.md").read_text()


def section(name: str) -> str:
    """The text of docs/passes.md under `### name`, up to the next heading."""
    found = re.search(rf"^### {re.escape(name)}\n(.*?)(?=^#)", PASSES_MD, re.M | re.S)
    assert found, f"docs/passes.md has no section '### {name}'"
    return found.group(1)


@pytest.mark.parametrize("name", sorted(get_all_passes()))
def test_every_pass_and_option_is_documented(name):
    text = section(name)
    cls = get_all_passes()[name]()
    for field in dataclasses.fields(cls):
        assert f"| `{field.name}` |" in text, f"option {field.name} of {name} is not in its table"


def test_the_explicit_pipeline_is_the_train_pipeline():
    explicit = ",".join(step.passes for step in aicfc.train_pipeline("numpy"))
    assert f"-p '{explicit}'" in PASSES_MD
    assert explicit in (ROOT / "README.md").read_text()
    for step in aicfc.train_pipeline("numpy"):
        assert f"| `{step.stage}` |" in PASSES_MD


def test_every_stage_is_in_the_api_page():
    api = (ROOT / "docs/api.md").read_text()
    for stage in aicfc.stage_names():
        assert f"| `{stage}` |" in api, stage


def test_the_registered_xdsl_passes_are_documented():
    for name in XDSL_PASSES:
        assert f"| `{name}` |" in PASSES_MD


def test_readme_links_exist():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to missing {target}"


# --- docs/design.md: the rationale the code points at ---------------------------------

DESIGN_MD = ROOT / "docs" / "design.md"
ORIGIN_CITATION = re.compile(r"(?i)\bseeds?[ _-]?0{2}[0-9]")
"""A citation of the origin documents, which are not part of this repository."""
DESIGN_REF = re.compile(r"design\.md#([A-Za-z0-9_-]+)")


def tracked_text_files() -> dict[str, str]:
    """Every file git tracks, as text (binary files skipped)."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    texts = {}
    for name in filter(None, names):
        path = ROOT / name.decode()
        if not path.is_file():
            continue  # deleted in the work tree, not yet committed
        data = path.read_bytes()
        if b"\0" not in data:
            texts[name.decode()] = data.decode("utf-8", errors="replace")
    return texts


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of `markdown` (lowercase, punctuation dropped,
    spaces to hyphens, `-1`, `-2`, ... for repeats); fenced code is not a heading."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} +(.*?) *#*$", line)
        if fenced or heading is None:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))  # links: their text
        slug = re.sub(r"[^\w\- ]", "", text.lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_github_anchors_follow_githubs_rule():
    text = "# A `code` title\n## 1. Fixed buffers\n## Fixed buffers\n## Fixed buffers\n"
    text += "```\n# not a heading\n```\n"
    expected = {"a-code-title", "1-fixed-buffers", "fixed-buffers", "fixed-buffers-1"}
    assert github_anchors(text) == expected


def test_no_file_cites_the_origin_documents():
    cited = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for name, text in tracked_text_files().items()
        for m in ORIGIN_CITATION.finditer(text)
    ]
    assert not cited, (
        "these lines cite documents that are not in the repository; say it in our own words "
        "in docs/design.md and point at its section instead:\n" + "\n".join(cited)
    )


def test_every_design_md_anchor_resolves():
    anchors = github_anchors(DESIGN_MD.read_text())
    broken = []
    for name, text in tracked_text_files().items():
        refs = [m.group(1) for m in DESIGN_REF.finditer(text)]
        if name == "docs/design.md":
            refs += re.findall(r"\]\(#([^)]*)\)", text)
        broken += [f"{name}: design.md#{ref}" for ref in refs if ref not in anchors]
    assert not broken, (
        f"references to sections docs/design.md does not have (it has {sorted(anchors)}):\n"
        + "\n".join(broken)
    )


def test_design_md_names_files_and_tests_that_exist():
    """Each section's "Where" and "Proof" stay true: every repository path in backticks
    exists, and every `file.py::test_name` is a test function of that file."""
    text = DESIGN_MD.read_text()
    missing = []
    for ref in re.findall(r"`([\w./-]+(?:::\w+)?)`", text):
        path, _, test = ref.partition("::")
        if "/" not in path or path.startswith("http"):
            continue  # a name, not a path
        if not (ROOT / path).exists():
            missing.append(f"{ref}: no file {path}")
        elif test and not re.search(rf"^def {test}\(", (ROOT / path).read_text(), re.M):
            missing.append(f"{ref}: {path} has no test {test}")
    assert not missing, "docs/design.md names what does not exist:\n" + "\n".join(missing)
