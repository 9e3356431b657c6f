"""Packaging (docs/architecture.md §0): one distribution, one import namespace, both install modes.

The wheel test builds a wheel from a copy of the sources (pyproject.toml,
README.md and the folders of `[tool.setuptools.package-dir]`, plus a probe
`.cu` file so that the package-data rule is tested even before any kernel
exists), installs it with its declared dependencies into a fresh virtual
environment (pip resolves them from its index and cache, as a user's install
would), and runs that environment's `aicfc-opt` and `xdsl-opt` from a folder outside
the repository. The editable test checks the install that this test run uses.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_TOP_LEVEL = ("dialects", "passes", "runtime", "tools", "kernels")
PROBE = "_packaging_probe.cu"

MLIR = """\
func.func @f(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}
"""
PARSED = (
    "%m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>",
    "%y = graph.relu %z : tensor<8x16xf32>",
)
FUSED = (
    "graph.gemm_epilogue %x, %w bias %b act = relu : "
    "(tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>"
)

CHECK_INSTALL = """\
import importlib.metadata, importlib.resources, importlib.util, json, sys
dist = importlib.metadata.distribution("aicfc")
scripts = {}
for ep in dist.entry_points:
    if ep.group == "console_scripts":
        try:
            ep.load()
            scripts[ep.name] = "ok"
        except Exception as e:
            scripts[ep.name] = f"{type(e).__name__}: {e}"
print(json.dumps({
    "top_level": {n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]},
    "kernels": sorted(p.name for p in importlib.resources.files("aicfc.kernels").iterdir()),
    "scripts": scripts,
}))
"""


def package_dirs() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        mapping: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return mapping


def repo_kernel_files() -> list[str]:
    return sorted(p.name for p in (ROOT / "kernels").iterdir() if p.suffix in (".cu", ".cuh"))


def run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "Output", "*.pyc")
    for folder in set(package_dirs().values()):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    (src / "kernels" / PROBE).write_text('extern "C" __global__ void probe() {}\n')
    dist = tmp_path_factory.mktemp("dist")
    build = ["build", "--wheel", "--no-isolation", "--skip-dependency-check"]
    run([sys.executable, "-m", *build, "--outdir", str(dist), str(src)], cwd=src)
    wheels = list(dist.glob("aicfc-*.whl"))
    assert len(wheels) == 1, f"expected one wheel, built {wheels}"
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its declared dependencies; returns its bin folder."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=True)
    bin_dir = env / "bin"
    run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=env)
    return bin_dir


def test_every_source_package_is_listed() -> None:
    """Each folder with an __init__.py under a mapped folder is in [tool.setuptools] packages."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for package, folder in package_dirs().items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "Output" not in rel.parts:
                found.add(".".join([package, *rel.parts]))
    missing = sorted(found - listed)
    assert not missing, (
        f"packages missing from [tool.setuptools] packages in pyproject.toml: {missing}"
    )


def test_wheel_has_one_namespace_and_the_kernels(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"aicfc", "aicfc-0.1.0.dist-info"}, f"unexpected top-level entries: {top}"
    for package in ("dialects", "passes", "runtime", "tools", "kernels"):
        assert f"aicfc/{package}/__init__.py" in names, f"aicfc.{package} is not in the wheel"
    assert f"aicfc/kernels/{PROBE}" in names, "kernels/*.cu are not shipped as package data"
    for kernel in repo_kernel_files():
        assert f"aicfc/kernels/{kernel}" in names, f"kernels/{kernel} is not in the wheel"


