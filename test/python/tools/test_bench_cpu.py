"""tools/bench_cpu.py runs end to end on the smallest config and writes what it prints.

A smoke test (the benchmark is not a test): one round of the digits config for aicfc,
its reference kernels and torch eager; the JSON rows carry a time, the aicfc rows their
allocation peak and how many launches were bound.
"""

from __future__ import annotations

import json

from aicfc.tools import bench_cpu


def test_bench_cpu_digits_one_round(tmp_path, capsys):
    out = tmp_path / "cpu.json"
    frameworks = "aicfc,aicfc-reference,torch-eager"
    assert (
        bench_cpu.main(
            [
                "--configs",
                "digits",
                "--runs",
                "1",
                "--threads",
                "1",
                "--frameworks",
                frameworks,
                "--json",
                str(out),
            ]
        )
        == 0
    )
    rows = {r["framework"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == set(frameworks.split(","))
    for r in rows.values():
        assert r["seconds"] > 0 and r["threads"] == 1
    # 17 launches before the dX products absorbed the two backward epilogues
    assert rows["aicfc"]["bound"] == rows["aicfc"]["launches"] == 15
    assert rows["aicfc-reference"]["bound"] == 0
    # the out= kernels allocate no array of the step's sizes; the reference kernels do
    assert rows["aicfc"]["alloc"]["peak_bytes"] < rows["aicfc-reference"]["alloc"]["peak_bytes"] / 4
    table = capsys.readouterr().out
    assert "digits            aicfc" in table and "15 of 15 launches bound" in table
