"""tools/bench_cpu.py runs end to end on the smallest config and writes what it prints.

A smoke test (the benchmark is not a test): one round of the digits config for aicfc,
its reference kernels and torch eager; the JSON rows carry a time, the aicfc rows their
allocation peak and how many launches were bound. One round of gpt-tiny for aicfc and
torch eager: every launch bound, and the same first loss (the same weights and batch).
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


def test_bench_cpu_gpt_tiny_one_round(tmp_path):
    out = tmp_path / "gpt.json"
    args = ["--configs", "gpt-tiny", "--runs", "1", "--threads", "1"]
    assert bench_cpu.main([*args, "--frameworks", "aicfc,torch-eager", "--json", str(out)]) == 0
    rows = {r["framework"]: r for r in json.loads(out.read_text())["rows"]}
    aicfc, torch = rows["aicfc"], rows["torch-eager"]
    assert aicfc["seconds"] > 0 and torch["seconds"] > 0 and aicfc["cpu_seconds"] > 0
    assert aicfc["bound"] == aicfc["launches"] > 100
    # nanoGPT's initial weights on a vocabulary of 96: a loss near log(96) = 4.56
    assert 4.4 < torch["first_loss"] < 4.7
    assert abs(aicfc["first_loss"] - torch["first_loss"]) <= 1e-5 * torch["first_loss"]
