"""Build a model's train step and predict functions as graph-level IR.

The train step is a pure function (docs/architecture.md §1):

    func.func @train_step(%x {input "x"}, %y {input "y"},
                          %p {param "0.weight"}, %m {state "0.weight.exp_avg"}, ...,
                          %offset {state "rng.offset"},          // only with dropout
                          %lr {state "optim.0.lr"}, ...)         // the training loop's
        -> (loss, next "0.weight", next "0.weight.exp_avg", ..., next "rng.offset", ...)

    the accumulation counter and the schedule (aicfc/training.py, when asked for)
    -> forward ops (each module emits its own) -> graph.cross_entropy | graph.mse_loss
    -> autodiff.backward %loss wrt <every param>
    -> accumulation, clipping (aicfc/training.py, when asked for)
    -> one optimizer op per param (autodiff.adam_step / autodiff.sgd_step) reading its
       param group's hyperparameter states
    -> graph.add %offset, 1                                      // only with dropout

`@predict` takes `x` and the params and returns "output"; dropout emits
nothing there. Ops are built with their classes' constructors (which infer
result types), never from text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    ModuleOp,
    TensorType,
    f32,
    f64,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects import autodiff, graph
from aicfc.dialects.roles import make_attrs
from aicfc.nn import (
    EmitContext,
    Module,
    dropout_offset,
    has_dropout,
    parameter_aliases,
    scalar_constant,
)
from aicfc.optim import Optimizer
from aicfc.training import (
    TrainingOptions,
    emit_counters,
    emit_updates,
    group_layout,
    training_state,
    unchanged_states,
)

LOSSES: dict[str, Callable[[SSAValue, SSAValue], graph.GraphOp]] = {
    "cross_entropy": graph.CrossEntropyOp,
    "mse": graph.MseLossOp,
}
"""Loss name -> op class; both take (prediction, target) and yield a scalar mean."""

LABEL_DTYPE = np.dtype(np.int32)
"""Integer labels of cross_entropy are i32 in the IR (integer arrays are converted)."""

RNG_OFFSET = "rng.offset"

_ELEMENT_TYPES: dict[np.dtype, Attribute] = {
    np.dtype(np.float32): f32,
    np.dtype(np.float64): f64,
    np.dtype(np.int32): i32,
    np.dtype(np.int64): i64,
}


def element_type(dtype: np.dtype | type) -> Attribute:
    """The builtin element type of a NumPy dtype (float32/64, int32/64)."""
    dt = np.dtype(dtype)
    if dt not in _ELEMENT_TYPES:
        raise TypeError(f"dtype {dt} has no IR element type (use float32, float64, int32, int64)")
    return _ELEMENT_TYPES[dt]


def tensor_type(shape: Sequence[int], dtype: np.dtype | type) -> TensorType[Attribute]:
    return TensorType(element_type(dtype), list(shape))


@dataclass(frozen=True)
class External:
    """One named function argument: role "input", "param" or "state", and its type."""

    name: str
    role: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def type(self) -> TensorType[Attribute]:
        return tensor_type(self.shape, self.dtype)


PARAM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""Parameter dtypes the IR and both runtimes train in (one per model)."""


def check_param_dtypes(model: Module) -> None:
    """All parameters share one float dtype of PARAM_DTYPES; TypeError naming them if not.

    A mixed or integer model would otherwise fail deep in the compiler (a VJP
    type mismatch, an integer learning rate attribute) instead of here.
    """
    named = list(model.named_parameters())
    bad = [(n, p.dtype) for n, p in named if p.dtype not in PARAM_DTYPES]
    if bad:
        raise TypeError(
            "parameters must be float32 or float64, got " + ", ".join(f"{n}: {dt}" for n, dt in bad)
        )
    dtypes = sorted({str(p.dtype) for _, p in named})
    if len(dtypes) > 1:
        raise TypeError(
            f"parameters must share one dtype, got {' and '.join(dtypes)} ("
            + ", ".join(f"{n}: {p.dtype}" for n, p in named)
            + ")"
        )


def param_externals(model: Module) -> list[External]:
    check_param_dtypes(model)
    return [External(n, "param", p.shape, p.dtype) for n, p in model.named_parameters()]


