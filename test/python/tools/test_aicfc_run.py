"""aicfc-run: trains a train step from a file, with npz or generated data; clean errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aicfc.tools.aicfc_run import main

ROOT = Path(__file__).resolve().parents[3]
DIGITS = str(ROOT / "examples/digits_train_step.mlir")
STEP = str(ROOT / "test/passes/aicfc-train-pipeline.mlir")


def losses(stdout: str) -> dict[int, float]:
    return {int(s): float(v) for s, v in re.findall(r"step (\d+): loss ([0-9.e+-]+)", stdout)}


def test_trains_the_digits_step_on_generated_data(tmp_path, capsys):
    out = tmp_path / "out.npz"
    assert main([DIGITS, "--steps", "30", "--print-every", "10", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    loss = losses(captured.out)
    assert sorted(loss) == [1, 10, 20, 30]
    assert 2.0 < loss[1] < 2.7  # ln(10) = 2.30 for a fresh 10-class model
    assert loss[30] < 0.5 * loss[1]  # it fits the one random batch
    assert (
        "generated inputs x, y; 6 params; 23 states at their initial values (seed 0)"
        in captured.err
    )
    with np.load(out) as d:
        assert len(d.files) == 1 + 24 + 5  # + the hyperparameters, at their aicfc.init
        assert float(d["optim.0.lr"]) == 1e-3 and float(d["optim.0.beta2"]) == 0.999
        assert float(d["loss"]) == pytest.approx(loss[30], rel=1e-6)
        assert float(d["4.bias.step"]) == 30.0
        assert d["0.weight"].shape == (128, 64)


def test_generated_params_use_torch_linear_bounds(tmp_path, capsys):
    """After one Adam step (each entry moves by lr = 1e-3) |W| <= 1/sqrt(fan_in) + lr."""
    main([DIGITS, "-o", str(tmp_path / "out.npz")])
    with np.load(tmp_path / "out.npz") as d:
        for name, fan_in in (("0.weight", 64), ("0.bias", 64), ("2.weight", 128), ("4.bias", 128)):
            bound = 1 / np.sqrt(fan_in)
            assert np.abs(d[name]).max() <= bound + 1.001e-3, name
            if d[name].size >= 128:  # enough draws to come near the bound
                assert np.abs(d[name]).max() > 0.9 * bound, name


def test_same_seed_same_run_other_seed_other_data(capsys):
    main([STEP, "--steps", "2", "--seed", "3"])
    a = losses(capsys.readouterr().out)
    main([STEP, "--steps", "2", "--seed", "3"])
    b = losses(capsys.readouterr().out)
    main([STEP, "--steps", "2", "--seed", "4"])
    c = losses(capsys.readouterr().out)
    assert a == b and a != c


def test_npz_inputs_give_the_expected_loss(tmp_path, capsys):
    """With x, y and the params from the file, the loss is -mean log softmax(x W^T + b)[y]."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = np.array([1, 0, 1, 1], np.int32)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=y, **{"fc.weight": w, "fc.bias": b})
    assert main([STEP, "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    z = x.astype(np.float64) @ w.T + b
    z -= z.max(axis=1, keepdims=True)
    expected = float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(4), y]))
    assert losses(capsys.readouterr().out)[1] == pytest.approx(expected, rel=1e-5)
    with np.load(tmp_path / "out.npz") as d:
        assert np.max(np.abs(d["fc.weight"] - w)) == pytest.approx(1e-3, rel=1e-3)  # Adam step 1


def test_exec_ir_input_runs_the_same(tmp_path, capsys):
    lowered = tmp_path / "exec.mlir"
    subprocess.run(
        [
            str(Path(sys.executable).parent / "aicfc-opt"),
            STEP,
            "-p",
            "aicfc-train-pipeline",
            "-o",
            str(lowered),
        ],
        check=True,
    )
    main([str(lowered), "--steps", "3"])
    a = losses(capsys.readouterr().out)
    main([STEP, "--steps", "3"])
    assert a == losses(capsys.readouterr().out)


