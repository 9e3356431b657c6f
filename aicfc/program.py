"""Program: a compiled model that trains and predicts, with parameters by name.

`aicfc.compile(model, ...)` returns a Program. Shapes are static in the IR, so
a Program compiles lazily: the first `step(x, y)` (or `predict(x)`) with a
batch size builds `@train_step` (or `@predict`) for that shape, runs the
train pipeline (passes/pipelines.py) and loads the exec program on the
backend. Entries are cached per (function, x shape); a smaller last batch
simply compiles once more. Every entry is loaded against ONE
BufferStore, so all of them read and update the same parameter arrays.

Input rules (checked before anything runs; errors name the input):

- x: float32 (the parameters' dtype), shape [N, in_features]; floats are
  never cast silently. The model checks each shape once; later batches of
  that shape only have their dtype checked. A model whose input is token ids
  (`Module.input_spec()`: an Embedding first, a GPT) takes integer x [N, T],
  each id in [0, num_embeddings), converted to int32 like labels.
- y for loss="cross_entropy": integer class labels with the output's shape
  without its last dim ([N] for logits [N, C], [N, T] for [N, T, V]), each in
  [0, C). Any integer dtype is accepted and converted to int32 (the IR's
  label type); a float array is an error.
- y for loss="mse": float32 with the model output's shape [N, out_features].

Host or device batches: x and y may be NumPy arrays or, on the cupy backend,
CuPy arrays (anything with `__cuda_array_interface__`) on the backend's device.
Device inputs are copied device-to-device into the program's fixed input buffers
(no host round trip; a batch that already is `executable().buffer("x")` is not
copied at all). Labels and token ids on the device are range-checked only by a
synchronous `step()` (the check reads their min and max back); with `sync=False`
nothing waits, and a label outside [0, C) makes that step's loss NaN and its row's
gradient zero instead of an error.
"""

from __future__ import annotations

import itertools
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, overload

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from aicfc.builder import LABEL_DTYPE, build_predict, build_train_step, initial_values
from aicfc.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from aicfc.compile_cache import CompileCache, cache_folder, cache_key, file_digest
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.dialects.autodiff import BackwardOp, UpdateScaleOp
from aicfc.dialects.roles import arg_name
from aicfc.evaluate import Evaluation, evaluate
from aicfc.ir import print_module
from aicfc.nn import InputSpec, Module, ShapeError, mode_key
from aicfc.optim import Optimizer
from aicfc.optim.lr_scheduler import LRScheduler
from aicfc.param_groups import ParamGroupView, last_epoch, replace_optimizer
from aicfc.passes.aicfc_autocast import LOW_DTYPES
from aicfc.passes.aicfc_expand_backward import unused_wrt
from aicfc.passes.aicfc_fold_weight_casts import copy_name
from aicfc.passes.aicfc_loss_scale import GROWTH_TRACKER, SCALE
from aicfc.passes.pipelines import (
    GRAPH_STAGE,
    run_steps,
    stage_names,
    train_pipeline,
    with_data_parallel,
)
from aicfc.runtime.backend import Backend, Executable
from aicfc.runtime.errors import InputError, StoreError
from aicfc.runtime.store import BufferStore
from aicfc.training import (
    GRAD_NORM,
    GRADIENT_SUFFIX,
    TrainingOptions,
    group_layout,
    transient_states,
)

if TYPE_CHECKING:
    from aicfc.distributed import DataParallel
    from aicfc.measured import Thresholds
    from aicfc.passes.analysis import Report

FUNCTIONS = ("train_step", "predict")


@dataclass
class CompiledFunction:
    """One compiled entry: the IR after every stage and the loaded executable.

    from_cache: the planned exec IR came from the compile cache (aicfc/compile_cache.py);
                then `stages` holds only "graph" and the last stage until `Program.mlir`
                asks for another one (it runs the pipeline for it then).
    seconds:    wall time of building the IR, the pipeline (or the cache read) and
                loading the executable on the backend (not its first run).
    """

    function: str
    x_shape: tuple[int, ...]
    stages: dict[str, ModuleOp] = field(default_factory=dict)
    executable: Executable | None = None
    from_cache: bool = False
    seconds: float = 0.0


class IncompatibleKeys(NamedTuple):
    """What `Program.load_state_dict` did not match (torch.nn.Module's `_IncompatibleKeys`).

    missing_keys:    buffers of the Program that the state dict lacks (left unchanged).
    unexpected_keys: names in the state dict that the Program has no buffer for (ignored).
    """

    missing_keys: list[str]
    unexpected_keys: list[str]


