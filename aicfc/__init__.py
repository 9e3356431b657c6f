"""aicfc: an MLIR-style AI compiler on xDSL.

Train a model (NumPy backend by default where no GPU is usable):

    import aicfc
    from aicfc import nn, optim

    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    prog = aicfc.compile(model, loss="cross_entropy", optimizer=optim.Adam(lr=1e-3))
    loss = prog.step(x, y)            # x float32 [N, 64], y integer labels [N]
    logits = prog.predict(x_test)
    prog.save("ckpt.safetensors")     # everything the next step depends on; prog.load(path)
    print(prog.mlir("fused"))         # the IR after any pipeline stage

Work on IR directly: `aicfc.parse`, `aicfc.print`, `aicfc.run_pipeline`, `aicfc.run`.
Submodules load on first use, so `import aicfc` stays light for aicfc-opt.
The Python API is described in docs/api.md; `aicfc.__version__` is the installed version.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("aicfc")
    """The installed distribution's version (pyproject.toml [project] version)."""
except PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

_LAZY: dict[str, tuple[str, str]] = {
    "compile": ("aicfc.compiler", "compile"),
    "analyze": ("aicfc.analysis", "analyze"),
    "Program": ("aicfc.program", "Program"),
    "manual_seed": ("aicfc.nn", "manual_seed"),
    "parse": ("aicfc.execute", "parse"),
    "print": ("aicfc.execute", "print_ir"),
    "run_pipeline": ("aicfc.execute", "run_pipeline"),
    "run": ("aicfc.execute", "run"),
    "train_pipeline": ("aicfc.passes.pipelines", "train_pipeline"),
    "stage_names": ("aicfc.passes.pipelines", "stage_names"),
    "InputError": ("aicfc.runtime.errors", "InputError"),
    "StoreError": ("aicfc.runtime.errors", "StoreError"),
    "BackendUnavailable": ("aicfc.runtime.errors", "BackendUnavailable"),
    "IRError": ("aicfc.ir", "IRError"),
    "IncompatibleKeys": ("aicfc.program", "IncompatibleKeys"),
    "load": ("aicfc.checkpoint", "read"),
    "Checkpoint": ("aicfc.checkpoint", "Checkpoint"),
    "CheckpointError": ("aicfc.checkpoint", "CheckpointError"),
}
_SUBMODULES = ("nn", "optim", "builder", "pipelines")

# `from aicfc import *` must not shadow the builtins print and compile.
__all__ = [n for n in (*_LAZY, *_SUBMODULES) if n not in ("print", "compile")]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"aicfc.{name}")
    raise AttributeError(f"module 'aicfc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})
