"""aicfc-train-pipeline: the whole compiler, graph-level train step in, planned exec IR out.

    aicfc-opt step.mlir -p 'aicfc-train-pipeline{backend=numpy inplace=true}'

It runs the steps of `passes/pipelines.py::train_pipeline` in order (fuse,
expand-backward, fuse, canonicalize+cse, lower-exec, fold-inplace,
plan-memory); that list is the one definition of the order, shared with
`aicfc.compile`. Each step's passes come from the pass registry, so every step
can also be run on its own with aicfc-opt.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from aicfc.passes.pipelines import run_steps, train_pipeline


@dataclass(frozen=True)
class AicfcTrainPipelinePass(ModulePass):
    """Run the train pipeline.

    backend: "numpy" (default) or "cupy"/"cuda": the kernels aicfc-lower-exec selects.
    inplace: false leaves every launch out-of-place (aicfc-fold-inplace{enable=false}).
    """

    name = "aicfc-train-pipeline"

    backend: str = "numpy"
    inplace: bool = True

    def __post_init__(self) -> None:
        train_pipeline(self.backend, self.inplace)  # raises ValueError for a bad backend

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_steps(ctx, op, train_pipeline(self.backend, self.inplace))