def test_wheel_install_runs_aicfc_opt(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "f.mlir").write_text(MLIR)
    out = run([str(installed / "aicfc-opt"), "f.mlir"], cwd=tmp_path).stdout
    for line in PARSED:
        assert line in out, f"aicfc-opt from the wheel printed:\n{out}"
    fused = run([str(installed / "aicfc-opt"), "f.mlir", "-p", "aicfc-fuse"], cwd=tmp_path).stdout
    assert FUSED in fused, f"aicfc-opt -p aicfc-fuse from the wheel printed:\n{fused}"
    bad = subprocess.run(
        [str(installed / "aicfc-opt"), "missing.mlir"], cwd=tmp_path, capture_output=True, text=True
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "aicfc-opt: error: cannot open 'missing.mlir'" in bad.stderr


def test_wheel_install_lets_xdsl_opt_run_our_passes(installed: Path, tmp_path: Path) -> None:
    """The wheel's `xdsl.universe` entry point: plain xdsl-opt of the same environment
    parses our dialects and runs aicfc-fuse, printing what aicfc-opt prints."""
    (tmp_path / "f.mlir").write_text(MLIR)
    cmd = ["f.mlir", "-p", "aicfc-fuse"]
    plain = run([str(installed / "xdsl-opt"), *cmd], cwd=tmp_path).stdout
    ours = run([str(installed / "aicfc-opt"), *cmd], cwd=tmp_path).stdout
    assert FUSED in plain, f"xdsl-opt -p aicfc-fuse from the wheel printed:\n{plain}"
    assert plain == ours


def test_wheel_install_layout(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text(CHECK_INSTALL)
    out = run([str(installed / "python"), "check.py", *FORBIDDEN_TOP_LEVEL], cwd=tmp_path).stdout
    report = json.loads(out)
    installed_top = [n for n, found in report["top_level"].items() if found]
    assert not installed_top, f"the wheel installs top-level packages {installed_top}"
    assert PROBE in report["kernels"]
    for kernel in repo_kernel_files():
        assert kernel in report["kernels"], f"kernels/{kernel} is not installed as package data"
    broken = {k: v for k, v in report["scripts"].items() if v != "ok"}
    assert not broken, f"console scripts that do not load: {broken}"
    assert {"aicfc-opt", "aicfc-run"} <= set(report["scripts"])


def test_editable_install_maps_the_source_folders(tmp_path: Path) -> None:
    """The environment running this test has `pip install -e .`: the folders map into aicfc."""
    import aicfc.dialects
    import aicfc.kernels
    import aicfc.passes
    import aicfc.runtime
    import aicfc.tools

    assert Path(aicfc.__file__).resolve() == ROOT / "aicfc" / "__init__.py"
    for package, folder in [
        (aicfc.dialects, "dialects"),
        (aicfc.passes, "passes"),
        (aicfc.runtime, "runtime"),
        (aicfc.tools, "tools"),
        (aicfc.kernels, "kernels"),
    ]:
        paths = [Path(p).resolve() for p in package.__path__]
        assert ROOT / folder in paths, f"{package.__name__} maps to {paths}, not {ROOT / folder}"
    shipped = {p.name for p in importlib.resources.files("aicfc.kernels").iterdir()}
    assert set(repo_kernel_files()) <= shipped
    # No top-level packages leak: import from a folder outside the repository.
    probe = (
        "import importlib.util, sys; "
        "print([n for n in sys.argv[1:] if importlib.util.find_spec(n)])"
    )
    out = run([sys.executable, "-c", probe, *FORBIDDEN_TOP_LEVEL], cwd=tmp_path).stdout
    assert out.strip() == "[]", f"top-level packages importable in the editable install: {out}"
    # The console script of this environment runs.
    script = Path(sys.executable).parent / "aicfc-opt"
    (tmp_path / "f.mlir").write_text(MLIR)
    printed = run([str(script), "f.mlir"], cwd=tmp_path).stdout
    assert all(line in printed for line in PARSED), printed


def test_readme_commands_match_ci() -> None:
    """The README's two commands exist as written, and its gate list is .ci/run's."""
    readme = (ROOT / "README.md").read_text()
    assert "```sh\nbash .ci/run\n```" in readme, "README.md does not quote `bash .ci/run`"
    main_job = (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[examples]' && "
        ".venv/bin/python examples/train_digits.py"
    )
    assert main_job in readme, "README.md does not quote the main-job command"
    assert (ROOT / "examples" / "train_digits.py").is_file()
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert {"examples", "test"} <= set(extras)
    steps = [
        line.removeprefix("step ").strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("step ")
    ]
    assert steps, ".ci/run runs no gate"
    missing = [s for s in steps if f"`{s}`" not in readme]
    assert not missing, f"README.md does not list these .ci/run gates verbatim: {missing}"
