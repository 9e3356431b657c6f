"""Param groups as data: a rule that picks parameters, and the hyperparameters they get.

torch.optim takes param groups as lists of tensors (`[{"params": decay, "weight_decay":
0.1}, {"params": no_decay, "weight_decay": 0.0}]`), built by a loop that looks at each
parameter. Here the loop's test is the data: a `ParamGroup` names the parameters it
takes by their rank (`min_ndim`, `max_ndim`) and the type of the module that holds them
(`modules`), never by matching names, so it applies to any model. nanoGPT's recipe
(weight decay on matrices and embeddings, none on biases and layer-norm weights):

    optim.AdamW(lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95), param_groups=(
        optim.ParamGroup(min_ndim=2),
        optim.ParamGroup(max_ndim=1, weight_decay=0.0),
    ))

Each parameter joins the first group whose rule it satisfies; one that satisfies none is
an error naming it. A group's unset hyperparameters are the optimizer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aicfc.nn import Module


@dataclass(frozen=True, init=False)
class ParamGroup:
    """Which parameters (a rule on data) and their hyperparameters (unset: the optimizer's).

    min_ndim, max_ndim: the parameter's rank must lie in [min_ndim, max_ndim] (None: no
                        upper bound): `max_ndim=1` takes biases and layer-norm weights.
    modules:            the module holding the parameter must be an instance of one of
                        these aicfc.nn classes (empty: any module).
    hyperparameters:    overrides by torch's param-group keys ("lr", "betas", "eps",
                        "weight_decay", "momentum"); keywords of the constructor, e.g.
                        `ParamGroup(max_ndim=1, weight_decay=0.0)`.
    """

    min_ndim: int = 0
    max_ndim: int | None = None
    modules: tuple[type[Module], ...] = ()
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        min_ndim: int = 0,
        max_ndim: int | None = None,
        modules: tuple[type[Module], ...] | list[type[Module]] = (),
        **hyperparameters: Any,
    ):
        if min_ndim < 0 or (max_ndim is not None and max_ndim < min_ndim):
            raise ValueError(
                f"ParamGroup: the rank range [{min_ndim}, {max_ndim}] is empty or negative"
            )
        object.__setattr__(self, "min_ndim", int(min_ndim))
        object.__setattr__(self, "max_ndim", None if max_ndim is None else int(max_ndim))
        object.__setattr__(self, "modules", tuple(modules))
        object.__setattr__(self, "hyperparameters", dict(hyperparameters))

    def __hash__(self) -> int:
        items = tuple(sorted((k, repr(v)) for k, v in self.hyperparameters.items()))
        return hash((self.min_ndim, self.max_ndim, self.modules, items))

    def takes(self, ndim: int, module: Module) -> bool:
        """Whether a parameter of rank `ndim` held by `module` belongs to this group."""
        if ndim < self.min_ndim or (self.max_ndim is not None and ndim > self.max_ndim):
            return False
        return not self.modules or isinstance(module, self.modules)

    def describe(self) -> str:
        """The rule in words ("rank >= 2", "rank <= 1, in LayerNorm")."""
        parts = []
        if self.max_ndim is None:
            parts.append(f"rank >= {self.min_ndim}" if self.min_ndim else "any rank")
        elif self.min_ndim == self.max_ndim:
            parts.append(f"rank {self.min_ndim}")
        else:
            parts.append(f"rank in [{self.min_ndim}, {self.max_ndim}]")
        if self.modules:
            parts.append("in " + " or ".join(m.__name__ for m in self.modules))
        return ", ".join(parts)


def owners(model: Module) -> dict[str, Module]:
    """The module that holds each parameter, by the parameter's (first) name."""
    found: dict[str, Module] = {}
    for prefix, m in model.named_modules():
        for local in m._parameters:
            name = f"{prefix}.{local}" if prefix else local
            found.setdefault(name, m)
    return found


def assign(groups: tuple[ParamGroup, ...], model: Module) -> list[list[str]]:
    """The parameter names of each group, in model order: each parameter joins the first
    group that takes it. Raises ValueError naming the parameters no group takes."""
    if not groups:
        return [[n for n, _ in model.named_parameters()]]
    held = owners(model)
    members: list[list[str]] = [[] for _ in groups]
    orphans = []
    for name, p in model.named_parameters():
        for members_of, group in zip(members, groups, strict=True):
            if group.takes(len(p.shape), held[name]):
                members_of.append(name)
                break
        else:
            orphans.append(f"{name} (rank {len(p.shape)}, in {type(held[name]).__name__})")
    if orphans:
        rules = "; ".join(f"#{i}: {g.describe()}" for i, g in enumerate(groups))
        raise ValueError(
            f"param_groups: no group takes {', '.join(orphans)} (groups: {rules}); add a "
            "group whose rule takes them"
        )
    return members
