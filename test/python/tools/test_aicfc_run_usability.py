"""aicfc-run as a new user meets it: --help is the module docstring, exec IR picks
train_step, -o resumes with -i, files that are not .npz, labels out of range and an
unwritable -o are one-line errors before any step, and both GPU backend names work."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from aicfc.backends import resolve_backend
from aicfc.tools import aicfc_opt, aicfc_run
from aicfc.tools.aicfc_run import main

ROOT = Path(__file__).resolve().parents[3]
DIGITS = str(ROOT / "examples/digits_train_step.mlir")


def losses(stdout: str) -> dict[int, float]:
    return {int(s): float(v) for s, v in re.findall(r"step (\d+): loss ([0-9.e+-]+)", stdout)}


def test_help_is_the_module_docstring(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "params: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's nn.Linear default" in out
    assert "Each\nstep reuses the same inputs" in out  # the docstring's own line breaks
    assert "cupy (also called cuda)" in " ".join(out.split())


def test_exec_ir_defaults_to_train_step(tmp_path, capsys):
    lowered = tmp_path / "exec.mlir"
    assert aicfc_opt.main([DIGITS, "-p", "aicfc-train-pipeline", "-o", str(lowered)]) == 0
    capsys.readouterr()
    assert main([str(lowered), "--steps", "2"]) == 0  # 2 programs: train_step, predict
    out = capsys.readouterr().out
    assert "@train_step: 2 step(s)" in out and sorted(losses(out)) == [1, 2]


def test_output_resumes_training_with_inputs(tmp_path, capsys):
    """6 steps in one run equal 3 steps, then 3 more from the first run's -o."""
    assert main([DIGITS, "--steps", "6"]) == 0
    straight = losses(capsys.readouterr().out)
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main([DIGITS, "--steps", "3", "-o", str(first)]) == 0
    capsys.readouterr()
    assert main([DIGITS, "--steps", "3", "-i", str(first), "-o", str(second)]) == 0
    captured = capsys.readouterr()
    resumed = losses(captured.out)
    assert "skipping 'loss' from --inputs (an output of @train_step, not an argument)" in (
        captured.err
    )
    for step in (1, 3):
        assert resumed[step] == pytest.approx(straight[step + 3], rel=1e-6)
    with np.load(second) as d:
        assert float(d["0.weight.step"]) == 6.0


def test_a_file_that_is_not_npz_is_a_clear_error(capsys):
    assert main([DIGITS, "-i", DIGITS]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"aicfc-run: error: cannot read inputs '{DIGITS}': not an .npz file")
    assert "pickle" not in err and err.count("\n") == 1


def test_labels_out_of_range_are_checked_up_front(tmp_path, capsys):
    np.savez(tmp_path / "y.npz", y=np.arange(64, dtype=np.int32) % 12)
    assert main([DIGITS, "-i", str(tmp_path / "y.npz"), "--steps", "5"]) == 1
    captured = capsys.readouterr()
    assert captured.err.endswith(
        'aicfc-run: error: input "y": labels must be in [0, 10) for 10 classes (the last dim '
        "of the logits of the cross-entropy it feeds), got values from 0 to 11\n"
    )
    assert "step 1" not in captured.out


def test_unwritable_output_fails_before_any_step(tmp_path, capsys):
    target = tmp_path / "missing-dir" / "out.npz"
    assert main([DIGITS, "--steps", "3", "-o", str(target)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"aicfc-run: error: cannot write '{target}': No such file or directory "
        f"('{target.parent}')\n"
    )
    assert captured.out == ""


@pytest.mark.parametrize("name", ["cuda", "cupy"])
def test_both_gpu_backend_names_are_accepted(capsys, name):
    code = main([DIGITS, "--backend", name])
    err = capsys.readouterr().err
    try:
        resolve_backend("cupy")
    except aicfc_run.ExecError as e:  # no GPU here: both names give cupy's own reason
        assert code == 1 and err.strip() == f"aicfc-run: error: {e}"
    else:
        assert code == 0
    assert "unknown backend" not in err


def test_auto_says_which_backend_and_why(capsys):
    assert main([DIGITS, "--backend", "auto"]) == 0
    backend, reason = resolve_backend("auto")
    captured = capsys.readouterr()
    assert f"aicfc-run: backend {reason}\n" in captured.err
    assert f"on {backend.name}" in captured.out
