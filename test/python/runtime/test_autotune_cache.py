"""The autotune cache on disk: concurrent tuners lose nothing, readers never see half a file.

Two processes tuning at once used to corrupt the JSON (hundreds of half-read files, most
entries lost): `AutotuneCache.save` now merges under a lock and replaces the file
atomically (runtime/files.py). Its folder (~/.cache/aicfc, or $XDG_CACHE_HOME/aicfc) is
created when missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from aicfc.runtime.selector import AutotuneCache, AutotuneCacheWarning, Problem

WRITER = textwrap.dedent(
    """
    import sys
    from aicfc.runtime.selector import AutotuneCache, Problem
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    problem = Problem("graph.matmul", "f32", ((8, 8), (8, 8)), ((8, 8),))
    for i in range(n):  # n tuning runs, each saving its result, as tune_executable does
        cache = AutotuneCache(path)
        cache.record(problem, f"{who}-{i}", f"k{i}")
        cache.save()
    """
)


def test_two_concurrent_tuners_keep_every_entry_and_a_valid_file(tmp_path):
    path = tmp_path / "autotune.json"
    n = 25
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(n)])
        for who in ("dev-a", "dev-b")
    ]
    reads = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a half-written file would warn (AutotuneCacheWarning)
        while any(w.poll() is None for w in writers):
            if path.exists():
                json.loads(path.read_text())  # every read sees a whole file
                AutotuneCache(path)
                reads += 1
            time.sleep(0.01)
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    entries = AutotuneCache(path).entries
    assert len(entries) == 2 * n  # no entry of either process was lost
    assert entries["graph.matmul|8x8,8x8|f32|dev-a-0"] == "k0"
    assert entries[f"graph.matmul|8x8,8x8|f32|dev-b-{n - 1}"] == f"k{n - 1}"
    assert reads > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["autotune.json", "autotune.json.lock"]


def test_a_damaged_cache_is_rewritten_by_the_next_save(tmp_path):
    path = tmp_path / "damaged.json"
    path.write_text('{"version": 1, "entries": {"graph.matmul|8')  # a half-written file
    with pytest.warns(AutotuneCacheWarning, match="damaged.json"):
        cache = AutotuneCache(path)
    cache.record(Problem("graph.matmul", "f32", ((8, 8), (8, 8)), ((8, 8),)), "dev", "k")
    cache.save()
    assert json.loads(path.read_text())["entries"] == {"graph.matmul|8x8,8x8|f32|dev": "k"}


def test_the_cache_folder_is_created_when_missing(tmp_path, monkeypatch):
    from aicfc.runtime.cuda.backend import default_autotune_cache

    monkeypatch.delenv("AICFC_AUTOTUNE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = default_autotune_cache()
    assert path == str(tmp_path / "xdg" / "aicfc" / "autotune.json")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_autotune_cache() == str(tmp_path / "home" / ".cache/aicfc/autotune.json")
    cache = AutotuneCache(path)
    cache.record(Problem("graph.matmul", "f32", ((8, 8), (8, 8)), ((8, 8),)), "dev", "k")
    cache.save()  # creates xdg/aicfc/
    assert Path(path).is_file() and AutotuneCache(path).entries == cache.entries
