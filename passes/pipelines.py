"""The named pipeline: the whole compiler as one ordered list of steps.

Like tinygrad's `full_rewrite_to_sink`, `train_pipeline` is the single place
that says what runs in which order. Each step names the stage its output is
called by (`Program.mlir(stage)`, `aicfc-run --print-ir`); the input as built is
stage "graph".

    graph          the train step / predict as built (forward, loss, autodiff.backward, optimizer)
    fused          aicfc-fuse: gemm -> bias_add -> act becomes graph.gemm_epilogue
    autocast       aicfc-autocast{dtype=...}, only for a bf16/fp16 precision: the casts of
                   mixed precision (products in the low dtype, float32 masters and losses);
                   for fp16 also aicfc-loss-scale (dynamic loss scaling on the device)
    backward       aicfc-expand-backward: autodiff.backward replaced by VJP ops
    fused-backward aicfc-fuse again: act_grad + bias-grad reduce become autodiff.epilogue_grad,
                   and a product feeding one autodiff.gemm_epilogue_grad; with autocast also
                   aicfc-fold-casts (bf16 only: a product's or reduction's sum cast to f32
                   is written as f32 by the op itself: the gradients, the logits) and
                   aicfc-fold-narrowing-casts (bf16 and fp16: a layer norm's output cast
                   to the low dtype is stored in it by the layer norm, bit for bit)
    canonical      xDSL's canonicalize, aicfc-fold-constants and cse (constants folded,
                   duplicate constants and products merged)
    fused-step     aicfc-fuse-train-step, only when asked (fuse_train_step=True): a small
                   MLP's whole step becomes one autodiff.mlp_train_step where the backend
                   has a kernel for it (not by default: on the H200 its one persistent
                   kernel took 105 us per small step, the per-layer kernels 58)
    weight-copies  aicfc-fold-weight-casts, only for a bf16/fp16 precision: the optimizer
                   writes each weight's low-precision copy, which the forward reads in place
                   of a per-step cast of the master
    hoisted        aicfc-hoist-updates: each optimizer update right after its gradients
                   and its parameter's last reader
    exec           aicfc-lower-exec{backend=...}: exec.program with buffers and launches
    inplace        aicfc-fold-inplace: alias policies applied where use-def proves it safe
    planned        aicfc-plan-memory: tmp buffers share an arena where lifetimes allow
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from aicfc.runtime.backend_names import kernel_family

GRAPH_STAGE = "graph"
"""The name of the IR as built, before any step."""


@dataclass(frozen=True)
class Step:
    """One pipeline step: the stage name of its output and its passes (aicfc-opt -p syntax)."""

    stage: str
    passes: str


def _option(value: object) -> str:
    """A pass-option value in `-p` syntax: true/false, a number, or a quoted string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if '"' in text:
        raise ValueError(f"pass option value {text!r} contains a double quote")
    return f'"{text}"'


def train_pipeline(
    backend: str = "numpy",
    inplace: bool = True,
    exec_options: Mapping[str, object] | None = None,
    autocast: str | None = None,
    fuse_train_step: bool = False,
) -> tuple[Step, ...]:
    """The ordered steps from graph-level IR to a planned exec program.

    backend: "numpy" or "cupy" ("cuda" also names cupy): the kernels of its kernel
             family are selected (runtime/backend_names.py).
    inplace: False keeps every launch out-of-place (for debugging aliasing).
    exec_options: further options of aicfc-lower-exec, e.g. the device capability
             a backend reports (`Backend.lower_exec_options()`: arch, tf32,
             cublaslt, autotune_cache, device).
    autocast: None (float32 throughout) or the low dtype of mixed precision, "bf16" or
             "fp16" (aicfc-autocast's dtype; its step follows the first fusion).
    fuse_train_step: add aicfc-fuse-train-step (stage "fused-step"); off by default, as
             it measured slower than the per-layer kernels (docs/design.md).
    Raises ValueError (UnknownBackendError) for an unknown backend.
    """
    family = kernel_family(backend)  # lower-exec's backend option takes the family's name too
    inplace_opt = "true" if inplace else "false"
    lower = " ".join(
        [f"backend={family}"] + [f"{k}={_option(v)}" for k, v in (exec_options or {}).items()]
    )
    low = (Step("autocast", f"aicfc-autocast{{dtype={autocast}}}"),) if autocast else ()
    if autocast == "fp16":  # fp16 flushes small gradients to zero: scale the loss
        low = (Step("autocast", f"aicfc-autocast{{dtype={autocast}}},aicfc-loss-scale"),)
    # bf16 only: fp16's loss scaling detects overflow in the products' fp16 results (as
    # torch's GradScaler sees them), which an f32 result would hide
    fold = ",aicfc-fold-casts" if autocast == "bf16" else ""
    # both: a narrow result stores the bits its cast wrote (fp16's overflows included)
    fold += ",aicfc-fold-narrowing-casts" if autocast else ""
    copies = (Step("weight-copies", "aicfc-fold-weight-casts"),) if autocast else ()
    return (
        Step("fused", "aicfc-fuse"),
        *low,
        Step("backward", "aicfc-expand-backward"),
        Step("fused-backward", f"aicfc-fuse{fold}"),
        Step("canonical", "canonicalize,aicfc-fold-constants,cse"),
        *(
            (Step("fused-step", f"aicfc-fuse-train-step{{backend={family}}}"),)
            if fuse_train_step
            else ()
        ),
        *copies,
        Step("hoisted", "aicfc-hoist-updates"),
        Step("exec", f"aicfc-lower-exec{{{lower}}}"),
        Step("inplace", f"aicfc-fold-inplace{{enable={inplace_opt}}}"),
        Step("planned", "aicfc-plan-memory"),
    )


