"""The NumPy `out=` kernels of the registry, as plain data (joined by runtime/registry.py).

Beside each op's reference kernel ("numpy.<op>", which runs its op's reference function and copies
its fresh result into the output buffers), the ops of a training step have a kernel
"numpy.<op>_out" that writes into its output buffers directly with NumPy's `out=`
arguments (named after them, and after ATen's `.out` overloads): products into
their planned destination through BLAS, epilogues, activation gradients and
optimizer updates in place, reductions and losses into preallocated results. No
step allocates an array. Each names its launcher, "<module>:<function>" of
runtime/numpy/kernels/<module>.py (one module per kernel family: gemm,
elementwise, reduce, norm, attention, loss, optim, layout, embedding), the
function that binds a launch to its arrays once, at load. Activations come from the
activation table (dialects/activation_table.py): each row's op and gradient op get an
`_out` kernel, the epilogue ones are the GEMM epilogue's, so a new row needs its two
functions in runtime/numpy/kernels/elementwise.py (`ACTIVATIONS`, `ACTIVATION_GRADS`).

They compute what the reference computes, in its order of operations, so their
results are bitwise the reference's (test/python/runtime/test_numpy_kernels.py);
the selector prefers them by `priority`. They take float32 and float64 (and the
integer dtypes where NumPy's integer arithmetic is the reference's); float16,
attention with dropout and the ops without a row here (dropout, softmax, scale,
causal_mask and their gradients, and the training loop's ops: lr_schedule and
accumulation_step on scalars, clip_grad_norm and accumulate_grad) run the
reference kernel. The optimizer kernels read their hyperparameters, gradient
scale and apply flag from their operands at every step.
"""

from __future__ import annotations

from aicfc.dialects.activation_table import ACTIVATION_FACTS, EPILOGUE_ACTIVATIONS
from aicfc.runtime.registry import Constraints, KernelSpec

PRIORITY = 10
"""Above the reference kernels' 0: where an `_out` kernel accepts a launch, it runs it."""

_FLOATS = ("f32", "f64")
_NUMBERS = ("f32", "f64", "i32", "i64")
_LABELS = Constraints(operand_dtypes=((1, ("i32", "i64")),))
_IDS = Constraints(operand_dtypes=((0, ("i32", "i64")),))
_NO = Constraints()


def _out(
    op: str, launcher: str, dtypes: tuple[str, ...] = _FLOATS, constraints: Constraints = _NO
) -> KernelSpec:
    return KernelSpec(
        name=f"numpy.{op.split('.', 1)[1]}_out",
        op=op,
        family="numpy",
        dtypes=dtypes,
        constraints=constraints,
        flags=frozenset({"inplace_ok"}),
        launcher=launcher,
        priority=PRIORITY,
    )


KERNELS: tuple[KernelSpec, ...] = (
    # gemm: BLAS into the destination, then the epilogue in place
    _out("graph.matmul", "gemm:matmul"),
    _out(
        "graph.gemm_epilogue",
        "gemm:gemm_epilogue",
        constraints=Constraints(activations=("none", *EPILOGUE_ACTIVATIONS)),
    ),
    _out(
        "autodiff.gemm_epilogue_grad",
        "gemm:gemm_epilogue_grad",
        constraints=Constraints(activations=EPILOGUE_ACTIVATIONS),
    ),
    # elementwise: every activation of the activation table and its gradient
    _out("graph.bias_add", "elementwise:bias_add"),
    _out("graph.add", "elementwise:add", _NUMBERS),
    _out("graph.sub", "elementwise:sub", _NUMBERS),
    _out("graph.mul", "elementwise:mul", _NUMBERS),
    *(_out(f.op, f"elementwise:{f.name}") for f in ACTIVATION_FACTS),
    *(_out(f.grad_op, f"elementwise:{f.name}_grad") for f in ACTIVATION_FACTS),
    _out(
        "autodiff.epilogue_grad",
        "elementwise:epilogue_grad",
        constraints=Constraints(activations=EPILOGUE_ACTIVATIONS),
    ),
    # reduce
    _out("graph.reduce_sum", "reduce:reduce_sum", _NUMBERS),
    # norm: the statistics into their outputs, the terms in work arrays
    _out("graph.layer_norm", "norm:layer_norm"),
    _out("graph.add_layer_norm", "norm:add_layer_norm"),
    _out("autodiff.layer_norm_grad", "norm:layer_norm_grad"),
    _out("autodiff.add_layer_norm_grad", "norm:add_layer_norm_grad"),
    # attention without dropout: the scores and probabilities in work arrays
    _out("graph.scaled_dot_product_attention", "attention:scaled_dot_product_attention"),
    _out(
        "autodiff.scaled_dot_product_attention_grad",
        "attention:scaled_dot_product_attention_grad",
    ),
    _out("graph.packed_qkv_attention", "attention:packed_qkv_attention"),
    _out("autodiff.packed_qkv_attention_grad", "attention:packed_qkv_attention_grad"),
    # loss
    _out("graph.cross_entropy", "loss:cross_entropy", constraints=_LABELS),
    _out("autodiff.cross_entropy_grad", "loss:cross_entropy_grad", constraints=_LABELS),
    _out("autodiff.cross_entropy_with_grad", "loss:cross_entropy_with_grad", constraints=_LABELS),
    _out("graph.mse_loss", "loss:mse_loss"),
    _out("autodiff.mse_loss_grad", "loss:mse_loss_grad"),
    # optim
    _out("autodiff.adam_step", "optim:adam_step"),
    _out("autodiff.sgd_step", "optim:sgd_step"),
    # layout: one copy from a view made at load
    _out("graph.reshape", "layout:reshape", _NUMBERS),
    _out("graph.transpose", "layout:transpose", _NUMBERS),
    _out("graph.broadcast_to", "layout:broadcast_to", _NUMBERS),
    _out("graph.split", "layout:split", _NUMBERS),
    _out("graph.concat", "layout:concat", _NUMBERS),
    # embedding: a gather into the result, the gradient's scatter-add in index order
    _out("graph.embedding", "embedding:embedding", constraints=_IDS),
    _out("autodiff.embedding_grad", "embedding:embedding_grad", constraints=_LABELS),
)
