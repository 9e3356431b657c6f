"""Mistakes at the command line and in data files: one line, the documented exit code.

One exit-code rule for aicfc-opt and aicfc-run (tools/cli.py): 0 success, 1 a user's
mistake (the command line included: argparse's usage errors exited 2), 2 an internal
error, 130 Ctrl-C (test_file_faults.py).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

import aicfc
from aicfc.tools import aicfc_opt, aicfc_run

ROOT = Path(__file__).resolve().parents[3]
DIGITS = str(ROOT / "examples/digits_train_step.mlir")  # @train_step and @predict
SMALL = str(ROOT / "test/passes/aicfc-train-pipeline.mlir")


@pytest.mark.parametrize(
    ("main", "args", "message"),
    [
        (aicfc_run.main, [SMALL, "--steps", "x"], "argument --steps: invalid int value: 'x'"),
        (aicfc_run.main, [SMALL, "--nope"], "unrecognized arguments: --nope"),
        (aicfc_run.main, [], "the following arguments are required: file"),
        (aicfc_opt.main, [SMALL, "--nope"], "unrecognized arguments: --nope"),
        (aicfc_opt.main, [SMALL, "-t", "llvm"], "argument -t/--target: invalid choice: 'llvm'"),
    ],
)
def test_usage_errors_exit_1_like_every_other_mistake(capsys, main, args, message):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert f": error: {message}" in err and "Traceback" not in err


def damaged_copy(path: Path, out: Path) -> None:
    """`path` with one byte of its second member's data flipped (its CRC no longer matches)."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.infolist()[1]
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    raw[start + info.compress_size - 5] ^= 0xFF
    out.write_bytes(bytes(raw))


def test_an_npz_with_a_bad_crc_is_one_line_naming_the_file(tmp_path, capsys):
    """It was 'aicfc-run: internal error: BadZipFile: ...'."""
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    assert aicfc_run.main([SMALL, "-o", str(good)]) == 0
    damaged_copy(good, bad)
    capsys.readouterr()
    assert aicfc_run.main([SMALL, "-i", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"aicfc-run: error: cannot read inputs '{bad}': the file is damaged "
        "(Bad CRC-32 for file 'fc.weight.npy')\n"
    )


def test_a_predict_run_takes_a_training_checkpoint(tmp_path, capsys):
    """-f predict -i <a train step's -o> refused the optimizer-state keys (and 'loss')."""
    ckpt = tmp_path / "train.npz"
    assert aicfc_run.main([DIGITS, "--steps", "3", "-o", str(ckpt)]) == 0
    capsys.readouterr()
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    with np.load(ckpt) as train:
        state = {k: train[k] for k in train.files}
    np.savez(ckpt, x=x, **state)
    out = tmp_path / "pred.npz"
    assert aicfc_run.main([DIGITS, "-f", "predict", "-i", str(ckpt), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert (
        "aicfc-run: note: skipping 24 entries of a training checkpoint from --inputs ('loss', "
        "'0.weight.exp_avg', '0.weight.exp_avg_sq', ...): @predict updates no state and takes "
        "only its inputs and params"
    ) in err
    params = {k: v for k, v in state.items() if k.count(".") == 1}  # "0.weight", "4.bias"
    assert len(params) == 6 and int(state["0.weight.step"]) == 3
    expected = aicfc.run(aicfc.parse(Path(DIGITS).read_text()), "predict", {"x": x, **params})
    with np.load(out) as pred:
        assert sorted(pred.files) == ["output"]
        np.testing.assert_array_equal(pred["output"], expected["output"])  # the trained params


def test_a_misspelled_key_is_still_an_error_for_predict(tmp_path, capsys):
    ckpt = tmp_path / "p.npz"
    np.savez(ckpt, **{"0.wieght": np.zeros((128, 64), np.float32)})
    assert aicfc_run.main([DIGITS, "-f", "predict", "-i", str(ckpt)]) == 1
    assert "--inputs has '0.wieght', which @predict does not take" in capsys.readouterr().err
