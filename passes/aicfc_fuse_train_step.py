"""aicfc-fuse-train-step: a whole MLP train step becomes one autodiff.mlp_train_step.

After expansion, fusion and canonicalization, the train step of an MLP with softmax
cross-entropy and Adam is a fixed set of ops (docs/design.md#fused-mlp-train-step):

    h_l = gemm_epilogue(h_{l-1}, W_l, b_l) act_l      (l = 1 .. L, h_0 = x, act_L none)
    loss, dz_L, db_L = cross_entropy_with_grad(h_L, y, dloss)
    dW_l = matmul(dz_l, h_{l-1}) transpose_a
    dz_{l-1}, db_{l-1} = gemm_epilogue_grad(dz_l, W_l, saved_{l-1}) act_{l-1}
    W_l', ... = adam_step(W_l, dW_l, ...); b_l', ... = adam_step(b_l, db_l, ...)
  -> loss, W_1', ..., b_L', ... = mlp_train_step(x, y, dloss, hyperparameters, W_1, ...)

One kernel then runs the step (kernels/mlp_fused.cu: a persistent kernel with a grid
barrier between the dependent phases), where the target's dozen dependent launches
cost about 2.4 us each. The pass asks the kernel selector (runtime/selector.py) for a
kernel of `backend`'s family for the fused op: it fuses only where one takes it and,
unless `force`, where that kernel is not the NumPy reference (on NumPy the fused op
computes the same ops in the same order, so it wins nothing: `force=true` is for
testing the fused program against the unfused one there). The CUDA kernel's
constraints (runtime/registry_cuda.py) are the rule of where it wins: batch and layer
widths at most 256.

Left alone (the ops are not this set, or a value leaves it): dropout, MSE, SGD, a
Linear layer without a bias (its product is a plain matmul, its backward no epilogue),
a hidden layer without an activation or whose activation no gemm_epilogue applies,
gradient clipping or accumulation (their ops read the gradients), gradients kept as
outputs, differing hyperparameters or decoupling between the updates (param groups),
and a data-parallel step (passes/pipelines.py leaves the pass out there).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.dialects.activation_table import FACTS, Saved
from aicfc.dialects.autodiff.fused_step import MlpTrainStepOp
from aicfc.dialects.roles import arg_role, functions
from aicfc.dialects.tensors import shape_of
from aicfc.passes.aicfc_lower_exec import problem_of
from aicfc.runtime import backend_names
from aicfc.runtime.selector import NoKernelError, select

MAX_LAYERS = 8
"""The most layers one fused op takes (the CUDA kernel's table: kMaxLayers)."""


def _params(op: Operation) -> dict[str, object]:
    return op.kernel_params()  # type: ignore[attr-defined, no-any-return]


def _only_use(value: SSAValue) -> Operation | None:
    uses = list(value.uses)
    return uses[0].operation if len(uses) == 1 else None


def _is_arg(value: SSAValue, role: str) -> bool:
    return isinstance(value, BlockArgument) and arg_role(value) == role


@dataclass
class _Match:
    """The ops of one train step and the fused op's operands."""

    ops: list[Operation]
    head: list[SSAValue]
    layers: list[list[SSAValue]]
    updates: list[list[ad.AdamStepOp]]
    loss: SSAValue
    acts: list[str]
    decoupled: bool


def _forward_chain(ce: ad.CrossEntropyWithGradOp) -> list[g.GemmEpilogueOp] | None:
    """The gemm_epilogue layers from x to the logits, first layer first."""
    chain: list[g.GemmEpilogueOp] = []
    v = ce.logits
    while len(chain) <= MAX_LAYERS:
        op = v.owner
        if not isinstance(op, g.GemmEpilogueOp):
            return None
        p = _params(op)
        if p.get("transpose_a") or not p.get("transpose_b") or len(shape_of(op.lhs.type)) != 2:
            return None
        chain.insert(0, op)
        if _is_arg(op.lhs, "input"):
            return chain
        v = op.lhs
    return None


def _adam(grad: SSAValue, param: SSAValue) -> ad.AdamStepOp | None:
    """The one adam_step that updates `param` (a param argument) with `grad`."""
    user = _only_use(grad)
    if isinstance(user, ad.AdamStepOp) and user.grad is grad and user.param is param:
        return user if _is_arg(param, "param") else None
    return None


def match(ce: ad.CrossEntropyWithGradOp) -> _Match | None:
    """The train step ending in `ce`, or None where any piece differs (module docstring)."""
    chain = _forward_chain(ce)
    if chain is None:
        return None
    acts = [str(_params(op).get("act", "none")) for op in chain]
    if acts[-1] != "none" or "none" in acts[:-1]:
        return None
    inputs = [chain[0].lhs, *(op.result for op in chain[:-1])]
    ops: list[Operation] = [*chain, ce]
    updates: list[list[ad.AdamStepOp]] = []
    dz, db = ce.grad_logits, ce.grad_bias
    for li in range(len(chain) - 1, -1, -1):
        layer = chain[li]
        dw_op = next((u.operation for u in dz.uses if isinstance(u.operation, g.MatmulOp)), None)
        if dw_op is None or dw_op.lhs is not dz or dw_op.rhs is not inputs[li]:
            return None
        p = _params(dw_op)
        if not p.get("transpose_a") or p.get("transpose_b"):
            return None
        w_update = _adam(dw_op.result, layer.rhs)
        if w_update is None:
            return None
        layer_updates = [w_update]
        if layer.bias is not None:
            b_update = _adam(db, layer.bias) if db is not None else None
            if b_update is None:
                return None
            layer_updates.append(b_update)
        ops += [dw_op, *layer_updates]
        updates.insert(0, layer_updates)
        if li:
            grad_op = next(
                (u.operation for u in dz.uses if isinstance(u.operation, ad.GemmEpilogueGradOp)),
                None,
            )
            if grad_op is None or grad_op.lhs is not dz or grad_op.rhs is not layer.rhs:
                return None
            gp = _params(grad_op)
            if gp.get("transpose_a") or gp.get("transpose_b") or gp.get("act") != acts[li - 1]:
                return None
            below = chain[li - 1]
            saves_input = FACTS[acts[li - 1]].saves == Saved.INPUT
            if grad_op.saved is not (below.pre_act if saves_input else below.result):
                return None
            ops.append(grad_op)
            dz, db = grad_op.grad_pre_act, grad_op.grad_bias
    return _checked(ce, chain, ops, updates, acts)


def _checked(
    ce: ad.CrossEntropyWithGradOp,
    chain: list[g.GemmEpilogueOp],
    ops: list[Operation],
    updates: list[list[ad.AdamStepOp]],
    acts: list[str],
) -> _Match | None:
    """The match where every value but the loss and the updates' results stays inside it
    and every update shares the first one's hyperparameters."""
    inside = {id(op) for op in ops}
    flat = [u for layer in updates for u in layer]
    exported = {id(r) for u in flat for r in u.results} | {id(ce.loss)}
    for op in ops:
        for r in op.results:
            if id(r) not in exported and any(id(use.operation) not in inside for use in r.uses):
                return None
    first = flat[0]
    hyper = list(first.operands[5:12])
    decoupled = bool(_params(first).get("decoupled_weight_decay"))
    for u in flat:
        if list(u.operands[5:12]) != hyper:
            return None
        if bool(_params(u).get("decoupled_weight_decay")) != decoupled:
            return None
        if any(v.owner is not None and id(v.owner) in inside for v in u.operands[2:5]):
            return None
    head = [chain[0].lhs, ce.labels, ce.grad, *hyper]
    layers = [[v for u in layer for v in (u.param, *u.operands[2:5])] for layer in updates]
    return _Match(ops, head, layers, updates, ce.loss, acts, decoupled)


def _position(op: Operation) -> int:
    block = op.parent_block()
    assert block is not None
    return list(block.ops).index(op)


def rewrite(m: _Match) -> MlpTrainStepOp | None:
    """Replace the match by one fused op after its last op; None (nothing changed) where a
    user of the loss or of an update comes before that point."""
    last = max(m.ops, key=_position)
    at = _position(last)
    flat = [u for layer in m.updates for u in layer]
    exported = [m.loss, *(r for u in flat for r in u.results)]
    inside = {id(op) for op in m.ops}
    for r in exported:
        for use in r.uses:
            if id(use.operation) not in inside and _position(use.operation) < at:
                return None
    fused = MlpTrainStepOp(m.head, m.layers, m.acts, m.decoupled)
    block = last.parent_block()
    assert block is not None
    block.insert_op_after(fused, last)
    fused.outputs[0].name_hint = m.loss.name_hint
    m.loss.replace_all_uses_with(fused.outputs[0])
    k = 1
    for u in flat:
        for r in u.results:
            fused.outputs[k].name_hint = r.name_hint
            r.replace_all_uses_with(fused.outputs[k])
            k += 1
    for op in sorted(m.ops, key=_position, reverse=True):
        block.erase_op(op)
    return fused


def fuse_function(fn: Operation, family: str, force: bool) -> int:
    """Fuse every train step of `fn` that a kernel of `family` runs; returns how many."""
    done = 0
    for ce in [op for op in fn.walk() if isinstance(op, ad.CrossEntropyWithGradOp)]:
        m = match(ce)
        if m is None:
            continue
        probe = MlpTrainStepOp(m.head, m.layers, m.acts, m.decoupled)
        try:
            chosen = select(problem_of(probe), family)
        except NoKernelError:
            continue
        finally:
            probe.erase(safe_erase=False)
        if "reference" in chosen.spec.flags and not force:
            continue
        if rewrite(m) is not None:
            done += 1
    return done


@dataclass(frozen=True)
class AicfcFuseTrainStepPass(ModulePass):
    """Fuse an MLP train step into one autodiff.mlp_train_step where a kernel of `backend`'s
    family takes it (and is not the NumPy reference, unless `force`)."""

    name = "aicfc-fuse-train-step"

    backend: str = "numpy"
    force: bool = False

    def __post_init__(self) -> None:
        try:
            backend_names.kernel_family(self.backend)
        except backend_names.UnknownBackendError as e:
            raise ValueError(f"aicfc-fuse-train-step: {e}") from None

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        family = backend_names.kernel_family(self.backend)
        for fn in functions(op):
            fuse_function(fn, family, self.force)
