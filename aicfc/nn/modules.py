"""Neural-network modules that emit graph IR (PyTorch's torch.nn, as IR builders).

A module holds its parameters as NumPy arrays and knows how to write its own
forward computation into a function being built (`Module.emit`); nothing here
computes a forward pass. Names and layouts follow torch.nn, so state dicts move
between the two unchanged: `Sequential` names its children "0", "1", ... (or by
the keys of an OrderedDict / keyword arguments), and `Linear.weight` is
[out_features, in_features] (the IR multiplies with `transpose_b`).

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    [name for name, _ in model.named_parameters()]
    # ['0.weight', '0.bias', '2.weight', '2.bias']

Initial weights are drawn from a NumPy Generator: the one passed as `rng`, or
the library-wide one that `aicfc.manual_seed(seed)` resets.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, TensorType, i64
from xdsl.ir import Operation, SSAValue

from aicfc.dialects import graph

_default_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Reset the library-wide Generator that initialises parameters (torch.manual_seed's role)."""
    global _default_rng
    _default_rng = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    """The library-wide Generator used when a module gets no `rng`."""
    return _default_rng


class ShapeError(ValueError):
    """An input shape that a module cannot take; the message names the module and dims."""


class LayerMismatch(ShapeError):
    """Two consecutive layers of a model that do not fit (e.g. Linear(20, 32) then
    Linear(31, 4)); the message names both layers and the widths."""


def _short(m: Module) -> str:
    """`repr(m)` on one line (a container is named by its type)."""
    text = repr(m)
    return text if "\n" not in text else f"{type(m).__name__}(...)"


def _symbolic(shape: Sequence[int]) -> str:
    """`[N, 32]` for a batch shape (the leading dim is the batch size)."""
    return "[" + ", ".join(["N", *(str(d) for d in shape[1:])]) + "]" if shape else "[]"


class Parameter:
    """A trainable tensor of a module: `data` is a NumPy array (float32 by default)."""

    def __init__(self, data: np.ndarray):
        self.data = np.ascontiguousarray(data)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def __repr__(self) -> str:
        return f"Parameter(shape={list(self.shape)}, dtype={self.dtype})"


@dataclass(frozen=True)
class InputSpec:
    """What a model takes as its input `x`, beyond the shapes `Module.output_shape` checks.

    dtype:  None: floats of the parameters' dtype (never cast); an integer dtype (int32,
            the IR's id type): token ids, which a Program accepts in any integer dtype
            and converts, as it does cross-entropy labels.
    high:   for ids, every id must be in [0, high) (an Embedding's num_embeddings); a
            Program checks host inputs before a step (InputError naming "x").
    sample: the dims after the batch dim of the input a Program builds for a bare batch
            size (`Program.mlir(batch_size=...)`, `report()`): [in_features] for an MLP,
            [block_size] for a GPT; None where the model fixes none.
    """

    dtype: np.dtype | None = None
    high: int | None = None
    sample: tuple[int, ...] | None = None

    @property
    def is_ids(self) -> bool:
        return self.dtype is not None and np.issubdtype(self.dtype, np.integer)


@dataclass
class EmitContext:
    """What a module needs while it writes its forward ops into a function.

    builder:    inserts ops at the end of the function body.
    params:     the function argument of each parameter, by full name ("0.weight").
    training:   True for the train step (dropout active), False for predict.
    rng_offset: the `rng.offset` state argument (tensor<i64>) when training with dropout.
    aliases:    other name -> the name a shared (tied) parameter is an argument under
                (`parameter_aliases`), so every module that holds it reads one value.
    """

    builder: Builder
    params: dict[str, SSAValue]
    training: bool
    rng_offset: SSAValue | None = None
    aliases: dict[str, str] = field(default_factory=dict)

    def param(self, name: str) -> SSAValue:
        return self.params[self.aliases.get(name, name)]

    def add(self, op: Operation) -> SSAValue:
        """Insert `op` and return its (first) result."""
        self.builder.insert(op)
        return op.results[0]


