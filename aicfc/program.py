"""Program: a compiled model that trains and predicts, with parameters by name.

`aicfc.compile(model, ...)` returns a Program. Shapes are static in the IR, so
a Program compiles lazily: the first `step(x, y)` (or `predict(x)`) with a
batch size builds `@train_step` (or `@predict`) for that shape, runs the
train pipeline (passes/pipelines.py) and loads the exec program on the
backend. Entries are cached per (function, x shape, x dtype); a smaller last
batch simply compiles once more. Every entry is loaded against ONE
BufferStore, so all of them read and update the same parameter arrays.

Input rules (checked before anything runs; errors name the input):

- x: float32 (the parameters' dtype), shape [N, in_features]; floats are
  never cast silently.
- y for loss="cross_entropy": integer class labels, shape [N], each in
  [0, num_classes). Any integer dtype is accepted and converted to int32 (the
  IR's label type); a float array is an error.
- y for loss="mse": float32 with the model output's shape [N, out_features].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from aicfc.builder import LABEL_DTYPE, build_predict, build_train_step, initial_values
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.ir import print_module
from aicfc.nn import Module, ShapeError
from aicfc.optim import Optimizer
from aicfc.passes.pipelines import GRAPH_STAGE, run_steps, stage_names, train_pipeline
from aicfc.runtime.backend import Backend, BufferStore, Executable, InputError

if TYPE_CHECKING:
    from aicfc.analysis import Report

FUNCTIONS = ("train_step", "predict")


@dataclass
class CompiledFunction:
    """One compiled entry: the IR after every stage and the loaded executable."""

    function: str
    x_shape: tuple[int, ...]
    stages: dict[str, ModuleOp] = field(default_factory=dict)
    executable: Executable | None = None


def _shape(s: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


class Program:
    """A model compiled for training and inference on one backend.

    Build it with `aicfc.compile`. Attributes: `backend` (the runtime Backend),
    `store` (the BufferStore of params and state), `loss`, `optimizer`, `stages`
    (pipeline stage names, in order).
    """

    def __init__(
        self,
        model: Module,
        loss: str,
        optimizer: Optimizer,
        backend: Backend,
        inplace: bool = True,
    ):
        self.model = model
        self.loss = loss
        self.optimizer = optimizer
        self.backend = backend
        self.inplace = inplace
        self._steps = train_pipeline(backend.kernel_backend, inplace)
        self.stages: tuple[str, ...] = stage_names(self._steps)
        params = dict(model.named_parameters())
        if not params:
            raise ValueError("compile: the model has no parameters to train")
        self.dtype = next(iter(params.values())).dtype
        self.in_features = model.input_features()
        self.param_names: tuple[str, ...] = tuple(params)
        self.store: BufferStore = backend.create_store()
        init = initial_values(model, optimizer)
        for name, value in init.items():
            role = "param" if name in params else "state"
            self.store.declare(name, value.shape, value.dtype, role)
        self.store.load_state_dict(init)
        self._compiled: dict[tuple[str, tuple[int, ...], str], CompiledFunction] = {}
        self._last: dict[str, CompiledFunction] = {}

    # --- training and inference --------------------------------------------

    def step(self, x: Any, y: Any) -> float:
        """One optimizer step on the batch (x, y); returns the batch's mean loss as a float.

        The loss is the value before the update (as PyTorch's loss.item()).
        Raises InputError naming "x" or "y" for a wrong shape, dtype or label.
        """
        xa = self._check_x(x)
        ya = self._check_y(y, xa.shape)
        out = self._entry("train_step", xa.shape).executable.run({"x": xa, "y": ya})  # type: ignore[union-attr]
        return float(out["loss"])

    def predict(self, x: Any) -> np.ndarray:
        """The model's output for x [N, in_features] (dropout off): a new array [N, out]."""
        xa = self._check_x(x)
        return self._entry("predict", xa.shape).executable.run({"x": xa})["output"]  # type: ignore[union-attr]

    # --- parameters and state ----------------------------------------------

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every param and optimizer state by name, in argument order.

        Params use torch.nn names ("0.weight"); optimizer state follows
        PyTorch's keys under the param ("0.weight.exp_avg", "0.weight.step");
        dropout's RNG counter is "rng.offset".
        """
        return self.store.state_dict()

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Write values into the existing buffers by name (params keep their identity).

        strict=True: the names must equal `state_dict()`'s. strict=False loads
        what matches (e.g. a torch.nn state dict of params only). Raises
        StoreError (a KeyError) naming unknown/missing buffers or a buffer
        whose shape or dtype differs; nothing is written then.
        """
        self.store.load_state_dict(state, strict=strict)

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trainable parameters by name (torch's model.state_dict() keys)."""
        return {n: self.backend.to_numpy(self.store[n]) for n in self.param_names}

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

    def report(self, x: Any = None, batch_size: int = 1) -> Report:
        """The operator report of @predict (aicfc.analysis.Report; str() is the text).

        Static for inputs [batch_size, in_features]; with a batch `x` also the
        measured part (active units, dead units, weight ranks) computed with
        the current (trained) parameters. Raises InputError for a bad x.
        """
        from aicfc.analysis import analyze

        if x is not None:
            return analyze(self.model, x=self._check_x(x), params=self.parameters())
        return analyze(self.model, input_shape=self._x_shape(batch_size))

    # --- internals -------------------------------------------------------------

    def _check_function(self, function: str) -> None:
        if function not in FUNCTIONS:
            raise ValueError(f"unknown function {function!r}; functions: {', '.join(FUNCTIONS)}")

    def _x_shape(self, batch_size: int) -> tuple[int, ...]:
        if self.in_features is None:
            raise ValueError("the model fixes no input width; call step()/predict() with data")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        return (int(batch_size), self.in_features)

    def _check_x(self, x: Any) -> np.ndarray:
        xa = np.asarray(x)
        if xa.dtype != self.dtype:
            raise InputError(
                f'input "x": expected dtype {self.dtype}, got {xa.dtype} '
                f"(convert with x.astype(np.{self.dtype}))"
            )
        expected = f"[N, {self.in_features}]" if self.in_features is not None else "[N, ...]"
        try:
            if xa.ndim < 1 or xa.shape[0] < 1:
                raise ShapeError("empty batch")
            self.model.output_shape(xa.shape)
        except ShapeError as e:
            raise InputError(
                f'input "x": expected shape {expected}, got {_shape(xa.shape)} ({e})'
            ) from None
        return np.ascontiguousarray(xa)

    def _check_y(self, y: Any, x_shape: tuple[int, ...]) -> np.ndarray:
        ya = np.asarray(y)
        out_shape = self.model.output_shape(x_shape)
        if self.loss == "mse":
            if ya.dtype != self.dtype or ya.shape != out_shape:
                raise InputError(
                    f'input "y": mse targets must be {self.dtype}{_shape(out_shape)} '
                    f"(the model output), got {ya.dtype}{_shape(ya.shape)}"
                )
            return np.ascontiguousarray(ya)
        if not np.issubdtype(ya.dtype, np.integer):
            raise InputError(
                f'input "y": cross_entropy takes integer class labels, got dtype {ya.dtype} '
                "(convert with y.astype(np.int32) if they are whole numbers)"
            )
        if ya.shape != (x_shape[0],):
            raise InputError(
                f'input "y": expected shape [{x_shape[0]}] (one label per row of x), '
                f"got {_shape(ya.shape)}"
            )
        classes = out_shape[-1]
        lo, hi = int(ya.min()), int(ya.max())
        if lo < 0 or hi >= classes:
            raise InputError(
                f'input "y": labels must be in [0, {classes}) for {classes} classes, '
                f"got values from {lo} to {hi}"
            )
        return ya.astype(LABEL_DTYPE, copy=False)

    def _entry(self, function: str, x_shape: tuple[int, ...]) -> CompiledFunction:
        key = (function, tuple(x_shape), str(self.dtype))
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._compile(function, tuple(x_shape))
            self._compiled[key] = entry
        self._last[function] = entry
        return entry

    def _compile(self, function: str, x_shape: tuple[int, ...]) -> CompiledFunction:
        if function == "train_step":
            fn = build_train_step(self.model, self.loss, self.optimizer, x_shape, self.dtype)
        else:
            fn = build_predict(self.model, x_shape, self.dtype)
        module = ModuleOp([fn])
        entry = CompiledFunction(function, x_shape)
        entry.stages[GRAPH_STAGE] = module.clone()

        def keep(stage: str, m: ModuleOp) -> None:
            entry.stages[stage] = m.clone()

        run_steps(make_context(), module, self._steps, keep)
        program = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
        entry.executable = self.backend.load(program, self.store)
        return entry

    def __repr__(self) -> str:
        return (
            f"Program(loss={self.loss!r}, optimizer={self.optimizer}, "
            f"backend={self.backend.name!r}, compiled={self.compiled()})"
        )
