"""The compile cache (aicfc/compile_cache.py) on the NumPy backend: the cache is backend-
independent IR, so everything but the GPU's device key is checked here.

A second Program (and a second process) compiling the same model loads the planned exec
IR instead of running the pipeline and trains to the same values; other options or
another model miss; corrupt and stale entries warn and are rewritten; the argument and
$AICFC_CACHE_DIR move or disable the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc import program as program_module
from aicfc.compile_cache import CACHE_ENV, CompileCacheWarning, cache_folder


def model(seed: int = 0, hidden: int = 16) -> nn.Sequential:
    aicfc.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, 5))


def shifted(net: nn.Sequential) -> nn.Sequential:
    for value in dict(net.named_parameters()).values():
        value.data += 0.5
    return net


def batches(count: int = 3, n: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [
        (rng.standard_normal((n, 12)).astype(np.float32), rng.integers(0, 5, n))
        for _ in range(count)
    ]


def train(prog: aicfc.Program) -> tuple[list[float], dict[str, np.ndarray]]:
    losses = [prog.step(x, y) for x, y in batches()]
    return losses, prog.state_dict()


def compile_(folder: Path | bool, **kw) -> aicfc.Program:
    opt = kw.pop("optimizer", optim.AdamW(lr=1e-2))
    net = kw.pop("net", model())
    return aicfc.compile(net, optimizer=opt, backend="numpy", cache_dir=folder, **kw)


def test_a_second_program_loads_the_planned_ir_and_trains_the_same(tmp_path, monkeypatch):
    first = compile_(tmp_path)
    want = train(first)
    (entry,) = first.compiled_functions()
    assert not entry.from_cache and len(list(tmp_path.glob("*.mlir"))) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("the pipeline ran")

    monkeypatch.setattr(program_module, "run_steps", refuse)
    second = compile_(tmp_path)
    got = train(second)
    (hit,) = second.compiled_functions()
    assert hit.from_cache and hit.seconds > 0
    assert got[0] == want[0]  # the same kernels on the same data: bit-identical losses
    for name, value in want[1].items():
        assert np.array_equal(got[1][name], value), name
    monkeypatch.undo()
    assert second.mlir("fused") == first.mlir("fused")  # other stages run the pipeline then
    assert second.mlir("planned") == first.mlir("planned")


@pytest.mark.parametrize(
    ("change", "hit"),
    [
        ({"net": model(hidden=17)}, False),
        ({"net": shifted(model())}, True),  # other initial weights, the same IR
        ({"net": model(seed=1)}, False),  # another dropout seed in the IR
        ({"inplace": False}, False),
        ({"optimizer": optim.AdamW(lr=2e-2)}, False),
        ({"optimizer": optim.SGD(lr=0.1)}, False),
    ],
    ids=["width", "weights", "seed", "inplace", "lr", "optimizer"],
)
def test_the_key_follows_the_ir_and_the_pipeline(tmp_path, change, hit):
    compile_(tmp_path).step(*batches(1)[0])
    other = compile_(tmp_path, **change)
    other.step(*batches(1)[0])
    assert other.compiled_functions()[0].from_cache == hit


def test_predict_and_the_train_step_are_entries_of_their_own(tmp_path):
    prog = compile_(tmp_path)
    x, y = batches(1)[0]
    prog.step(x, y)
    prog.predict(x)
    assert len(list(tmp_path.glob("*.mlir"))) == 2
    again = compile_(tmp_path)
    np.testing.assert_array_equal(again.predict(x), compile_(False).predict(x))
    assert again.compiled_functions()[0].from_cache


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda text: "garbage\n" + text, "its first line"),
        (lambda text: text.replace("key ", "key 0", 1), "its first line"),
        (lambda text: text[: len(text) // 2], "it does not parse"),
        (lambda text: text.replace("exec.program @train_step", "exec.program @other"), "it has no"),
    ],
    ids=["header", "stale_key", "truncated", "other_program"],
)
def test_a_corrupt_or_stale_entry_warns_and_is_rewritten(tmp_path, damage, why):
    want = train(compile_(tmp_path))
    (path,) = tmp_path.glob("*.mlir")
    good = path.read_text()
    path.write_text(damage(good))
    prog = compile_(tmp_path)
    with pytest.warns(CompileCacheWarning, match=f"'{path}' is ignored: {why}"):
        got = train(prog)
    assert not prog.compiled_functions()[0].from_cache
    assert got[0] == want[0]
    assert path.read_text() == good  # rewritten whole


def test_an_unwritable_folder_warns_once_and_compiles_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    prog = compile_(blocker / "cache")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prog.step(*batches(1)[0])
        prog.predict(batches(1)[0][0])
    (only,) = [w for w in seen if issubclass(w.category, CompileCacheWarning)]
    assert "cannot be written" in str(only.message)


def test_the_argument_and_the_environment_move_or_disable_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert cache_folder() == tmp_path / "env" and cache_folder(tmp_path) == tmp_path
    assert cache_folder(False) is None and cache_folder("") is None
    for off in ("", "off", "0", "none"):
        monkeypatch.setenv(CACHE_ENV, off)
        assert cache_folder() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder() == tmp_path / "xdg" / "aicfc" / "compiled"
    prog = compile_(False)
    prog.step(*batches(1)[0])
    assert prog.compile_cache is None and not (tmp_path / "xdg").exists()


def test_a_second_process_skips_the_pipeline(tmp_path):
    script = textwrap.dedent(
        """
        import sys, numpy as np, aicfc
        from aicfc import nn, optim
        aicfc.manual_seed(0)
        net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
        prog = aicfc.compile(net, optimizer=optim.Adam(lr=1e-2), backend="numpy")
        rng = np.random.default_rng(0)
        loss = prog.step(rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 5, 8))
        (entry,) = prog.compiled_functions()
        print(entry.from_cache, repr(loss), f"{entry.seconds:.3f}")
        """
    )
    env = {**os.environ, CACHE_ENV: str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert [r[0] for r in runs] == ["False", "True"]
    assert runs[0][1] == runs[1][1]  # the same loss, to the last bit
