"""aicfc-train-pipeline: the whole compiler, graph-level train step in, planned exec IR out.

    aicfc-opt step.mlir -p 'aicfc-train-pipeline{backend=numpy inplace=true}'

It runs the steps of `passes/pipelines.py::train_pipeline` in order; that list is
the one definition of the order, shared with `aicfc.compile`. With the defaults
it is exactly

    aicfc-fuse,aicfc-expand-backward,aicfc-fuse,canonicalize,aicfc-fold-constants,cse,
    aicfc-lower-exec{backend=numpy},aicfc-fold-inplace{enable=true},aicfc-plan-memory

and since it is one pass, `--print-between-passes` shows nothing inside it: run
that list with `-p` instead to see every stage (docs/passes.md). Each step's
passes come from the pass registry, so every step also runs on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from aicfc.passes.aicfc_autocast import PIPELINE_PRECISIONS
from aicfc.passes.pipelines import run_steps, train_pipeline


@dataclass(frozen=True)
class AicfcTrainPipelinePass(ModulePass):
    """Run the train pipeline.

    backend: "numpy" (default) or "cupy" ("cuda", the name of its kernel family, also
             names it; runtime/backend_names.py): aicfc-lower-exec selects the kernels
             of the backend's kernel family.
    inplace: false leaves every launch out-of-place (aicfc-fold-inplace{enable=false}).
    precision: "fp32" (default), "bf16" or "fp16": the two low ones add the aicfc-autocast
             step with that dtype (mixed precision, float32 master weights).
    fuse_train_step: true adds aicfc-fuse-train-step (the "fused-step" stage).
    """

    name = "aicfc-train-pipeline"

    backend: str = "numpy"
    inplace: bool = True
    precision: str = "fp32"
    fuse_train_step: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PIPELINE_PRECISIONS:
            raise ValueError(
                f"aicfc-train-pipeline: unknown value '{self.precision}' for option "
                f"'precision'; expected one of: {', '.join(PIPELINE_PRECISIONS)}"
            )
        try:  # a bad option is a command-line mistake: refuse it before any IR is read
            train_pipeline(self.backend, self.inplace)
        except ValueError as e:
            raise ValueError(f"aicfc-train-pipeline: {e}") from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        low = None if self.precision == "fp32" else self.precision
        steps = train_pipeline(
            self.backend, self.inplace, autocast=low, fuse_train_step=self.fuse_train_step
        )
        run_steps(ctx, op, steps)
