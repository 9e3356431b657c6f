"""aicfc-fold-inplace: apply alias policies where liveness proves in-place execution safe.

An `exec.launch` carrying `alias = "<policy>"` may write output o into input i
for each (o, i) pair of the policy (dialects/flags.py ALIAS_POLICIES;
docs/design.md#in-place-folding). Folding replaces every use of o by i and drops o's
`exec.alloc`:

    launch K(%i, ...) outs(%o) alias = "out0_in0"; ...uses of %o...
      -> launch K(%i, ...) outs(%i);              ...uses of %i...
    exec.copy %i -> %i  -> (erased)

The launches of `exec.graph` run in order, so liveness is positional. A pair
is folded only when all of these hold (the first failing one is the remark):

- o is a tmp `exec.alloc` written only by this launch and used only after it;
- i and o have the same shape and dtype;
- i is not a const buffer and not an external input (inputs are read-only);
- i is not a tmp already placed by aicfc-plan-memory (folding extends i's
  lifetime to o's, which its offset was not planned for);
- i appears exactly once among the launch's operands (the same buffer fed
  twice, e.g. grad and param being one value, could alias mid-kernel);
- no later op reads or writes i and no exec.output reads it, except the
  copy-back `exec.copy o -> i` of an external's next value (a gradient, or an
  activation the backward still reads, is therefore never clobbered);
- a param or state i is a destination only through that copy-back, so
  externals keep their identity: a parameter is only overwritten by its own
  next value.

adam_step's policy never names the grad (input 1) as a destination. With
`enable=false` the pass does nothing (for debugging); with `remarks=true`
every refused pair prints `file:line:col: remark: ...` saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import exec as ex
from aicfc.dialects.diagnostics import remark
from aicfc.dialects.flags import ALIAS_POLICIES

# ----------------------------------------------------------------------------
# Descriptions for remarks
# ----------------------------------------------------------------------------


def describe_value(v: SSAValue) -> str:
    """`"fc1.weight"` for an external, `%h` for a named tmp, else its role."""
    owner = v.owner
    if isinstance(owner, ex.BufferOp):
        return f'"{owner.buffer_name.data}"'
    if v.name_hint:
        return f"%{v.name_hint}"
    return f"a {ex.buffer_type(v).buffer_role.value} buffer"


def describe_op(op: Operation) -> str:
    if isinstance(op, ex.LaunchOp):
        return f'exec.launch "{op.kernel_name}"'
    if isinstance(op, ex.OutputOp):
        return f'exec.output "{op.buffer_name.data}"'
    return op.name


def _writes(op: Operation, v: SSAValue) -> bool:
    if isinstance(op, ex.LaunchOp):
        return any(o is v for o in op.outputs)
    if isinstance(op, ex.AllReduceOp):  # reduces its tensors in place through its bucket
        return v is op.bucket or any(t is v for t in op.tensors)
    return isinstance(op, ex.CopyOp) and op.dest is v


# ----------------------------------------------------------------------------
# The safety check: o -> i of `launch`, over the linear op order `pos`
# ----------------------------------------------------------------------------


def fold_refusal(launch: ex.LaunchOp, o: SSAValue, i: SSAValue, pos: dict[int, int]) -> str | None:
    """Why output `o` of `launch` may not be written into its input `i`; None if it may."""
    here = pos[id(launch)]
    out, inp = f"output {describe_value(o)}", f"input {describe_value(i)}"
    if not isinstance(o.owner, ex.AllocOp):
        return f"{out} is not a tmp buffer"
    for use in o.uses:
        user = use.operation
        if user is launch:
            if any(v is o for v in launch.inputs):
                return f"{out} is also an input of the launch"
            continue
        if _writes(user, o):
            return f"{out} is also written by {describe_op(user)}"
        if id(user) in pos and pos[id(user)] < here:
            return f"{out} is read before the launch by {describe_op(user)}"
    to, ti = ex.buffer_type(o), ex.buffer_type(i)
    if not to.same_layout(ti):
        return f"{inp} has type {ti} but {out} has {to}: shape or dtype differ"
    role = ti.buffer_role
    if role == ex.BufferRole.CONST:
        return f"{inp} is a const buffer"
    if role == ex.BufferRole.INPUT:
        return f"{inp} is an external input (read-only; externals keep their identity)"
    if isinstance(i.owner, ex.AllocOp) and i.owner.offset is not None:
        return (
            f"{inp} already has an arena offset, planned for its own lifetime, which the "
            "fold would extend (run aicfc-fold-inplace before aicfc-plan-memory)"
        )
    count = sum(1 for v in launch.operands if v is i)
    if count != 1:
        return f"{inp} is passed to the launch {count} times"
    copied_back = False
    for use in i.uses:
        user = use.operation
        if user is launch or (id(user) in pos and pos[id(user)] < here):
            continue
        if isinstance(user, ex.CopyOp) and user.source is o and user.dest is i:
            copied_back = True
            continue
        verb = "written" if _writes(user, i) else "read"
        return f"{inp} is {verb} later by {describe_op(user)}"
    if role in (ex.BufferRole.PARAM, ex.BufferRole.STATE) and not copied_back:
        return (
            f"{inp} is the {role.value} buffer and {out} is not its next value "
            "(externals keep their identity)"
        )
    return None


def _erase(op: Operation) -> None:
    block = op.parent_block()
    assert block is not None
    block.erase_op(op)


def fold(o: SSAValue, i: SSAValue) -> None:
    """Replace every use of o by i, drop o's alloc and the copies that became no-ops."""
    alloc = o.owner
    assert isinstance(alloc, ex.AllocOp)
    o.replace_all_uses_with(i)
    _erase(alloc)
    no_ops = {id(u.operation): u.operation for u in i.uses}  # a copy i -> i uses i twice
    for user in no_ops.values():
        if isinstance(user, ex.CopyOp) and user.source is user.dest:
            _erase(user)


def fold_program(program: ex.ProgramOp, remarks: bool = False) -> int:
    """Fold every safe alias pair of `program`; returns how many were folded."""
    ops = ex.launches(program)
    pos = {id(op): k for k, op in enumerate(ops)}
    folded = 0
    for launch in ops:
        if not isinstance(launch, ex.LaunchOp) or launch.alias is None:
            continue
        policy = ALIAS_POLICIES[launch.alias.data]
        for o_idx, i_idx in policy.pairs:
            if o_idx >= len(launch.outputs) or i_idx >= len(launch.inputs):
                continue  # an optional operand or result the op instance does not have
            o, i = launch.outputs[o_idx], launch.inputs[i_idx]
            if o is i:
                continue
            why = fold_refusal(launch, o, i, pos)
            if why is None:
                fold(o, i)
                folded += 1
            elif remarks:
                remark(launch, f"alias {policy.name} out{o_idx} -> in{i_idx} refused: {why}")
    return folded


@dataclass(frozen=True)
class AicfcFoldInplacePass(ModulePass):
    """Apply alias policies where safe. enable=false: do nothing; remarks=true: say why not."""

    name = "aicfc-fold-inplace"

    enable: bool = True
    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.enable:
            return
        for program in ex.programs(op):
            fold_program(program, self.remarks)
