"""Regressions found by the mutation fuzzer (test/python/fuzzing.py) that a lit file
cannot pin: a parse that took minutes, and an error raised before parsing began.
(The located errors it found are test/regressions/fuzz-findings.mlir.)"""

from __future__ import annotations

import time

import pytest

import aicfc
from aicfc.tools import aicfc_run


def test_an_unclosed_string_fails_fast():
    """xDSL's string pattern nests quantifiers: an unclosed quote followed by ~200
    characters on its line backtracked for minutes (a hang in aicfc-opt)."""
    line = '  %r = "autodiff.adam_step(%p, %p, %m, %m, %s) <{lr = 1.0e-3 : f64}> ' + "x" * 150
    text = f"func.func @f() {{\n{line}\n  func.return\n}}\n"
    aicfc.parse("func.func @warm_up() {\n  func.return\n}\n")  # load the dialects first
    start = time.perf_counter()
    with pytest.raises(aicfc.IRError, match=r"^s\.mlir:2:8: error: End of file reached before"):
        aicfc.parse(text, "s.mlir")
    assert time.perf_counter() - start < 2.0


def test_a_bad_first_character_is_a_located_error():
    """The parser lexes its first token when it is made, outside the error handling:
    'aicfc-opt: internal error: ParseError'."""
    with pytest.raises(aicfc.IRError, match=r"^b\.mlir:1:1: error: Unexpected character: \ufffd"):
        aicfc.parse("\ufffdfunc.func @f() {\n}\n", "b.mlir")


def test_aicfc_run_prints_a_loss_output_that_is_not_a_scalar(tmp_path, capsys):
    """An output named "loss" with 4 elements: 'internal error: TypeError: only
    0-dimensional arrays can be converted to Python scalars'."""
    f = tmp_path / "l.mlir"
    f.write_text(
        'func.func @f(%x: tensor<4xf64> {aicfc.role = "input", aicfc.name = "x"})\n'
        '    -> (tensor<4xf64> {aicfc.name = "loss"}) {\n'
        "  func.return %x : tensor<4xf64>\n}\n"
    )
    assert aicfc_run.main([str(f)]) == 0
    out = capsys.readouterr().out
    assert "step 1: loss float64[4]\n" in out and "  loss: float64[4]\n" in out
