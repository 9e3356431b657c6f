"""examples/train_digits.py refuses bad numbers (argparse's usage error) and paths in one line.

Regression: `--batch-size 0` ended in `ValueError: range() arg 3 must not be zero`.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_digits", ROOT / "examples/train_digits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "0"], "argument --batch-size: must be > 0, got 0"),
        (["--epochs", "-3"], "argument --epochs: must be > 0, got -3"),
        (["--epochs", "1.5"], "argument --epochs: expected an integer, got '1.5'"),
        (["--lr=-1e-3"], "argument --lr: must be > 0, got -1e-3"),
        (["--lr", "inf"], "argument --lr: must be > 0, got inf"),
        (["--lr", "fast"], "argument --lr: expected a number, got 'fast'"),
        (["--clip", "-1"], "argument --clip: must be > 0, got -1"),
        (["--accumulate", "0"], "argument --accumulate: must be > 0, got 0"),
    ],
)
def test_bad_numbers_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        example().main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f": error: {message}\n") and "Traceback" not in err


def test_unwritable_emit_mlir_path_is_one_line(tmp_path):
    target = tmp_path / "missing" / "step.mlir"
    with pytest.raises(SystemExit) as info:
        example().main(["--emit-mlir", str(target)])
    assert info.value.code == f"train_digits: cannot write '{target}': No such file or directory"


def test_schedule_clip_plot_and_save_write_a_png_and_a_checkpoint(tmp_path, capsys):
    png, ckpt = tmp_path / "curve.png", tmp_path / "ckpt.safetensors"
    args = ["--epochs", "2", "--schedule", "cosine", "--clip", "1.0", "--accumulate", "2"]
    accuracy = example().main([*args, "--plot", str(png), "--save", str(ckpt)])
    assert accuracy > 0.5  # 2 epochs of 11 updates: well above chance (0.1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import aicfc

    state = aicfc.load(ckpt).state
    assert int(state["lr_scheduler.last_epoch"]) == 22  # 2 epochs x 22 batches / 2
    assert f"loss curves and lr schedule: {png}" in capsys.readouterr().out
