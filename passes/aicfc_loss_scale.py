"""aicfc-loss-scale: dynamic loss scaling (fp16 training) as ops of the step.

fp16 has 5 exponent bits: gradients below 2^-24 flush to zero. torch.amp.GradScaler
multiplies the loss by a scale before the backward, unscales the gradients before the
optimizer, skips the optimizer step when a gradient overflowed and adapts the scale.
This pass writes the same into a train step, so it all runs on the device inside the
captured graph, with no host sync:

- two state arguments, `amp.scale` and `amp.growth_tracker` (scalar f32; the Program
  starts them at 2^16 and 0), and their next values as results of the same names;
- every `autodiff.backward` is seeded with the scale (times its own seed, if any);
- each of its gradients g becomes `autodiff.unscale_grad g, scale` (g / scale and a
  found-inf flag); the flags are summed into one found_inf;
- each param or state result that depends on a gradient (the optimizer's updates)
  becomes `autodiff.amp_select found_inf, new, old`: an overflowing step leaves params
  and optimizer state bit-identical (values that do not depend on the gradients, such
  as dropout's RNG offset, advance as usual);
- `autodiff.update_scale` (GradScaler's update: back off 0.5 on an overflow, grow 2x
  after 2,000 good steps in a row) gives the next scale and tracker.

It runs before aicfc-expand-backward (the pipeline runs it after aicfc-autocast for
fp16). Functions without an autodiff.backward are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, TensorType, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.diagnostics import OpError, copy_location
from aicfc.dialects.roles import arg_name, arg_role, functions, make_attrs, result_names
from aicfc.dialects.tensors import is_float, tensor

SCALE = "amp.scale"
GROWTH_TRACKER = "amp.growth_tracker"
"""The names of the loss-scaling state (torch GradScaler's `scale` and `_growth_tracker`)."""
LOSS_SCALE_STATES = (SCALE, GROWTH_TRACKER)
"""fp16's own states: a checkpoint of another precision lacks or carries them, and loads
anyway (the scale starts at 2^16 where it is missing, as a new GradScaler's)."""

_SCALAR = tensor((), f32)


def _add_state(fn: func.FuncOp, name: str) -> SSAValue:
    block = fn.body.blocks.first
    assert block is not None
    arg = block.insert_arg(_SCALAR, len(block.args))
    attrs = (
        list(fn.arg_attrs.data)
        if fn.arg_attrs is not None
        else [DictionaryAttr({}) for _ in block.args[:-1]]
    )
    fn.arg_attrs = ArrayAttr([*attrs, make_attrs("state", name)])
    return arg


def _depends_on(v: SSAValue, sources: set[SSAValue], memo: dict[SSAValue, bool]) -> bool:
    stack, seen = [v], set()
    while stack:  # iterative: steps are long chains; `seen`: residual adds make a DAG
        x = stack.pop()
        if x in seen:
            continue
        if x in memo:
            if memo[x]:
                return True
            continue
        if x in sources:
            return True
        seen.add(x)
        owner = x.owner
        if isinstance(owner, Operation):
            stack.extend(owner.operands)
    for x in seen:
        memo[x] = False
    return False


def loss_scale_function(fn: func.FuncOp) -> None:
    """Apply dynamic loss scaling to one train step (see the module docstring)."""
    block = fn.body.blocks.first
    assert block is not None
    backwards = [op for op in block.ops if isinstance(op, ad.BackwardOp)]
    if not backwards:
        return
    names = {arg_name(a) for a in block.args}
    if SCALE in names or GROWTH_TRACKER in names:
        raise OpError(backwards[0], f"the step already has the loss-scaling state {SCALE}")
    scale, tracker = _add_state(fn, SCALE), _add_state(fn, GROWTH_TRACKER)
    scale.name_hint, tracker.name_hint = "amp_scale", "amp_growth_tracker"
    flags: list[SSAValue] = []
    grads: set[SSAValue] = set()
    for bw in backwards:
        if bw.loss.type != _SCALAR:
            raise OpError(bw, f"loss scaling needs a scalar tensor<f32> loss, got {bw.loss.type}")
        seed: SSAValue = scale
        if bw.seed is not None:
            mul = g.MulOp(bw.seed, scale)
            block.insert_op_before(mul, bw)
            seed = mul.result
        new = ad.BackwardOp(bw.loss, list(bw.wrt), seed)
        copy_location(bw, new)
        block.insert_op_after(new, bw)
        at: Operation = new
        for old, res in zip(bw.results, new.results, strict=True):
            res.name_hint = old.name_hint
            t = res.type
            if not (isinstance(t, TensorType) and is_float(t.element_type)):
                old.replace_all_uses_with(res)
                continue
            un = ad.UnscaleGradOp(res, scale)
            copy_location(bw, un)
            block.insert_op_after(un, at)
            at = un
            un.result.name_hint = old.name_hint
            old.replace_all_uses_with(un.result)
            flags.append(un.found_inf)
            grads.add(un.result)
        block.erase_op(bw)
    found = flags[0]
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    for other in flags[1:]:
        add = g.AddOp(found, other)
        block.insert_op_before(add, ret)
        found = add.result
    found.name_hint = "found_inf"
    stored = {arg_name(a): a for a in block.args if arg_role(a) in ("param", "state")}
    memo: dict[SSAValue, bool] = {}
    returned = list(ret.arguments)
    for i, name in enumerate(result_names(fn)):
        prev = stored.get(name)
        if prev is None or not _depends_on(returned[i], grads, memo):
            continue
        sel = ad.AmpSelectOp(found, returned[i], prev)
        block.insert_op_before(sel, ret)
        returned[i] = sel.result
    update = ad.UpdateScaleOp(scale, tracker, found)
    block.insert_op_before(update, ret)
    new_ret = func.ReturnOp(*returned, update.new_scale, update.new_growth_tracker)
    block.insert_op_before(new_ret, ret)
    block.erase_op(ret)
    res_attrs = (
        list(fn.res_attrs.data)
        if fn.res_attrs is not None
        else [DictionaryAttr({}) for _ in returned]
    )
    fn.res_attrs = ArrayAttr([*res_attrs, make_attrs(name=SCALE), make_attrs(name=GROWTH_TRACKER)])
    fn.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in new_ret.arguments]
    )


@dataclass(frozen=True)
class AicfcLossScalePass(ModulePass):
    """Dynamic loss scaling in every train step (see the module docstring; no options)."""

    name = "aicfc-loss-scale"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in functions(op):
            loss_scale_function(fn)
