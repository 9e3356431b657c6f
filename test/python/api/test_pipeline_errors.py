"""aicfc.run_pipeline gives aicfc-opt's messages for a bad pipeline text (it raised xDSL's
raw 'Unrecognized passes' and 'Incompatible types' from deep inside xDSL)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aicfc
from aicfc.passes.options import PassPipelineError
from aicfc.tools import aicfc_opt

ROOT = Path(__file__).resolve().parents[3]
STEP = (ROOT / "test/passes/aicfc-train-pipeline.mlir").read_text()

CASES = [
    (
        "aicfc-fsue",
        "unknown pass 'aicfc-fsue'; did you mean 'aicfc-fuse'? available: aicfc-analyze, "
        "aicfc-autocast, aicfc-data-parallel, aicfc-expand-backward, aicfc-fold-casts, "
        "aicfc-fold-constants, aicfc-fold-inplace, aicfc-fold-linear, "
        "aicfc-fold-narrowing-casts, aicfc-fold-weight-casts, aicfc-fuse, "
        "aicfc-fuse-train-step, aicfc-hoist-updates, aicfc-loss-scale, aicfc-lower-exec, "
        "aicfc-plan-memory, aicfc-train-pipeline and xDSL's (canonicalize, cse, dce); see "
        "docs/passes.md",
    ),
    (
        "aicfc-fuse{bogus=1}",
        "bad pass options in 'aicfc-fuse{bogus=1}': aicfc-fuse has no option 'bogus' "
        "(its options: patterns, exclude)",
    ),
    (
        "cse,aicfc-fuse{patterns=1}",
        "bad pass options in 'cse,aicfc-fuse{patterns=1}': option 'patterns' of aicfc-fuse "
        "expects a string (one of all, forward, backward), got 1",
    ),
]


@pytest.mark.parametrize(("spec", "message"), CASES)
def test_run_pipeline_says_what_aicfc_opt_says(spec, message, tmp_path, capsys):
    with pytest.raises(PassPipelineError) as info:
        aicfc.run_pipeline(aicfc.parse(STEP), spec)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)  # as documented before
    f = tmp_path / "step.mlir"
    f.write_text(STEP)
    assert aicfc_opt.main([str(f), "-p", spec]) == 1
    assert capsys.readouterr().err == f"aicfc-opt: error: {message}\n"


def test_an_unquoted_path_option_says_that_strings_need_quotes():
    """autotune_cache=at.json gave only xDSL's 'Unknown token'."""
    with pytest.raises(PassPipelineError) as info:
        aicfc.run_pipeline(aicfc.parse(STEP), "aicfc-lower-exec{autotune_cache=at.json}")
    text = str(info.value)
    assert text.startswith("bad pass pipeline 'aicfc-lower-exec{autotune_cache=at.json}':\n")
    assert "Unknown token" in text
    assert text.endswith(
        "(a string option value other than a plain word needs double quotes, e.g. "
        'aicfc-lower-exec{autotune_cache="at.json"} (on a shell command line, quote the whole '
        "-p argument: -p 'aicfc-lower-exec{autotune_cache=\"at.json\"}'))"
    )


def test_a_quoted_path_option_works(tmp_path):
    cache = tmp_path / "at.json"
    cache.write_text('{"version": 1, "entries": {}}')
    module = aicfc.run_pipeline(
        aicfc.parse(STEP), f'aicfc-expand-backward,aicfc-lower-exec{{autotune_cache="{cache}"}}'
    )
    assert "exec.program @train_step" in aicfc.print(module)


def test_a_malformed_autotune_cache_is_one_warning_line_in_aicfc_opt(tmp_path, capsys):
    """It was 'aicfc-opt: internal error: ValueError'; tuning results are recomputable,
    so the file is named, ignored, and the pass goes on."""
    cache = tmp_path / "at.json"
    cache.write_text("{not json")
    f = tmp_path / "step.mlir"
    f.write_text(STEP)
    spec = f'aicfc-expand-backward,aicfc-lower-exec{{autotune_cache="{cache}"}}'
    assert aicfc_opt.main([str(f), "-p", spec]) == 0
    out, err = capsys.readouterr()
    assert "exec.program @train_step" in out
    assert err == (
        f"aicfc-opt: warning: autotune cache '{cache}' cannot be used (Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1)); it is ignored, and the next "
        "tuning run rewrites it\n"
    )
