"""Plain xDSL tools see aicfc: the `xdsl.universe` entry point (aicfc/universe.py).

Every check runs the installed environment as a user does: a subprocess started from a
folder outside the repository (a `*.egg-info` left in a source tree would otherwise
shadow the installed metadata), with this environment's `xdsl-opt` and `aicfc-opt`.
The wheel install is checked the same way in test_packaging.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.universe import Universe

from aicfc.tools import aicfc_opt

TEST = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

LOAD_UNIVERSE = """\
import json, sys
from importlib.metadata import entry_points
from xdsl.universe import Universe
points = {e.name: e.value for e in entry_points(group="xdsl.universe")}
multiverse = Universe.get_multiverse()
loaded = sorted(m for m in sys.modules if m.startswith("aicfc."))
universe = sys.modules["aicfc.universe"].AICFC_UNIVERSE
print(json.dumps({
    "points": points,
    "dialects": sorted(universe.all_dialects),
    "passes": sorted(universe.all_passes),
    "in_multiverse": sorted(set(universe.all_passes) & set(multiverse.all_passes)),
    "loaded": loaded,
    "graph": universe.all_dialects["graph"]().name,
    "fuse": universe.all_passes["aicfc-fuse"]().name,
}))
"""

AICFC_PASSES = [
    "aicfc-analyze",
    "aicfc-autocast",
    "aicfc-data-parallel",
    "aicfc-expand-backward",
    "aicfc-fold-casts",
    "aicfc-fold-constants",
    "aicfc-fold-inplace",
    "aicfc-fold-linear",
    "aicfc-fold-narrowing-casts",
    "aicfc-fold-weight-casts",
    "aicfc-fuse",
    "aicfc-fuse-train-step",
    "aicfc-hoist-updates",
    "aicfc-loss-scale",
    "aicfc-lower-exec",
    "aicfc-plan-memory",
    "aicfc-train-pipeline",
]


def xdsl_opt() -> list[str]:
    """This environment's xdsl-opt (its console script, else the same main as a module)."""
    script = BIN / "xdsl-opt"
    return [str(script)] if script.exists() else [sys.executable, "-m", "xdsl.tools.xdsl_opt"]


def run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_the_entry_point_registers_every_dialect_and_pass_lazily(tmp_path: Path):
    (tmp_path / "load.py").write_text(LOAD_UNIVERSE)
    proc = subprocess.run(
        [sys.executable, "load.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (
        "loading the xdsl.universe entry points failed (if it says KeyError 'aicfc.universe', "
        "this environment's aicfc metadata predates the entry point: run `pip install -e .` "
        f"again):\n{proc.stderr}"
    )
    report = json.loads(proc.stdout)
    assert report["points"].get("aicfc") == "aicfc.universe:AICFC_UNIVERSE", report["points"]
    assert report["dialects"] == ["autodiff", "exec", "graph"]
    assert report["passes"] == AICFC_PASSES
    assert report["in_multiverse"] == AICFC_PASSES
    # Lazy: discovering the universe imports no dialect, no pass and no runtime.
    eager = [
        m
        for m in report["loaded"]
        if m.startswith(("aicfc.passes.", "aicfc.runtime", "aicfc.dialects."))
    ]
    assert not eager, f"loading the universe imported {eager}"
    assert (report["graph"], report["fuse"]) == ("graph", "aicfc-fuse")


CASES = {
    "fuse": ("passes/aicfc-fuse.mlir", "aicfc-fuse"),
    "exec": ("passes/aicfc-fold-inplace.mlir", "aicfc-fold-inplace"),
    "pipeline": ("passes/aicfc-train-pipeline.mlir", "aicfc-train-pipeline{inplace=false}"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_xdsl_opt_prints_what_aicfc_opt_prints(case: str, tmp_path: Path):
    lit_file, pipeline = CASES[case]
    source = str(TEST / lit_file)
    ours = run([str(BIN / "aicfc-opt"), source, "-p", pipeline], tmp_path)
    plain = run([*xdsl_opt(), source, "-p", pipeline], tmp_path)
    assert plain == ours
    unchanged = run([str(BIN / "aicfc-opt"), source], tmp_path)
    assert ours != unchanged, f"{pipeline} changed nothing in {lit_file}: the test shows nothing"
    if case == "fuse":
        assert ours.count("graph.gemm_epilogue") > unchanged.count("graph.gemm_epilogue")


def test_aicfc_opt_builds_on_a_multiverse_that_already_has_our_dialects(monkeypatch, tmp_path):
    """With the entry point installed, xDSL's register_all_dialects registers graph, autodiff
    and exec itself; aicfc-opt must not register them a second time (xDSL raises
    AlreadyRegisteredConstructException), whichever metadata this process sees."""
    from aicfc.universe import AICFC_UNIVERSE

    xdsl = Universe.get_multiverse()
    both = Universe(
        all_dialects={**xdsl.all_dialects, **AICFC_UNIVERSE.all_dialects},
        all_passes={**xdsl.all_passes, **AICFC_UNIVERSE.all_passes},
        all_targets=xdsl.all_targets,
    )
    monkeypatch.setattr(Universe, "get_multiverse", staticmethod(lambda: both))
    path = tmp_path / "f.mlir"
    path.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %y = graph.relu %x : tensor<4xf32>\n"
        "  func.return %y : tensor<4xf32>\n}\n"
    )
    main = aicfc_opt.AicfcOptMain(args=[str(path)])
    assert {"graph", "autodiff", "exec"} <= set(main.ctx.registered_dialect_names)
    assert set(AICFC_PASSES) <= set(main.available_passes)
    assert aicfc_opt.main([str(path)]) == 0