DATA_PARALLEL_STAGE = "data-parallel"
"""The stage after aicfc-data-parallel, which `with_data_parallel` adds after "exec"."""


def with_data_parallel(
    steps: tuple[Step, ...], world_size: int, bucket_mb: float = 25.0
) -> tuple[Step, ...]:
    """`steps` with `aicfc-data-parallel{world_size bucket_mb}` right after the "exec" step
    (the gradients' mean all-reduce goes in before in-place folding and memory planning).
    Raises ValueError when `steps` has no "exec" step or already has the stage.

    The "hoisted" step is left out: aicfc-hoist-updates moves each update next to its
    gradients, between launches that still write gradients the all-reduce must average
    first, so the updates stay after the backward, where the buckets end. So is
    "fused-step": a fused train step has no gradients for the all-reduce to average."""
    steps = tuple(s for s in steps if s.stage not in ("hoisted", "fused-step"))
    stages = [s.stage for s in steps]
    if "exec" not in stages or DATA_PARALLEL_STAGE in stages:
        raise ValueError(
            f"with_data_parallel: needs one 'exec' step and no data-parallel one, got {stages}"
        )
    at = stages.index("exec") + 1
    step = Step(
        DATA_PARALLEL_STAGE,
        f"aicfc-data-parallel{{world_size={int(world_size)} bucket_mb={float(bucket_mb)!r}}}",
    )
    return (*steps[:at], step, *steps[at:])


def stage_names(steps: tuple[Step, ...] | None = None) -> tuple[str, ...]:
    """ "graph" followed by each step's stage, in order."""
    return (GRAPH_STAGE, *(s.stage for s in steps or train_pipeline()))


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """xDSL's passes (canonicalize, cse, dce, ...) and aicfc's, by name."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    from aicfc.passes import get_all_passes

    return {**xdsl_passes(), **get_all_passes()}


def parse_passes(spec: str) -> tuple[ModulePass, ...]:
    """The passes of a `-p`-style spec ("aicfc-fuse,cse").

    Raises PassPipelineError (a ValueError) with aicfc-opt's messages: an unknown pass
    (with the list of passes), an unknown option or a value of the wrong type (with the
    pass's options), bad syntax; a value the pass itself refuses raises its ValueError.
    """
    from aicfc.passes.options import check_pipeline

    passes = available_passes()
    check_pipeline(spec, passes)
    return PassPipeline.parse_spec(passes, spec).passes


StageCallback = Callable[[str, ModuleOp], None]


def run_steps(
    ctx: Context,
    module: ModuleOp,
    steps: tuple[Step, ...],
    on_stage: StageCallback | None = None,
) -> None:
    """Apply `steps` to `module` in place, calling `on_stage(stage, module)` after each."""
    for step in steps:
        for p in parse_passes(step.passes):
            p.apply(ctx, module)
        if on_stage is not None:
            on_stage(step.stage, module)


__all__ = [
    "DATA_PARALLEL_STAGE",
    "GRAPH_STAGE",
    "Step",
    "available_passes",
    "parse_passes",
    "run_steps",
    "stage_names",
    "train_pipeline",
    "with_data_parallel",
]