def initial_values(
    model: Module, optimizer: Optimizer | None, options: TrainingOptions | None = None
) -> dict[str, np.ndarray]:
    """Every param and (if `optimizer`) state of the train step with its initial value.

    Ordered as the train step's arguments: each param then its states, then
    `rng.offset` when the model has dropout (its initial value carries the dropout
    layers' random streams, `nn.dropout_offset`), then the training loop's states
    (aicfc/training.py `training_state`: hyperparameters, schedule and accumulation
    counters). Raises TypeError when the parameters are not all float32 or all float64,
    ValueError for a state name that equals a parameter's.
    """
    check_param_dtypes(model)
    values: dict[str, np.ndarray] = {}
    params = dict(model.named_parameters())
    per_group: dict[str, dict[str, Any]] = {}
    if optimizer is not None:
        for names, hyper in optimizer.groups(model):
            per_group.update({n: hyper for n in names})
    for name, p in params.items():
        values[name] = p.data.copy()
        if optimizer is not None:
            for suffix, v in optimizer.init_state(p.data, per_group[name]).items():
                _add(values, f"{name}.{suffix}", v)
    if optimizer is not None and has_dropout(model):
        _add(values, RNG_OFFSET, np.asarray(dropout_offset(model), dtype=np.int64))
    if optimizer is not None:
        for name, v in training_state(model, optimizer, options or TrainingOptions()).items():
            _add(values, name, v)
    return values


def _add(values: dict[str, np.ndarray], name: str, value: np.ndarray) -> None:
    if name in values:
        raise ValueError(
            f"compile: the state {name!r} has the name of a parameter or another state; "
            "rename the module that holds it"
        )
    values[name] = value


def input_external(model: Module, x_shape: Sequence[int], dtype: np.dtype | type) -> External:
    """The `x` argument: `dtype` (the parameters') floats, or the ids dtype (i32) that the
    model's `input_spec()` declares (an Embedding first, a GPT)."""
    spec = model.input_spec()
    x_dtype = spec.dtype if spec.dtype is not None else np.dtype(dtype)
    return External("x", "input", tuple(x_shape), x_dtype)


