"""The user docs cannot drift from the code: every pass, option, pipeline step and stage
that the code defines is documented where the README says it is."""

from __future__ import annotations

import dataclasses
import re
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