class Module:
    """Base class of layers: parameters, children, names and IR emission.

    Subclasses set `Parameter` and `Module` attributes in `__init__` (registered
    in assignment order, like torch.nn.Module) and override `emit` (write the
    forward ops) and, when the shape changes, `output_shape`.
    """

    _parameters: OrderedDict[str, Parameter]
    _modules: OrderedDict[str, Module]
    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    # --- structure --------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(
        self, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(full name, parameter) pairs, in registration order ("0.weight", "0.bias", ...).

        A parameter held by several modules (weight tying: the same Linear used
        twice) is one parameter: it comes once, under its first name, unless
        `remove_duplicate=False` (torch.nn.Module.named_parameters' semantics).
        """
        seen: set[int] = set()
        for name, p in self._all_parameters(prefix):
            if remove_duplicate and id(p) in seen:
                continue
            seen.add(id(p))
            yield name, p

    def _all_parameters(self, prefix: str) -> Iterator[tuple[str, Parameter]]:
        for name, p in self._parameters.items():
            yield (f"{prefix}.{name}" if prefix else name), p
        for name, child in self.named_children():
            yield from child._all_parameters(f"{prefix}.{name}" if prefix else name)

    def parameters(self) -> Iterator[Parameter]:
        for _, p in self.named_parameters():
            yield p

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the parameters by name (the keys of torch.nn.Module.state_dict(): a
        tied parameter appears under each of its names)."""
        return {name: p.data.copy() for name, p in self.named_parameters(remove_duplicate=False)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace parameters by name; every name must match, with equal shape and dtype.

        Raises KeyError listing missing/unexpected names, ValueError naming a
        parameter whose shape or dtype differs.
        """
        own = dict(self.named_parameters(remove_duplicate=False))
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing {missing}, unexpected {unexpected}")
        for name, p in own.items():
            value = np.asarray(state[name])
            if value.shape != p.shape or value.dtype != p.dtype:
                raise ValueError(
                    f"load_state_dict: {name!r} expects {p.dtype}{list(p.shape)}, "
                    f"got {value.dtype}{list(value.shape)}"
                )
            p.data = np.array(value, copy=True)

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and its children (torch.nn.Module.train): a
        Program compiled from it trains with dropout only where a module is in training
        mode, and reads the modes again at every step (`Program.step`)."""
        if not isinstance(mode, bool):
            raise TypeError(f"train: mode must be a bool, got {mode!r}")
        for _, m in self.named_modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """`train(False)`: dropout is the identity in the train steps compiled from now on."""
        return self.train(False)

    # --- IR emission ------------------------------------------------------

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        """Write this module's forward ops for input `x`; return the output value.

        `prefix` is the module's full name ("" for the root), so a parameter
        is `ctx.param(f"{prefix}.weight")`.
        """
        raise NotImplementedError(f"{type(self).__name__} does not emit IR")

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The output shape for an input of `shape`; raises ShapeError if it cannot take it."""
        return tuple(shape)

    def input_features(self) -> int | None:
        """Features of the last input dimension this module requires, if it fixes one."""
        return None

    def input_spec(self) -> InputSpec:
        """What this module takes as a model's input: float features [N, input_features()]
        by default; a module whose input is token ids (Embedding) says so."""
        n = self.input_features()
        return InputSpec(sample=(n,) if n is not None else None)

    def is_stochastic(self) -> bool:
        """True if this module itself draws random numbers in the train step (dropout)."""
        return False

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        children = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(children) + "\n)" if children else ")")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Sequential(Module):
    """Children applied in order; named "0", "1", ... or by an OrderedDict's / kwargs' keys.

    Sequential(Linear(4, 8), ReLU())
    Sequential(OrderedDict(fc1=Linear(4, 8), act=ReLU()))
    """

    def __init__(self, *layers: Module | OrderedDict[str, Module], **named: Module):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], OrderedDict):
            items: list[tuple[str, Module]] = list(layers[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(layers)]  # type: ignore[misc]
        items += list(named.items())
        for name, m in items:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: child {name!r} is {type(m).__name__}, not a Module")
            setattr(self, name, m)

    def __getitem__(self, i: int | str) -> Module:
        if isinstance(i, int):
            return list(self._modules.values())[i]
        return self._modules[i]

    def __len__(self) -> int:
        return len(self._modules)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        for name, m in self.named_children():
            x = m.emit(ctx, x, _join(prefix, name))
        return x

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The last child's output shape. A child that cannot take its predecessor's
        output raises ShapeError naming both layers (a model mistake, not the input's)."""
        out = tuple(shape)
        source: tuple[str, Module] | None = None  # the last child that fixed the width
        for name, m in self.named_children():
            try:
                new = m.output_shape(out)
            except LayerMismatch:
                raise
            except ShapeError as e:
                if source is None:
                    raise
                width = m.input_features()
                takes = f"takes [N, {width}] inputs" if width is not None else f"fails: {e}"
                raise LayerMismatch(
                    f"layer {name!r} {_short(m)} {takes}, but layer {source[0]!r} "
                    f"{_short(source[1])} "
                    f"outputs {_symbolic(out)}"
                    + (f" ({out[-1]} != {width})" if width is not None and out else "")
                ) from None
            if m.input_features() is not None or new != out:
                source = (name, m)
            out = new
        return out

    def input_features(self) -> int | None:
        for m in self.children():
            n = m.input_features()
            if n is not None:
                return n
        return None

    def input_spec(self) -> InputSpec:
        """The first child's spec where it takes ids (an Embedding first), else float
        features of `input_features()`."""
        first = next(self.children(), None)
        if first is not None and first.input_spec().dtype is not None:
            return first.input_spec()
        return super().input_spec()


class Linear(Module):
    """y = x W^T + b with W [out_features, in_features] and b [out_features] (torch.nn.Linear).

    x is [N, in_features] or, as in a transformer, [N, T, in_features] (any rank >= 2).

    Initialisation follows torch.nn.Linear.reset_parameters (torch/nn/modules/
    linear.py): kaiming_uniform_(W, a=sqrt(5)) has bound gain*sqrt(3/fan_in)
    with gain = sqrt(2/(1+a^2)) = sqrt(1/3), i.e. W ~ U(-1/sqrt(in), 1/sqrt(in)),
    and b ~ U(-1/sqrt(in), 1/sqrt(in)). Values come from `rng` (or the library
    Generator, see `manual_seed`), so they are reproducible but not bit-equal
    to PyTorch's draws.

    Emits `graph.matmul %x, %W transpose_b` then `graph.bias_add` (which
    `aicfc-fuse` turns into one `graph.gemm_epilogue`).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        rng: np.random.Generator | None = None,
        dtype: Any = np.float32,
    ):
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise ValueError(
                f"Linear: features must be positive, got ({in_features}, {out_features})"
            )
        self.in_features = in_features
        self.out_features = out_features
        rng = rng if rng is not None else default_rng()
        bound = 1.0 / math.sqrt(in_features)
        w = rng.uniform(-bound, bound, size=(out_features, in_features))
        self.weight = Parameter(w.astype(dtype))
        self.bias: Parameter | None = None
        if bias:
            self.bias = Parameter(rng.uniform(-bound, bound, size=(out_features,)).astype(dtype))

    def input_features(self) -> int | None:
        return self.in_features

    def output_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """[..., out_features] for inputs [..., in_features] of rank >= 2 (torch.nn.Linear;
        the leading dims fold into the product's M)."""
        if len(shape) < 2 or shape[-1] != self.in_features:
            raise ShapeError(f"{self!r} takes [N, {self.in_features}] inputs, got {list(shape)}")
        return (*shape[:-1], self.out_features)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        y = ctx.add(graph.MatmulOp(x, ctx.param(_join(prefix, "weight")), transpose_b=True))
        if self.bias is not None:
            y = ctx.add(graph.BiasAddOp(y, ctx.param(_join(prefix, "bias"))))
        return y

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


class _Pointwise(Module):
    """A parameter-free elementwise module emitting one op class (OP)."""

    OP: type[graph.UnaryElementwiseOp]

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        return ctx.add(self.OP(x))


class ReLU(_Pointwise):
    """y = max(x, 0) (graph.relu)."""

    OP = graph.ReluOp


class GELU(_Pointwise):
    """y = x Phi(x), the exact erf form (graph.gelu; torch.nn.GELU(approximate="none"))."""

    OP = graph.GeluOp


class Tanh(_Pointwise):
    """y = tanh(x) (graph.tanh)."""

    OP = graph.TanhOp


class SiLU(_Pointwise):
    """y = x sigmoid(x) (graph.silu; torch.nn.SiLU)."""

    OP = graph.SiluOp


class Dropout(Module):
    """Inverted dropout with drop probability p (torch.nn.Dropout), only in the train step
    and only in training mode (`model.train()`; after `model.eval()` it is the identity).

    Emits `graph.dropout %x, %offset p = <p> seed = <key>`: the mask comes from
    Philox4x32-10 keyed by the layer's key and counted from the `rng.offset` state, which
    the train step advances by one per step. The key is `seed` where one is given, else
    a hash of the layer's name in the model (`dropout_key`), the same in every Program of
    this architecture; what makes runs differ is `stream`, drawn from the Generator at
    construction (as a seed was), which starts `rng.offset` (`dropout_offset`). So
    everything random about a step is state, and a checkpoint loaded into a Program built
    under another `manual_seed` draws the same masks
    (docs/design.md#complete-checkpoints). `predict` emits nothing for it (eval mode).
    """

    def __init__(
        self, p: float = 0.5, seed: int | None = None, rng: np.random.Generator | None = None
    ):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)
        rng = rng if rng is not None else default_rng()
        self.seed = int(seed) if seed is not None else None
        self.stream = int(rng.integers(0, 2**31 - 1)) if seed is None else 0

    def key(self, name: str) -> int:
        """The Philox key of this layer when its full name in the model is `name`."""
        return self.seed if self.seed is not None else dropout_key(name)

    def emit(self, ctx: EmitContext, x: SSAValue, prefix: str) -> SSAValue:
        if not ctx.training or not self.training or self.p == 0.0:
            return x
        assert ctx.rng_offset is not None, "the train step declares rng.offset for dropout"
        return ctx.add(graph.DropoutOp(x, ctx.rng_offset, self.p, self.key(prefix)))

    def is_stochastic(self) -> bool:
        return self.p > 0.0

    def extra_repr(self) -> str:
        return f"p={self.p}"


def dropout_key(name: str) -> int:
    """The Philox key of a dropout layer without a seed: 63 bits of BLAKE2b of its name."""
    digest = hashlib.blake2b(f"aicfc.dropout:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def dropout_offset(model: Module) -> int:
    """The initial `rng.offset` of a train step of `model`: the XOR of its dropout layers'
    `stream`s in the high 32 bits (each step adds one to the low bits)."""
    stream = 0
    for _, m in model.named_modules():
        if isinstance(m, Dropout):
            stream ^= m.stream
    return stream << 32


def dropout_keys(model: Module) -> dict[str, int]:
    """The Philox key of every dropout layer by its name (what a checkpoint checks)."""
    return {n: m.key(n) for n, m in model.named_modules() if isinstance(m, Dropout)}


def parameter_aliases(model: Module) -> dict[str, str]:
    """Each extra name of a tied parameter -> its first name (the one that names it in
    the IR, the optimizer state and the Program's state dict)."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        canonical = first.setdefault(id(p), name)
        if canonical != name:
            aliases[name] = canonical
    return aliases


def has_dropout(model: Module, training: bool = False) -> bool:
    """True if any submodule draws random numbers in the train step (`training=True`: one
    that does in the modules' current mode, `Module.train()` / `eval()`)."""
    return any(m.is_stochastic() and (m.training or not training) for _, m in model.named_modules())


def mode_key(modules: Iterable[Module]) -> tuple[bool, ...]:
    """The training flags of the stochastic ones of `modules` (what a train step depends
    on); Program passes its stochastic modules, found once, as this runs at every step."""
    return tuple(m.training for m in modules if m.is_stochastic())


def scalar_constant(ctx: EmitContext, value: int, element_type: IntegerType = i64) -> SSAValue:
    """A `graph.constant dense<value> : tensor<element_type>`."""
    t = TensorType(element_type, [])
    return ctx.add(graph.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [value])))


__all__ = [
    "GELU",
    "Dropout",
    "EmitContext",
    "InputSpec",
    "LayerMismatch",
    "Linear",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "ShapeError",
    "SiLU",
    "Tanh",
    "dropout_key",
    "dropout_keys",
    "dropout_offset",
    "has_dropout",
    "manual_seed",
    "mode_key",
    "parameter_aliases",
]