def target_spec(model: Module, loss: str, x_shape: Sequence[int], dtype: np.dtype) -> External:
    """The `y` argument of the loss: i32 labels with the output's shape without its last dim
    ([N] for logits [N, C], [N, T] for [N, T, V]; cross_entropy) or the output's shape (mse)."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    if loss == "cross_entropy":
        return External("y", "input", model.output_shape(x_shape)[:-1], LABEL_DTYPE)
    return External("y", "input", model.output_shape(x_shape), np.dtype(dtype))


def _hint(name: str) -> str:
    # SSA names may not start with a digit: "0.weight" prints as %_0.weight.
    return name if not name[0].isdigit() else "_" + name


def _make_func(
    fn_name: str,
    args: Sequence[External],
    body: Callable[[Builder, dict[str, SSAValue]], list[tuple[str, SSAValue]]],
    inits: Mapping[str, np.ndarray] | None = None,
) -> func.FuncOp:
    block = Block(arg_types=[a.type for a in args])
    for value, a in zip(block.args, args, strict=True):
        value.name_hint = _hint(a.name)
    b = Builder(InsertPoint.at_end(block))
    results = body(b, {a.name: v for a, v in zip(args, block.args, strict=True)})
    b.insert(func.ReturnOp(*(v for _, v in results)))
    fn = func.FuncOp(
        fn_name,
        ([a.type for a in args], [v.type for _, v in results]),
        Region(block),
        arg_attrs=ArrayAttr(
            [make_attrs(a.role, a.name, _init_attr(a, (inits or {}).get(a.name))) for a in args]
        ),
        res_attrs=ArrayAttr([make_attrs(name=n) for n, _ in results]),
    )
    try:  # op constructors infer types but check nothing: a module's bad emit stops here
        fn.verify()
    except VerifyException as e:
        raise ValueError(f"@{fn_name}: the IR built for the model does not verify: {e}") from None
    return fn


def _init_attr(a: External, value: np.ndarray | None) -> DenseIntOrFPElementsAttr | None:
    """`aicfc.init` of a state that does not start at zero: its value, as a dense literal."""
    if value is None:
        return None
    t: Any = a.type
    return DenseIntOrFPElementsAttr.from_list(t, value.reshape(-1).tolist())


def build_predict(
    model: Module,
    x_shape: Sequence[int],
    dtype: np.dtype | type = np.float32,
    name: str = "predict",
) -> func.FuncOp:
    """`@predict(x, params...) -> "output"`: the forward pass without dropout."""
    args = [input_external(model, x_shape, dtype), *param_externals(model)]

    def body(b: Builder, values: dict[str, SSAValue]) -> list[tuple[str, SSAValue]]:
        ctx = EmitContext(b, values, training=False, aliases=parameter_aliases(model))
        return [("output", model.emit(ctx, values["x"], ""))]

    return _make_func(name, args, body)


def build_train_step(
    model: Module,
    loss: str,
    optimizer: Optimizer,
    x_shape: Sequence[int],
    dtype: np.dtype | type = np.float32,
    name: str = "train_step",
    options: TrainingOptions | None = None,
) -> func.FuncOp:
    """`@train_step(x, y, params and states...) -> ("loss"[, "grad_norm"], next params and
    states...)`.

    options: the schedule, clipping, accumulation and kept gradients (aicfc/training.py);
    None: none of them. Dropout layers in eval mode (`Module.eval()`) emit nothing, and
    `rng.offset` then stays where it is. A state whose initial value is not zero carries
    it as the argument attribute `aicfc.init` (aicfc-run starts it there). Raises
    ValueError for an unknown loss and nn.ShapeError when `x_shape` does not fit the model.
    """
    options = options or TrainingOptions()
    x = input_external(model, x_shape, dtype)
    y = target_spec(model, loss, x_shape, np.dtype(dtype))
    init = initial_values(model, optimizer, options)
    roles = {n: "param" for n, _ in model.named_parameters()}
    args = [x, y] + [
        External(n, roles.get(n, "state"), tuple(v.shape), v.dtype) for n, v in init.items()
    ]
    inits = {n: v for n, v in init.items() if n not in roles and v.any()}
    groups = group_layout(model, optimizer)

    def body(b: Builder, values: dict[str, SSAValue]) -> list[tuple[str, SSAValue]]:
        counters = emit_counters(b, values, groups, options)
        ctx = EmitContext(
            b,
            values,
            training=True,
            rng_offset=values.get(RNG_OFFSET),
            aliases=parameter_aliases(model),
        )
        pred = model.emit(ctx, values["x"], "")
        loss_value = ctx.add(LOSSES[loss](pred, values["y"]))
        params = [n for n, _ in model.named_parameters()]
        grads = b.insert(autodiff.BackwardOp(loss_value, [values[n] for n in params])).grads
        outputs, nexts = emit_updates(
            b,
            values,
            dict(zip(params, grads, strict=True)),
            groups,
            optimizer,
            options,
            counters,
            element_type(dtype),
        )
        if RNG_OFFSET in values and has_dropout(model, training=True):
            one = scalar_constant(ctx, 1)
            nexts[RNG_OFFSET] = ctx.add(graph.AddOp(values[RNG_OFFSET], one))
        unchanged = unchanged_states(groups, optimizer) | {RNG_OFFSET}
        results: list[tuple[str, SSAValue]] = [("loss", loss_value), *outputs]
        for a in args[2:]:
            assert a.name in nexts or a.name in unchanged, f"no next value of {a.name}"
            results.append((a.name, nexts.get(a.name, values[a.name])))
        return results

    return _make_func(name, args, body, inits)


def build_module(
    model: Module,
    loss: str,
    optimizer: Optimizer,
    batch_size: int,
    functions: Sequence[str] = ("train_step", "predict"),
    dtype: np.dtype | type = np.float32,
    options: TrainingOptions | None = None,
) -> ModuleOp:
    """A module with `@train_step` and/or `@predict` for inputs [batch_size, in_features]
    (or [batch_size, *model.input_spec().sample]: [batch_size, block_size] for a GPT)."""
    sample = model.input_spec().sample
    if sample is None:
        raise ValueError("build_module: the model fixes no input width; build functions directly")
    x_shape = (batch_size, *sample)
    ops: list[func.FuncOp] = []
    for fn in functions:
        if fn == "train_step":
            ops.append(build_train_step(model, loss, optimizer, x_shape, dtype, options=options))
        elif fn == "predict":
            ops.append(build_predict(model, x_shape, dtype))
        else:
            raise ValueError(f"unknown function {fn!r}; known: train_step, predict")
    return ModuleOp(ops)


__all__ = [
    "LOSSES",
    "External",
    "build_module",
    "build_predict",
    "build_train_step",
    "element_type",
    "initial_values",
    "input_external",
    "target_spec",
]
