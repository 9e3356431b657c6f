"""aicfc.compile: a model, a loss and an optimizer become a Program on a backend.

The module is `compiler`, not `compile`: a submodule named `compile` would be
bound as the attribute `aicfc.compile` on import and hide the function.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from aicfc.backends import resolve_backend
from aicfc.builder import LOSSES
from aicfc.nn import Module
from aicfc.optim import Adam, Optimizer
from aicfc.optim.lr_scheduler import LRScheduler
from aicfc.program import Program
from aicfc.training import TrainingOptions

if TYPE_CHECKING:
    from aicfc.distributed import DataParallel


def compile(
    model: Module,
    loss: str = "cross_entropy",
    optimizer: Optimizer | None = None,
    backend: str = "auto",
    inplace: bool = True,
    tf32: bool = False,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    precision: str = "fp32",
    *,
    lr_scheduler: LRScheduler | None = None,
    clip_grad_norm: float | None = None,
    accumulate: int = 1,
    keep_gradients: bool = False,
    data_parallel: bool | DataParallel = False,
) -> Program:
    """Compile `model` for training with `loss` and `optimizer` on `backend`.

    model:     an aicfc.nn.Module (its current weights are the initial params;
               the Program owns the trained values from then on, the model
               keeps its initial ones). Its layers must fit each other: a
               Linear(20, 32) followed by a Linear(31, 4) raises nn.LayerMismatch
               (a ShapeError) naming both layers.
    loss:      "cross_entropy" (integer labels, mean over the batch; PyTorch's
               F.cross_entropy) or "mse" (mean over all elements; F.mse_loss).
    optimizer: an aicfc.optim optimizer (default Adam(lr=1e-3)).
    backend:   "numpy", "cupy" (also "cuda", the name of its kernel family) or "auto"
               (cupy where a GPU is usable, else numpy; Program.backend_reason says
               why, and the choice is logged at INFO level on the "aicfc" logger).
    inplace:   False disables aicfc-fold-inplace (every update copies back; for debugging).
    tf32:      allow TF32 tensor-core GEMMs on the cupy backend (about 1e-3 relative
               error, several times faster on large layers); False (default) keeps
               every product strict fp32. The numpy backend is strict fp32 either way.
    precision: "fp32" (default: every product strict fp32), "tf32" (the same as
               tf32=True), "bf16" or "fp16" (mixed precision: products in the low dtype
               with fp32 accumulation, fp32 master weights, optimizer state, loss,
               softmax and layer norm; the aicfc-autocast pass, docs/passes.md). The
               state dict holds the fp32 masters, so checkpoints load across precisions.
    cache_dir: the compile cache's folder (aicfc/compile_cache.py: the planned exec IR
               by a hash of the model's IR, the pipeline and the device); None (default)
               uses $AICFC_CACHE_DIR or ~/.cache/aicfc/compiled, False disables it.
    lr_scheduler: an aicfc.optim.lr_scheduler schedule (LinearLR, CosineAnnealingLR,
               SequentialLR, ...), evaluated inside the step from a device counter.
    clip_grad_norm: max_norm of torch.nn.utils.clip_grad_norm_ applied in the step (the
               pre-clip norm is `Program.last_grad_norm`); None: no clipping.
    accumulate: micro-batches per optimizer update (gradient accumulation; each `step`
               is one micro-batch, every k-th applies the mean gradient).
    keep_gradients: keep each parameter's gradient for `Program.gradients()`.
    data_parallel: True trains data-parallel across the processes of `aicfc-launch` (their
               environment: RANK, WORLD_SIZE, LOCAL_RANK, AICFC_RENDEZVOUS), the cupy
               backend on GPU LOCAL_RANK with NCCL, the numpy one with a FileCommunicator;
               an aicfc.distributed.DataParallel gives the communicator or bucket size.
               Parameters are broadcast from rank 0; feed each rank its shard
               (aicfc.distributed.shard). docs/api.md, "Data-parallel training".

    Nothing is lowered yet: each function is built and compiled at its first
    call with a new batch shape (see Program). Raises ValueError for an
    unknown loss, backend or precision or a bad training option, nn.ShapeError
    (nn.LayerMismatch) for layers that do not fit, TypeError for a non-aicfc model
    or optimizer or for parameters that are not all float32 or all float64, and the
    runtime's BackendUnavailable when backend="cupy" cannot run here.
    """
    if not isinstance(model, Module):
        raise TypeError(f"compile: model must be an aicfc.nn.Module, got {type(model).__name__}")
    if loss not in LOSSES:
        raise ValueError(f"compile: unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    optimizer = optimizer if optimizer is not None else Adam()
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"compile: optimizer must be an aicfc.optim optimizer (Adam, AdamW, SGD), "
            f"got {type(optimizer).__name__}"
        )
    options = TrainingOptions(lr_scheduler, clip_grad_norm, accumulate, keep_gradients)
    dp = None
    if data_parallel is not False:
        from aicfc.distributed import setup_backend

        runtime, reason, dp = setup_backend(backend, data_parallel)
    else:
        runtime, reason = resolve_backend(backend)
    return Program(
        model,
        loss,
        optimizer,
        runtime,
        inplace=inplace,
        tf32=tf32,
        backend_reason=reason,
        cache_dir=cache_dir,
        precision=precision,
        options=options,
        data_parallel=dp,
    )