def _shape(s: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _host_array(name: str, a: Any, dtype: np.dtype | None) -> np.ndarray:
    """`np.asarray(a)`; a list or scalar that NumPy converts to another dtype than `dtype`
    is an InputError saying so (the user never made that float64 array)."""
    arr = np.asarray(a)
    if not isinstance(a, np.ndarray) and dtype is not None and arr.dtype != dtype:
        raise InputError(
            f'input "{name}": expected a {dtype} array, got a {type(a).__name__}, which NumPy '
            f"converts to {arr.dtype} (pass np.asarray({name}, dtype=np.{dtype}))"
        )
    return arr


def check_x(model: Module, x: Any, dtype: np.dtype) -> np.ndarray:
    """x as a contiguous host array of `dtype` and shape [N, in_features] (or int32 token
    ids, for a model whose `input_spec()` says so) that `model` takes; InputError naming
    "x" otherwise (the checks of `Program.predict`)."""
    spec = model.input_spec()
    xa: np.ndarray = (
        _ids(x, spec, device=False, check_range=True)
        if spec.is_ids
        else _x_of_dtype(x, dtype, device=False)
    )
    _model_output_shape(model, xa.shape)
    return xa


def _ids(x: Any, spec: InputSpec, device: bool, check_range: bool) -> Any:
    """Token ids x (host or `device` array) as a contiguous array of `spec.dtype`; InputError
    naming "x" for a float array or an id outside [0, spec.high) (device arrays: only when
    `check_range`, which reads their min and max back)."""
    xa = x if device else _host_array("x", x, None)
    if not np.issubdtype(xa.dtype, np.integer):
        raise InputError(
            f'input "x": the model takes integer token ids, got dtype {xa.dtype} '
            "(convert with x.astype(np.int32) if they are whole numbers)"
        )
    if spec.high is not None and xa.size and (check_range or not device):
        lo, hi = int(xa.min()), int(xa.max())
        if lo < 0 or hi >= spec.high:
            raise InputError(
                f'input "x": token ids must be in [0, {spec.high}) (the embedding has '
                f"{spec.high} rows), got values from {lo} to {hi}"
            )
    return _contiguous(xa.astype(spec.dtype, copy=False), device)


def _x_of_dtype(x: Any, dtype: np.dtype, device: bool) -> Any:
    """x (a host or `device` array) in row-major order; InputError unless its dtype is `dtype`."""
    xa = x if device else _host_array("x", x, dtype)
    if xa.dtype != dtype:
        raise InputError(
            f'input "x": expected dtype {dtype}, got {xa.dtype} (convert with x.astype(np.{dtype}))'
        )
    return _contiguous(xa, device)


def _model_output_shape(model: Module, x_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The model's output shape for inputs of `x_shape`; InputError naming "x" when the
    model cannot take them."""
    n_in = model.input_features()
    expected = f"[N, {n_in}]" if n_in is not None else "[N, ...]"
    try:
        if len(x_shape) < 1:
            raise ShapeError("a 0-d array has no batch dimension")
        if x_shape[0] < 1:
            raise ShapeError("empty batch")
        return model.output_shape(x_shape)
    except ShapeError as e:
        raise InputError(
            f'input "x": expected shape {expected}, got {_shape(x_shape)} ({e})'
        ) from None


def _on_device(a: Any) -> bool:
    """True for a GPU array (CuPy, or anything exposing the CUDA array interface)."""
    return hasattr(a, "__cuda_array_interface__")


def _contiguous(a: Any, device: bool) -> Any:
    """`a` in row-major order (a device array is copied on the device if it is not).
    A 0-d array stays 0-d (np.ascontiguousarray would make it [1], and an error would
    then report a shape the user never passed)."""
    if a.flags.c_contiguous:
        return a
    return a.copy() if device else np.ascontiguousarray(a)


PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
"""The values of `aicfc.compile(precision=...)`."""

AUTOCAST_DTYPE = {"bf16": "bf16", "fp16": "fp16"}
"""The aicfc-autocast dtype of each mixed precision."""


def check_precision(
    precision: str, dtype: np.dtype, options: TrainingOptions, data_parallel: object
) -> None:
    """Refuse the combinations mixed precision does not support yet, before anything
    compiles (each would otherwise run and train wrongly, or fail deep in a pass).

    Raises TypeError for bf16/fp16 with parameters that are not float32 (autocast lowers
    float32 values only), ValueError for fp16 with gradient accumulation (the loss scale's
    skip and growth count micro-steps, not updates) or with data parallel (each rank would
    decide to skip from its own unreduced gradients).
    """
    if precision not in AUTOCAST_DTYPE:
        return
    if np.dtype(dtype) != np.float32:
        raise TypeError(
            f"compile: precision={precision!r} needs float32 parameters (fp32 master "
            f"weights), got {np.dtype(dtype)}; use precision='fp32' for another dtype"
        )
    if precision == "fp16" and options.accumulate > 1:
        raise ValueError(
            f"compile: precision='fp16' with accumulate={options.accumulate} is not "
            "supported: loss scaling would skip and grow per micro-batch, not per update; "
            "use precision='bf16' (no loss scaling) or accumulate=1"
        )
    if precision == "fp16" and data_parallel is not None:
        raise ValueError(
            "compile: precision='fp16' with data_parallel is not supported: each rank "
            "would skip an overflowing step from its own gradients; use precision='bf16'"
        )


def loss_scale_state() -> dict[str, np.ndarray]:
    """The first values of fp16's dynamic loss-scaling state (torch GradScaler's init_scale
    2^16 and a growth tracker at 0), by their state-dict names."""
    init = UpdateScaleOp.DEFAULTS["init_scale"]
    return {SCALE: np.asarray(init, np.float32), GROWTH_TRACKER: np.asarray(0.0, np.float32)}


class Program:
    """A model compiled for training and inference on one backend.

    Build it with `aicfc.compile`. Attributes: `backend` (the runtime Backend),
    `backend_reason` (why that backend: "requested", or for backend="auto" e.g.
    "auto chose numpy: backend 'cupy' cannot run here: CuPy is not installed ..."),
    `store` (the BufferStore of params and state), `loss`, `optimizer`, `stages`
    (pipeline stage names, in order).

    The Program owns the trained weights (`parameters()`, `state_dict()`); the
    nn.Module it was compiled from keeps its initial ones.

    Compiled exec IR is kept in the compile cache (aicfc/compile_cache.py; `cache_dir`:
    its folder, None for $AICFC_CACHE_DIR or ~/.cache/aicfc/compiled, False to disable
    it), so a second process compiling the same model for the same device skips the
    pipeline (`compiled_functions()[i].from_cache`).

    Kernels are selected for the backend's device (`backend.lower_exec_options()`:
    architecture, cuBLASLt availability, autotune cache), so `mlir("exec")` shows
    the kernels that run. tf32: allow TF32 tensor-core GEMMs (about 1e-3 relative
    error); None keeps the backend's setting (`CupyBackend(tf32=...)`, False by
    default: strict fp32). The numpy backend computes in strict fp32 regardless.

    precision: "fp32" (default), "tf32" (fp32 with TF32 products: the same as tf32=True),
    "bf16" or "fp16": mixed precision, the products in the low dtype with fp32
    accumulation (aicfc-autocast, docs/passes.md), while the params stay fp32 master
    weights: `state_dict()` holds fp32 and loads across precisions. fp16 adds dynamic loss
    scaling (aicfc-loss-scale: torch GradScaler's semantics on the device) and its state
    `amp.scale`, `amp.growth_tracker` (a checkpoint without them loads with strict=False
    and keeps the current scale). `self.precision`. The low-precision copy of each weight
    that the train step reads and the optimizer rewrites (aicfc-fold-weight-casts, state
    `<param>.bf16`) is derived state: filled from the masters whenever a step is loaded
    or `load_state_dict` / `load` writes the masters, and never in `state_dict()`.

    data_parallel: an aicfc.distributed.DataParallel with its communicator: the train
    step all-reduces its gradients (stage "data-parallel") and every param and state is
    broadcast from rank 0 here (docs/api.md, "Data-parallel training").
    """

    def __init__(
        self,
        model: Module,
        loss: str,
        optimizer: Optimizer,
        backend: Backend,
        inplace: bool = True,
        tf32: bool | None = None,
        backend_reason: str = "requested",
        cache_dir: str | os.PathLike[str] | bool | None = None,
        precision: str = "fp32",
        options: TrainingOptions | None = None,
        data_parallel: DataParallel | None = None,
    ):
        if precision not in PRECISIONS:
            raise ValueError(
                f"compile: unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}"
            )
        first = next((p for _, p in model.named_parameters()), None)
        if first is not None:  # (no parameters: refused below)
            check_precision(precision, first.dtype, options or TrainingOptions(), data_parallel)
        self.precision = precision
        if precision == "tf32":
            tf32 = True
        self.model = model
        self.backend_reason = backend_reason
        self.loss = loss
        self._optimizer = optimizer
        self.options = options or TrainingOptions()
        self.backend = backend
        self.inplace = inplace
        exec_options = backend.lower_exec_options()
        if tf32 is not None and "tf32" in exec_options:
            exec_options["tf32"] = tf32
        self.tf32 = bool(exec_options.get("tf32", False))
        if precision == "fp32" and self.tf32:  # tf32=True (or the backend's) says TF32
            self.precision = "tf32"
        self._steps = train_pipeline(
            backend.name, inplace, exec_options, autocast=AUTOCAST_DTYPE.get(precision)
        )
        self.data_parallel = data_parallel
        comm = data_parallel.communicator if data_parallel is not None else None
        if data_parallel is not None:
            if comm is None or backend.communicator not in (None, comm):
                raise ValueError("Program: data_parallel needs its communicator, the backend's")
            backend.communicator = comm
            self._steps = with_data_parallel(self._steps, comm.world_size, data_parallel.bucket_mb)
        self.stages: tuple[str, ...] = stage_names(self._steps)
        folder = cache_folder(cache_dir)
        self.compile_cache: CompileCache | None = CompileCache(folder) if folder else None
        tuned = exec_options.get("autotune_cache")
        self._cache_inputs = {"autotune": file_digest(str(tuned)) if tuned else "none"}
        params = dict(model.named_parameters())
        if not params:
            raise ValueError("compile: the model has no parameters to train")
        self.dtype = next(iter(params.values())).dtype
        self.in_features = model.input_features()
        self.input_spec: InputSpec = model.input_spec()
        if self.input_spec.sample is not None:  # the layers must fit each other, whatever x is
            try:
                model.output_shape((1, *self.input_spec.sample))
            except ShapeError as e:
                raise type(e)(f"compile: the model's layers do not fit: {e}") from None
        self.param_names: tuple[str, ...] = tuple(params)
        self.group_layouts = group_layout(model, optimizer)
        self.store: BufferStore = backend.create_store()
        init = initial_values(model, optimizer, self.options)
        low = LOW_DTYPES.get(AUTOCAST_DTYPE.get(precision, ""))
        # the state name of each param's low-precision copy -> the param
        self._weight_copies = {copy_name(p, low): p for p in params} if low else {}
        self._transient = frozenset([*transient_states(model, self.options), *self._weight_copies])
        if precision == "fp16":  # aicfc-loss-scale's state, GradScaler's initial values
            init.update(loss_scale_state())
        for name, value in init.items():
            role = "param" if name in params else "state"
            self.store.declare(name, value.shape, value.dtype, role)
        self.store.load_state_dict(init)
        if comm is not None:  # the ranks start equal, whatever each one initialised
            from aicfc.distributed import broadcast_store

            broadcast_store(self.store, comm, backend)
        # mode_key runs at every step: only the modules that draw random numbers count, and
        # whether one does (dropout's p > 0) is fixed when its train step is compiled
        self._stochastic = tuple(m for _, m in model.named_modules() if m.is_stochastic())
        self._compiled: dict[tuple[Any, ...], CompiledFunction] = {}
        self._last_outputs: dict[str, Any] = {}
        self._output_shapes: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._last: dict[str, CompiledFunction] = {}
        self._warned: set[str] = set()

    # --- training and inference --------------------------------------------

    @overload
    def step(self, x: Any, y: Any, *, sync: Literal[True] = True) -> float: ...

    @overload
    def step(self, x: Any, y: Any, *, sync: Literal[False]) -> Any: ...

    def step(self, x: Any, y: Any, *, sync: bool = True) -> Any:
        """One optimizer step on the batch (x, y); returns the batch's mean loss.

        The loss is the value before the update (as PyTorch's loss.item()).
        sync=True (default): waits for the step and returns a Python float.
        sync=False: returns at once with the loss as a 0-d array of the backend
        (a CuPy array on the GPU: a fresh copy that later steps never overwrite;
        reading it waits for this step), so steps queue back to back.
        x, y: host (NumPy) or device (CuPy) arrays, see the module docstring.
        Raises InputError naming "x" or "y" for a wrong shape, dtype or label.

        The model's modes count: a dropout layer in eval mode (`model.eval()`,
        `prog.eval()`) drops nothing (a train step for those modes compiles once).
        With `accumulate=k`, each call is one micro-batch and every k-th applies the update.
        """
        xa = self._check_x(x, check_range=sync)
        ya = self._check_y(y, self._output_shape(xa.shape), check_range=sync)
        exe = self._entry("train_step", xa.shape).executable
        assert exe is not None
        if not sync:
            self._last_outputs = exe.run_async({"x": xa, "y": ya})
            return self._last_outputs["loss"]
        self._last_outputs = exe.run({"x": xa, "y": ya})
        return float(self._last_outputs["loss"])

    def predict(self, x: Any, *, sync: bool = True) -> Any:
        """The model's output for x [N, in_features] (dropout off): a new array [N, out]
        (a GPT's: logits [N, T, V] for token ids [N, T]).

        sync=True (default): a NumPy array. sync=False: a new array of the backend
        (CuPy on the GPU), returned without waiting.
        """
        xa = self._check_x(x)
        self._output_shape(xa.shape)
        exe = self._entry("predict", xa.shape).executable
        assert exe is not None
        if not sync:
            return exe.run_async({"x": xa})["output"]
        return exe.run({"x": xa})["output"]

    # --- parameters and state ----------------------------------------------

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every param and optimizer state by name, in argument order.

        Params use torch.nn names ("0.weight"); optimizer state follows
        PyTorch's keys under the param ("0.weight.exp_avg", "0.weight.step");
        dropout's RNG counter is "rng.offset"; the hyperparameters "optim.<g>.lr", ...;
        the schedule's counter "lr_scheduler.last_epoch"; gradient accumulation's
        "grad_accum.micro_step" and "<param>.grad_accum" (docs/design.md#complete-checkpoints).
        Kept gradients (`keep_gradients=True`) are not in it (`gradients()`).
        """
        return {n: v for n, v in self.store.state_dict().items() if n not in self._transient}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Write values into the existing buffers by name (params keep their identity).

        strict=True: the names must equal `state_dict()`'s. strict=False loads
        what matches (e.g. a torch.nn state dict of params only) and returns
        IncompatibleKeys(missing_keys, unexpected_keys), as torch.nn.Module does
        (both empty when everything matched). Raises StoreError (a KeyError)
        naming unknown/missing buffers (strict) or a buffer whose shape or dtype
        differs, TypeError for a non-mapping; nothing is written then.
        """
        given: Any = state
        if not isinstance(given, Mapping):
            self.store.load_state_dict(given, strict=strict)  # its TypeError
        names = [n for n in self.store.names() if n not in self._transient]
        missing = [n for n in names if n not in state]
        unexpected = [n for n in state if n not in self.store or n in self._transient]
        if strict and (missing or unexpected):
            parts = [f"unexpected buffers: {', '.join(unexpected)}"] if unexpected else []
            parts += [f"missing buffers: {', '.join(missing)}"] if missing else []
            raise StoreError("load_state_dict: " + "; ".join(parts))
        self.store.load_state_dict(
            {n: v for n, v in state.items() if n not in self._transient}, strict=False
        )
        self._refresh_weight_copies()
        return IncompatibleKeys(missing_keys=missing, unexpected_keys=unexpected)

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trainable parameters by name (torch's model.state_dict() keys)."""
        return {n: self.backend.to_numpy(self.store[n]) for n in self.param_names}

    # --- the training loop (docs/api.md#the-training-loop) ------------------------

    @property
    def optimizer(self) -> Optimizer:
        """The optimizer. Assigning one of the same structure (class, flags, group rules)
        writes its hyperparameters into every group, for every compiled batch shape;
        another is refused with ValueError (TypeError for a non-optimizer), nothing changed."""
        return self._optimizer

    @optimizer.setter
    def optimizer(self, new: Optimizer) -> None:
        self.store.load_state_dict(replace_optimizer(self, new), strict=False)
        self._optimizer = new

    @property
    def param_groups(self) -> list[ParamGroupView]:
        """torch's `optimizer.param_groups`: one dict-like view per group over the device
        hyperparameters (aicfc/param_groups.py); `prog.param_groups[0]["lr"] = 3e-4` takes
        effect at the next step of every compiled batch shape, without a re-capture."""
        return [ParamGroupView(self, g) for g in self.group_layouts]

    @property
    def lr_scheduler(self) -> LRScheduler | None:
        """The schedule the train step evaluates on the device (None: constant lr)."""
        return self.options.lr_scheduler

    def next_lr(self, group: int = 0) -> float:
        """The learning rate the next update of param group `group` uses (torch's
        `param_groups[g]["lr"]` after `scheduler.step()`)."""
        view = self.param_groups[group]
        if self.options.lr_scheduler is None:
            return float(view["lr"])
        return self.options.lr_scheduler.lr(view["initial_lr"], last_epoch(self))

    @property
    def last_grad_norm(self) -> float | None:
        """The gradients' global 2-norm before clipping at the last step (the value
        torch.nn.utils.clip_grad_norm_ returns); None without `clip_grad_norm` or before the
        first step. With accumulation it is the norm of the window's mean so far."""
        norm = self._last_outputs.get(GRAD_NORM)
        return None if norm is None else float(norm)

    def gradients(self) -> dict[str, np.ndarray]:
        """Copies of each parameter's gradient at the last step, by name (before clipping;
        with accumulation, the mean over the window so far). Needs
        `aicfc.compile(..., keep_gradients=True)` (else ValueError): the default train step
        consumes each gradient in place."""
        if not self.options.keep_gradients:
            raise ValueError(
                "gradients(): compile with keep_gradients=True to keep them (the default train "
                "step frees each gradient once the optimizer has read it)"
            )
        return {
            n: self.backend.to_numpy(self.store[f"{n}.{GRADIENT_SUFFIX}"]) for n in self.param_names
        }

    @property
    def training(self) -> bool:
        """True unless every module of the model is in eval mode (torch's `training`)."""
        return any(m.training for _, m in self.model.named_modules())

    def train(self, mode: bool = True) -> Program:
        """`model.train(mode)`: train steps run dropout in training mode only (predict never
        does); returns the Program."""
        self.model.train(mode)
        return self

    def eval(self) -> Program:
        """`model.eval()`: train steps run without dropout from now on."""
        return self.train(False)

    def evaluate(self, x: Any, y: Any, batch_size: int = 1024) -> Evaluation:
        """Mean loss (and accuracy for cross_entropy) of the model on (x, y), no update, in
        eval mode, `batch_size` rows per predict (aicfc/evaluate.py). Raises InputError for
        a bad x or y."""
        return evaluate(self, x, y, batch_size)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint of everything that determines the next step to `path` (one
        safetensors file, atomically: aicfc/checkpoint.py). Raises WriteError."""
        save_checkpoint(self, path)

    def load(self, source: str | os.PathLike[str] | Checkpoint) -> None:
        """Continue from the checkpoint at `source` (a path, or what `aicfc.load` read):
        every value is checked (format version, names, shapes, dtypes, the dropout keys,
        the schedule and the other training settings) before any is written. Raises
        CheckpointError naming the file and what differs; the Program is unchanged."""
        load_checkpoint(self, source)

    # --- IR -------------------------------------------------------------------

    def mlir(
        self,
        stage: str = GRAPH_STAGE,
        function: str = "train_step",
        batch_size: int | None = None,
        generic: bool = False,
    ) -> str:
        """The IR of `function` after pipeline `stage` (see `stages`).

        batch_size: which compiled batch shape to show; None shows the latest
        one compiled for `function` (an error if none is), an int compiles
        that batch size if needed. Raises ValueError for an unknown stage or
        function (the message lists the known ones).
        """
        if stage not in self.stages:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(self.stages)}")
        self._check_function(function)
        if batch_size is not None:
            entry = self._entry(function, self._x_shape(batch_size))
        elif function in self._last:
            entry = self._last[function]
        else:
            raise ValueError(
                f"@{function} is not compiled yet: call "
                f"{'step' if function == 'train_step' else 'predict'}() first or pass batch_size"
            )
        if stage not in entry.stages:  # loaded from the compile cache: run the pipeline
            self._run_pipeline(entry, entry.stages[GRAPH_STAGE].clone())
        return print_module(entry.stages[stage], generic=generic)

    def executable(self, function: str = "train_step", batch_size: int | None = None) -> Executable:
        """The loaded Executable of `function` (low-level: its `buffer(name)` arrays)."""
        self._check_function(function)
        if batch_size is None:
            if function not in self._last:
                raise ValueError(f"@{function} is not compiled yet; pass batch_size")
            entry = self._last[function]
        else:
            entry = self._entry(function, self._x_shape(batch_size))
        assert entry.executable is not None
        return entry.executable

    def compiled(self) -> list[tuple[str, tuple[int, ...]]]:
        """(function, x shape) of every compiled entry, in compile order."""
        return [(c.function, c.x_shape) for c in self._compiled.values()]

    def compiled_functions(self) -> list[CompiledFunction]:
        """Every compiled entry (its stages, executable, compile time, cache hit), in
        compile order."""
        return list(self._compiled.values())

    def report(
        self, x: Any = None, batch_size: int = 1, thresholds: Thresholds | None = None
    ) -> Report:
        """The operator report of @predict as this Program compiles it (aicfc.analysis.Report,
        built by passes/analysis/ and aicfc/measured.py; str() is the text).

        The IR analysed is @predict after the pipeline's graph-level steps (aicfc-fuse,
        aicfc-expand-backward, aicfc-fuse, canonicalize, cse: stage "canonical"), so the
        nodes are the fused ops that run and no candidate suggests a rewrite the pipeline
        already applies. Static for inputs [batch_size, in_features]; with a batch `x`
        also the measured part (active units, dead units, weight ranks) computed with the
        current (trained) parameters. Raises InputError for a bad x.
        """
        from aicfc.measured import measure
        from aicfc.passes.analysis import analyze_module

        if x is not None:
            host = x.get() if _on_device(x) else x  # the analysis runs on the host
            xa = check_x(self.model, host, self.dtype)
            module = self._graph_level("predict", xa.shape)
            return measure(module, {**self.parameters(), "x": xa}, "predict", thresholds)
        return analyze_module(self._graph_level("predict", self._x_shape(batch_size)))

    # --- internals -------------------------------------------------------------

    def _refresh_weight_copies(self) -> None:
        """Each weight copy the store holds := its master cast to the copy's dtype (round to
        nearest even, graph.cast's rounding): what the optimizer would have written."""
        fresh = {}
        for name, param in self._weight_copies.items():
            if name in self.store:
                dtype = self.store.spec(name)[1]
                master = self.backend.to_numpy(self.store[param])
                with np.errstate(over="ignore"):  # f16 past 65504 is inf, as graph.cast's
                    fresh[name] = master.astype(dtype)
        if fresh:
            self.store.load_state_dict(fresh, strict=False)

    def _check_function(self, function: str) -> None:
        if function not in FUNCTIONS:
            raise ValueError(f"unknown function {function!r}; functions: {', '.join(FUNCTIONS)}")

    def _x_shape(self, batch_size: int) -> tuple[int, ...]:
        """The input shape for a bare batch size: [batch_size, *input_spec().sample]."""
        if self.input_spec.sample is None:
            raise ValueError("the model fixes no input width; call step()/predict() with data")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        return (int(batch_size), *self.input_spec.sample)

    def _device_input(self, name: str, a: Any) -> bool:
        """True for a device array; InputError if this backend cannot take one."""
        if not _on_device(a):
            return False
        if not self.backend.takes_device_arrays:
            raise InputError(
                f'input "{name}": a device (CuPy) array was given to the {self.backend.name} '
                f"backend, which takes host arrays (copy it with {name}.get())"
            )
        return True

    def _check_x(self, x: Any, check_range: bool = True) -> Any:
        """x of the parameters' dtype (or token ids, see `input_spec`), in row-major order
        (`_output_shape` checks its shape)."""
        device = self._device_input("x", x)
        if self.input_spec.is_ids:
            return _ids(x, self.input_spec, device, check_range)
        return _x_of_dtype(x, self.dtype, device)

    def _output_shape(self, x_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The model's output shape for inputs of `x_shape`: the model checks each shape
        once (InputError naming "x" if it does not fit), later steps look it up."""
        out = self._output_shapes.get(x_shape)
        if out is None:
            out = self._output_shapes[x_shape] = _model_output_shape(self.model, x_shape)
        return out

    def _check_y(self, y: Any, out_shape: tuple[int, ...], check_range: bool = True) -> Any:
        """y against the model's output `out_shape` for this batch (see the module docstring)."""
        device = self._device_input("y", y)
        mse = self.loss == "mse"
        ya = y if device else _host_array("y", y, self.dtype if mse else None)
        if mse:
            if ya.dtype != self.dtype or ya.shape != out_shape:
                raise InputError(
                    f'input "y": mse targets must be {self.dtype}{_shape(out_shape)} '
                    f"(the model output), got {ya.dtype}{_shape(ya.shape)}"
                )
            return _contiguous(ya, device)
        if not np.issubdtype(ya.dtype, np.integer):
            raise InputError(
                f'input "y": cross_entropy takes integer class labels, got dtype {ya.dtype} '
                "(convert with y.astype(np.int32) if they are whole numbers)"
            )
        if ya.shape != out_shape[:-1]:
            per = "row" if len(out_shape) == 2 else "position"
            raise InputError(
                f'input "y": expected shape {_shape(out_shape[:-1])} (one label per {per} of x), '
                f"got {_shape(ya.shape)}"
            )
        classes = out_shape[-1]
        if check_range or not device:  # a device array's min and max need a sync
            lo, hi = int(ya.min()), int(ya.max())
            if lo < 0 or hi >= classes:
                raise InputError(
                    f'input "y": labels must be in [0, {classes}) for {classes} classes, '
                    f"got values from {lo} to {hi}"
                )
        return _contiguous(ya.astype(LABEL_DTYPE, copy=False), device)

    def _entry(self, function: str, x_shape: tuple[int, ...]) -> CompiledFunction:
        key = (function, x_shape, mode_key(self._stochastic) if function == "train_step" else ())
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._compile(function, x_shape)
            self._compiled[key] = entry
        self._last[function] = entry
        return entry

    def _build(self, function: str, x_shape: tuple[int, ...]) -> ModuleOp:
        if function == "train_step":
            fn = build_train_step(
                self.model, self.loss, self.optimizer, x_shape, self.dtype, options=self.options
            )
        else:
            fn = build_predict(self.model, x_shape, self.dtype)
        return ModuleOp([fn])

    def _graph_level(self, function: str, x_shape: tuple[int, ...]) -> ModuleOp:
        """`function` built for `x_shape` after the pipeline steps before lowering."""
        module = self._build(function, x_shape)
        graph_steps = itertools.takewhile(lambda step: step.stage != "exec", self._steps)
        run_steps(make_context(), module, tuple(graph_steps))
        return module

    def _warn_unused(self, module: ModuleOp) -> None:
        """warnings.warn once per parameter the loss does not depend on (zero gradient)."""
        backwards = [op for op in module.walk() if isinstance(op, BackwardOp)]
        for v in (v for b in backwards for v in unused_wrt(b)):
            name = arg_name(v) or str(v.name_hint)
            if name not in self._warned:
                self._warned.add(name)
                warnings.warn(
                    f"parameter {name!r} gets no gradient: the loss does not depend on it, "
                    "so it never trains",
                    UserWarning,
                    stacklevel=5,
                )

    def _run_pipeline(self, entry: CompiledFunction, module: ModuleOp) -> None:
        """Run the pipeline on `module` in place, keeping each stage in `entry`."""

        def keep(stage: str, m: ModuleOp) -> None:
            entry.stages[stage] = m.clone()

        run_steps(make_context(), module, self._steps, keep)

    def _compile(self, function: str, x_shape: tuple[int, ...]) -> CompiledFunction:
        start = time.perf_counter()
        module = self._build(function, x_shape)
        if function == "train_step":
            self._warn_unused(module)
        entry = CompiledFunction(function, x_shape)
        entry.stages[GRAPH_STAGE] = module.clone()
        cache, key = self.compile_cache, ""
        planned = None
        if cache is not None:
            key = cache_key(module, (s.passes for s in self._steps), self._cache_inputs)
            planned = cache.load(key, make_context(), [function])
        if planned is not None:
            module = planned
            entry.from_cache = True
            entry.stages[self.stages[-1]] = module.clone()
        else:
            self._run_pipeline(entry, module)
            if cache is not None:
                cache.store(key, module)
        program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
        entry.executable = self.backend.load(program, self.store)
        self._refresh_weight_copies()  # a copy the load just declared starts zero-filled
        entry.seconds = time.perf_counter() - start
        return entry

    def __repr__(self) -> str:
        return (
            f"Program(loss={self.loss!r}, optimizer={self.optimizer}, "
            f"backend={self.backend.name!r}, compiled={self.compiled()})"
        )
