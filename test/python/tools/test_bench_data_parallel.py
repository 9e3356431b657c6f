"""tools/bench_data_parallel.py's table: the arithmetic of its columns, on made-up timings
(the tool itself needs GPUs; BENCHMARKS.md says it was not run)."""

from __future__ import annotations

from aicfc.tools.bench_data_parallel import table


def test_table_columns() -> None:
    base = {"world_size": 1, "batch_per_gpu": 1000, "step_seconds": 0.010}
    two = {
        "world_size": 2,
        "batch_per_gpu": 1000,
        "step_seconds": 0.0105,
        "allreduce_seconds": 0.002,
    }
    lines = table(base, [two]).splitlines()
    assert lines[0].startswith("| GPUs | batch/GPU | step ms | samples/s | speed-up")
    # 2 * 1000 / 0.0105 = 190,476 samples/s; 1.90x of 100,000; exposed 0.5 ms of 2 ms: 75 % hidden
    assert lines[2] == "| 2 | 1000 | 10.500 | 190,476 | 1.90x | 0.95 | 2.000 | 0.500 | 75 |"
    one = {"world_size": 1, "batch_per_gpu": 1000, "step_seconds": 0.010}
    assert (
        table(base, [one]).splitlines()[2]
        == "| 1 | 1000 | 10.000 | 100,000 | 1.00x | 1.00 | - | 0.000 | - |"
    )
