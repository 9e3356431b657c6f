"""examples/train_char_gpt.py: a short run prints its figures, its --emit-mlir output goes
through aicfc-opt (every pass of the train pipeline, and the analysis) and aicfc-run, and bad
arguments are usage errors.

The full default run (1,000 steps, its bits per character and time) is measured by hand
and stated in the README; here a few steps keep CI fast.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import aicfc

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@functools.cache
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "train_char_gpt", ROOT / "examples/train_char_gpt.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_short_run_prints_baselines_bits_and_a_sample(capsys):
    bits = example().main(["--steps", "3", "--batch-size", "4", "--sample-length", "20"])
    out = capsys.readouterr().out
    assert math.isfinite(bits) and 4.0 < bits < 7.5  # 3 steps: near the uniform log2(96) = 6.58
    assert "standard library" in out and "tokens/s" in out
    uni = float(re.search(r"unigram \(add-one\)\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bi = float(re.search(r"bigram \(add-one\)\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    assert 3.0 < bi < uni < 5.5  # the stdlib's text: about 3.5 and 4.7 bits
    assert f"GPT                {bits:.3f}" in out
    sample = out.split("sample (temperature 0.8):\n", 1)[1]
    assert sample.startswith("def ") and len(sample.rstrip("\n")) >= len("def ") + 1


def test_schedule_clip_and_plot_write_a_png(tmp_path, capsys):
    """--schedule cosine --clip 1.0 --plot: the run trains with both inside the step and
    writes a PNG of its curves."""
    png = tmp_path / "gpt.png"
    args = ["--steps", "4", "--batch-size", "2", "--sample-length", "0"]
    bits = example().main([*args, "--schedule", "cosine", "--clip", "1.0", "--plot", str(png)])
    assert math.isfinite(bits) and 4.0 < bits < 7.5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"loss curves and lr schedule: {png}" in capsys.readouterr().out


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gpt") / "char_gpt.mlir"
    assert math.isnan(example().main(["--emit-mlir", str(path), "--batch-size", "2"]))
    return path


def test_emit_mlir_goes_through_every_pass(emitted):
    text = emitted.read_text()
    assert text.startswith("// The char-level GPT train step (gpt-tiny")
    assert "graph.embedding" in text and "graph.causal_mask" in text
    steps = ",".join(step.passes for step in aicfc.train_pipeline("numpy"))
    done = subprocess.run(
        [BIN / "aicfc-opt", emitted, "-p", steps], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "exec.program @train_step" in done.stdout and "exec.program @predict" in done.stdout
    report = subprocess.run(
        [BIN / "aicfc-opt", emitted, "-p", "aicfc-analyze", "-o", "/dev/null"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert report.returncode == 0, report.stderr


def test_emit_mlir_trains_with_aicfc_run(emitted, tmp_path):
    done = subprocess.run(
        [
            BIN / "aicfc-run",
            emitted,
            "--steps",
            "4",
            "--print-every",
            "1",
            "-o",
            tmp_path / "o.npz",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    losses = [float(v) for v in re.findall(r"loss[ =:]+([\d.]+)", done.stdout)]
    assert len(losses) == 4 and losses[-1] < losses[0], done.stdout  # the same batch 4 times


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "argument --steps: must be > 0, got 0"),
        (["--config", "huge"], "argument --config: invalid choice: 'huge'"),
        (["--prompt", "\u00e9"], "argument --prompt: needs at least one newline or printable"),
        (["--schedule", "step"], "argument --schedule: invalid choice: 'step'"),
        (["--clip", "-1"], "argument --clip: must be > 0, got -1"),
    ],
)
def test_bad_arguments_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        example().main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {message}" in err and "Traceback" not in err