def test_predict_function_has_no_loss(capsys):
    assert main([DIGITS, "-f", "predict"]) == 0
    out = capsys.readouterr().out
    assert "output: float32[64, 10]" in out and "loss" not in out


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (None, ["-f", "nope"], "no function @nope in the module (functions: train_step, predict)"),
        (
            {"x": np.zeros((64, 64))},
            [],
            'input "x" (input) expects float32[64, 64], got float64[64, 64]',
        ),
        ({"q": np.zeros(2)}, [], "--inputs has 'q', which @train_step does not take"),
        (None, ["-i", "/nonexistent/in.npz"], "cannot read inputs '/nonexistent/in.npz'"),
        (None, ["--steps", "0"], "--steps and --label-classes must be >= 1"),
        (None, ["--seed", "-1"], "--seed must be >= 0, got -1"),
    ],
    ids=["function", "npz-dtype", "npz-unknown", "npz-missing", "steps", "seed"],
)
def test_errors_are_one_line(tmp_path, capsys, make, args, message):
    if make is not None:
        np.savez(tmp_path / "in.npz", **make)
        args = [*args, "-i", str(tmp_path / "in.npz")]
    assert main([DIGITS, *args]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "cannot read '{path}': not UTF-8 text (invalid start byte at byte 0)"),
        (b"", "aicfc-run: error: the module has no function to run"),
    ],
    ids=["not-utf8", "empty"],
)
def test_unusable_file_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "f.mlir"
    path.write_bytes(content)
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert message.format(path=path) in err and "Traceback" not in err


def test_ir_error_is_located(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %b = graph.relu %a : tensor<3xf32>\n"
        "  func.return %b : tensor<2xf32>\n}\n"
    )
    assert main([str(bad)]) == 1
    assert capsys.readouterr().err.startswith(f"{bad}:2:")


def test_console_script_installed(tmp_path):
    exe = Path(sys.executable).parent / "aicfc-run"
    r = subprocess.run([str(exe), STEP, "--steps", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(losses(r.stdout)) == [1, 2]
    r = subprocess.run([str(exe), str(tmp_path / "missing.mlir")], capture_output=True, text=True)
    assert r.returncode == 1 and "cannot open" in r.stderr and "Traceback" not in r.stderr


def test_a_bf16_step_starts_each_weight_copy_as_its_param_rounded(tmp_path, capsys):
    """A step lowered with aicfc-train-pipeline{precision=bf16} keeps a bf16 copy of each
    weight (aicfc-fold-weight-casts). After training each copy is its param rounded; a run
    given the params without their copies starts the copies from them (not at zeros), so
    it computes the loss of the run given the copies too."""
    import ml_dtypes

    from aicfc.tools.aicfc_opt import main as opt

    lowered = tmp_path / "bf16.mlir"
    src = Path(__file__).parents[2] / "passes" / "aicfc-fold-weight-casts.mlir"
    assert opt([str(src), "-p", "aicfc-train-pipeline{precision=bf16}", "-o", str(lowered)]) == 0
    assert '"0.weight.bf16"' in lowered.read_text()
    first, without = tmp_path / "first.npz", tmp_path / "without.npz"
    assert main([str(lowered), "--steps", "2", "-o", str(first)]) == 0
    with np.load(first) as z:
        state = dict(z)
    for name in ("0.weight", "0.bias"):
        copy = state[f"{name}.bf16"].view(ml_dtypes.bfloat16)
        assert copy.tobytes() == state[name].astype(ml_dtypes.bfloat16).tobytes(), name
    np.savez(without, **{k: v for k, v in state.items() if not k.endswith(".bf16")})
    capsys.readouterr()
    runs = []
    for given in (first, without):
        assert main([str(lowered), "--steps", "1", "-i", str(given)]) == 0
        runs.append(losses(capsys.readouterr().out)[1])
    assert runs[0] == runs[1]
