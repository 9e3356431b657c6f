"""The pass registry: pass name -> factory that imports the pass class lazily.

One module per pass, named after the pass with underscores
(`aicfc-fold-inplace` lives in `passes/aicfc_fold_inplace.py`); each class's
`name` equals its registry key and each has `test/passes/<name>.mlir`
(checked by test/python/test_registry.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

PASS_CLASSES: dict[str, str] = {
    "aicfc-fuse": "AicfcFusePass",
    "aicfc-expand-backward": "AicfcExpandBackwardPass",
    "aicfc-hoist-updates": "AicfcHoistUpdatesPass",
    "aicfc-lower-exec": "AicfcLowerExecPass",
    "aicfc-fold-inplace": "AicfcFoldInplacePass",
    "aicfc-plan-memory": "AicfcPlanMemoryPass",
    "aicfc-train-pipeline": "AicfcTrainPipelinePass",
    "aicfc-analyze": "AicfcAnalyzePass",
    "aicfc-fold-linear": "AicfcFoldLinearPass",
    "aicfc-fold-constants": "AicfcFoldConstantsPass",
    "aicfc-autocast": "AicfcAutocastPass",
    "aicfc-fold-casts": "AicfcFoldCastsPass",
    "aicfc-fold-narrowing-casts": "AicfcFoldNarrowingCastsPass",
    "aicfc-loss-scale": "AicfcLossScalePass",
    "aicfc-fold-weight-casts": "AicfcFoldWeightCastsPass",
    "aicfc-data-parallel": "AicfcDataParallelPass",
    "aicfc-fuse-train-step": "AicfcFuseTrainStepPass",
}
"""Registered passes: name -> class name in `aicfc.passes.<name with underscores>`."""


def module_name(pass_name: str) -> str:
    return "aicfc.passes." + pass_name.replace("-", "_")


def _factory(pass_name: str, class_name: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        cls: type[ModulePass] = getattr(importlib.import_module(module_name(pass_name)), class_name)
        return cls

    return load


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every aicfc pass as name -> factory (for xDSL's opt driver and pipelines)."""
    return {name: _factory(name, cls) for name, cls in PASS_CLASSES.items()}
