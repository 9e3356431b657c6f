"""The tools never show Python internals on mutated input (test/python/fuzzing.py).

A bounded campaign with a fixed seed: mutants of the lit inputs through aicfc-opt,
aicfc-opt -p aicfc-train-pipeline and aicfc-run --steps 1, in this process. Any exit
code but 0 and 1, an exception escaping `main`, `Traceback` or `internal error` in the
output, or a run over the time limit fails the test, which names the mutant and shows
its text. AICFC_FUZZ_MUTANTS changes the count (a larger campaign: the command in
fuzzing.py's docstring).
"""

from __future__ import annotations

import os

from fuzzing import campaign

MUTANTS = int(os.environ.get("AICFC_FUZZ_MUTANTS", "300"))


def test_mutated_lit_inputs_give_no_internal_errors():
    result = campaign(MUTANTS, seed=0, limit=20.0)
    report = [
        f"--- {name} -> {run.tool} {' '.join(run.args[1:])}: {run.failure}\n"
        f"{run.output[-2000:]}\n--- the mutant:\n{text}"
        for name, text, run in result.failures[:3]
    ]
    assert not result.failures, result.summary() + "\n" + "\n".join(report)
    assert result.parsed > MUTANTS // 5  # the campaign reaches the passes, not just the parser
