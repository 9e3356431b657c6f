"""Regressions: IR and inputs that ran without a word while meaning something else.

- a use before its definition parsed and failed only in aicfc-lower-exec (internal
  KeyError): it is a located error in aicfc.parse, aicfc-run and aicfc-opt;
- a train step whose state argument has no next value (a misspelled result name) ran
  with the state frozen: a located IRWarning (UserWarning) at parse time;
- a 0-d x was reported with shape [1].
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.dialects.diagnostics import IRWarning
from aicfc.tools import aicfc_opt, aicfc_run

ROOT = Path(__file__).resolve().parents[3]
STEP = (ROOT / "test/passes/aicfc-train-pipeline.mlir").read_text()

USE_BEFORE_DEF = """\
func.func @f(%x: tensor<2xf32> {aicfc.role = "input", aicfc.name = "x"})
    -> (tensor<2xf32> {aicfc.name = "y"}) {
  %1 = graph.relu %0 : tensor<2xf32>
  %0 = graph.tanh %x : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
"""
MESSAGE = (
    "u.mlir:3:3: error: 'graph.relu' operand #0 (%0) is used before its definition "
    "('graph.tanh' at u.mlir:4:3)"
)


def test_use_before_definition_is_a_located_error_everywhere(tmp_path, capsys, monkeypatch):
    with pytest.raises(aicfc.IRError) as info:
        aicfc.parse(USE_BEFORE_DEF, "u.mlir")
    assert str(info.value) == MESSAGE
    monkeypatch.chdir(tmp_path)
    Path("u.mlir").write_text(USE_BEFORE_DEF)
    for main in (aicfc_opt.main, aicfc_run.main):
        assert main(["u.mlir"]) == 1
        assert capsys.readouterr().err == MESSAGE + "\n"


def test_lowered_and_planned_ir_dominates():
    """No false alarm on what the pipeline makes (exec.graph regions, planned buffers)."""
    lowered = aicfc.run_pipeline(aicfc.parse(STEP), "aicfc-train-pipeline")
    text = aicfc.print(lowered)
    assert "exec.program @train_step" in text
    aicfc.parse(text)  # parses and verifies, dominance included


def typo(text: str) -> str:
    """STEP with the result that is fc.weight.exp_avg's next value misspelled."""
    fixed = 'tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avg"},\n'
    assert fixed in text
    return text.replace(fixed, 'tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avgg"},\n')


def test_a_state_without_next_value_warns_in_the_api():
    with pytest.warns(IRWarning) as record:
        module = aicfc.parse(typo(STEP), "step.mlir")
    messages = [str(w.message) for w in record]
    assert messages == [
        "step.mlir:46:5: remark: 'func.func' state argument %m (\"fc.weight.exp_avg\") of "
        '@train_step is never updated: no result is named "fc.weight.exp_avg", so it keeps '
        "its initial value on every step",
        "step.mlir:42:1: remark: 'func.func' result \"fc.weight.exp_avgg\" of @train_step "
        'names no argument; did you mean "fc.weight.exp_avg"? (a result named after a param '
        "or state argument is its next value; this one is a program output)",
    ]
    assert issubclass(IRWarning, UserWarning)
    # What it warns about: the moment stays at its initial zeros after steps.
    values = {
        "x": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32),
        "y": np.array([0, 1, 1, 0], np.int32),
        "fc.weight": np.full((2, 3), 0.1, np.float32),
        "fc.bias": np.zeros(2, np.float32),
    }
    for n in ("fc.weight", "fc.bias"):
        for s, shape in (("exp_avg", values[n].shape), ("exp_avg_sq", values[n].shape)):
            values[f"{n}.{s}"] = np.zeros(shape, np.float32)
        values[f"{n}.step"] = np.zeros((), np.float32)
    out = aicfc.run(module, "train_step", values, steps=2)
    assert not out["fc.weight.exp_avg"].any() and out["fc.weight.exp_avgg"].any()


def test_a_consistent_train_step_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aicfc.parse(STEP)


def test_aicfc_opt_prints_the_remarks_as_located_lines(tmp_path, capsys):
    f = tmp_path / "step.mlir"
    f.write_text(typo(STEP))
    assert aicfc_opt.main([str(f)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert re.fullmatch(rf"{re.escape(str(f))}:46:5: remark: 'func.func' state argument .*", err[0])
    assert re.fullmatch(rf"{re.escape(str(f))}:42:1: remark: 'func.func' result .*", err[1])


@pytest.mark.parametrize("x", [np.float32(1.0), np.array(1.0, np.float32)], ids=["scalar", "0-d"])
def test_a_0d_input_is_reported_with_its_own_shape(x):
    """np.ascontiguousarray made it [1]: the error named a shape the user never passed."""
    prog = aicfc.compile(nn.Sequential(nn.Linear(4, 3)), optimizer=optim.SGD(lr=0.1))
    expected = re.escape('input "x": expected shape [N, 4], got [] (a 0-d array has no batch')
    with pytest.raises(aicfc.InputError, match=expected):
        prog.step(x, np.zeros(2, np.int32))
    with pytest.raises(aicfc.InputError, match=expected):
        prog.predict(x)
