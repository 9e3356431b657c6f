"""aicfc-fold-weight-casts: the optimizer writes each weight's low-precision copy.

Under aicfc-autocast every step starts by casting each fp32 master weight to the low
dtype its products read (`graph.cast %w : f32 to bf16`): a launch per parameter that
reads 4 and writes 2 bytes per weight. The cast of step N+1 reads exactly what the
update of step N wrote, so the update can write the copy itself, next to the fp32
value it has in registers, and the cast disappears:

    %wl = graph.cast %w : f32 -> bf16; ...%wl...;  %w1, ... = adam_step %w, ...
      -> ...%w_bf16...;  %w1, ..., %wl1 = adam_step %w, ... low_copy(%w_bf16)

- the copy is a state argument `<param>.<dtype>` ("0.weight.bf16", `copy_name`) of
  the step and its next value a result of that name, like Adam's moments; it is
  derived state: the Program fills it from the masters when it loads a step or a
  state dict and never saves it (docs/design.md#the-optimizer-writes-the-low-precision-weights);
- the update rounds param' to nearest even, as graph.cast does, so the step computes
  bit for bit what it computed with the casts; with apply = 0 (a micro-batch inside an
  accumulation window) the copy stays as it is, like the master;
- every reader of the cast (the forward product, the backward's dX product) reads the
  copy argument instead; the gradient is untouched (the pass runs after
  aicfc-expand-backward, where the cast's VJP has already been built).

A param is folded when its only low-precision casts are to one dtype, an update op of
`LOW_COPY_UPDATES` (keyed by class: adam_step) reads it as its param, and the step's
next value of the param is that update's new param itself. Otherwise it is left as it
was: SGD (no low-copy operand yet), and fp16 loss scaling, whose next value is an
autodiff.amp_select of the update and the old param (folding there needs the select on
the copy too, or the found-inf flag in the update's apply). Functions without updates
(@predict) keep their casts and so read the current masters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    FunctionType,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import autodiff as ad
from aicfc.dialects.diagnostics import copy_location
from aicfc.dialects.graph import CastOp
from aicfc.dialects.roles import arg_name, arg_role, functions, make_attrs, result_names

COPY_SUFFIX: dict[Attribute, str] = {BFloat16Type(): "bf16", Float16Type(): "f16"}
"""The low dtypes a copy can have, and the suffix of its state name."""


def copy_name(param: str, dtype: Attribute) -> str:
    """The state name of `param`'s copy in `dtype` ("0.weight" -> "0.weight.bf16")."""
    return f"{param}.{COPY_SUFFIX[dtype]}"


def copy_source(name: str) -> str | None:
    """The param a state named `name` is the low-precision copy of ("0.weight.bf16" ->
    "0.weight"), else None; a tool that starts a step's state fills such a state with its
    param cast to the copy's dtype."""
    param, dot, suffix = name.rpartition(".")
    return param if dot and param and suffix in COPY_SUFFIX.values() else None


def _with_copy_adam(op: Operation, copy: SSAValue) -> Operation:
    assert isinstance(op, ad.AdamStepOp)
    hyper = {n: getattr(op, n) for n in op.HYPERPARAMETERS}
    return ad.AdamStepOp(
        op.param,
        op.grad,
        op.exp_avg,
        op.exp_avg_sq,
        op.step,
        hyper,
        op.grad_scale,
        op.apply,
        decoupled_weight_decay=op.decoupled_weight_decay is not None,
        low_copy=copy,
    )


LOW_COPY_UPDATES: dict[type[Operation], Callable[[Operation, SSAValue], Operation]] = {
    ad.AdamStepOp: _with_copy_adam,
}
"""Update op class -> a copy of the op that also writes `copy`'s next value as its last
result (the param is operand 0 and its next value result 0)."""


def _low_casts(param: SSAValue, block: Block) -> list[CastOp]:
    """The casts of `param` in `block` to a dtype of COPY_SUFFIX."""
    return [
        u.operation
        for u in param.uses
        if isinstance(u.operation, CastOp)
        and u.operation.parent is block
        and isinstance(u.operation.result.type, TensorType)
        and u.operation.result.type.element_type in COPY_SUFFIX
    ]


def _add_arg(fn: func.FuncOp, t: Attribute, attrs: DictionaryAttr) -> BlockArgument:
    block = fn.body.blocks.first
    assert block is not None
    old = (
        list(fn.arg_attrs.data)
        if fn.arg_attrs is not None
        else [DictionaryAttr({})] * len(block.args)
    )
    arg = block.insert_arg(t, len(block.args))
    fn.arg_attrs = ArrayAttr([*old, attrs])
    return arg


def fold_function(fn: func.FuncOp) -> int:
    """Fold the weight casts of one train step (module docstring); returns how many."""
    block = fn.body.blocks.first
    assert block is not None
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        return 0
    names = result_names(fn)
    next_of = {n: v for n, v in zip(names, ret.arguments, strict=True) if n is not None}
    taken = {arg_name(a) for a in block.args}
    added: list[tuple[str, SSAValue]] = []
    for p in list(block.args):
        name = arg_name(p)
        t = p.type
        if arg_role(p) != "param" or name is None or not isinstance(t, TensorType):
            continue
        casts = _low_casts(p, block)
        dtypes = {c.result.type for c in casts}
        if t.element_type != f32 or len(dtypes) != 1:
            continue
        update = next_of.get(name)
        owner = update.owner if update is not None else None
        if not isinstance(owner, Operation):
            continue
        build = LOW_COPY_UPDATES.get(type(owner))
        if build is None or owner.operands[0] is not p or owner.results[0] is not update:
            continue  # not updated by an op that can write a copy (SGD, fp16's amp_select)
        (low,) = dtypes
        assert isinstance(low, TensorType)
        cname = copy_name(name, low.element_type)
        if cname in taken:
            continue
        copy = _add_arg(fn, low, make_attrs("state", cname))
        copy.name_hint = f"{p.name_hint or 'w'}_{COPY_SUFFIX[low.element_type]}"
        for c in casts:
            c.result.replace_all_uses_with(copy)
            block.erase_op(c)
        new = build(owner, copy)
        copy_location(owner, new)
        block.insert_op_after(new, owner)
        for old, res in zip(owner.results, new.results, strict=False):
            res.name_hint = old.name_hint
            old.replace_all_uses_with(res)
        block.erase_op(owner)
        new.results[-1].name_hint = copy.name_hint
        added.append((cname, new.results[-1]))
    if not added:
        return 0
    values = [*ret.arguments, *(v for _, v in added)]
    res_attrs = (
        list(fn.res_attrs.data)
        if fn.res_attrs is not None
        else [DictionaryAttr({}) for _ in ret.arguments]
    )
    new_ret = func.ReturnOp(*values)
    copy_location(ret, new_ret)
    block.insert_op_before(new_ret, ret)
    block.erase_op(ret)
    fn.res_attrs = ArrayAttr([*res_attrs, *(make_attrs(name=n) for n, _ in added)])
    fn.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in values]
    )
    return len(added)


@dataclass(frozen=True)
class AicfcFoldWeightCastsPass(ModulePass):
    """The optimizer writes the low-precision copy of each weight (module docstring; no
    options)."""

    name = "aicfc-fold-weight-casts"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in functions(op):
            fold_function(fn)
