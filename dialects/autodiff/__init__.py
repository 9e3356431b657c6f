"""The autodiff dialect: reverse-mode differentiation and optimizer steps.

`autodiff.backward` marks where gradients are wanted; `aicfc-expand-backward`
replaces it by graph ops and the backward primitives of this dialect
(docs/design.md#composite-backward, docs/design.md#gradient-accumulation).
Optimizer updates are SSA functions (`param, grad, m, v, step -> param', m', v',
step'`); their alias policies let `aicfc-fold-inplace` turn them into in-place
updates where that is safe.

The ops live in small modules of this package: backward.py (autodiff.backward),
grads.py (softmax_grad, dropout_grad, epilogue_grad, gemm_epilogue_grad, embedding_grad,
layer_norm_grad, add_layer_norm_grad),
attention_grad.py (scaled_dot_product_attention_grad, packed_qkv_attention_grad),
loss_grads.py (the losses' gradients), optimizers.py (adam_step, sgd_step), amp.py
(unscale_grad, amp_select, update_scale: fp16 loss scaling), fused_step.py
(mlp_train_step: a whole MLP train step, formed by aicfc-fuse-train-step) and
training.py (lr_schedule, clip_grad_norm, accumulation_step, accumulate_grad). The
activations' gradient ops (autodiff.relu_grad, ...) are defined with their forward ops
and their row in dialects/graph/activations.py; this package re-exports them and lists them in its
`Dialect`, so a new activation adds no line here. `from aicfc.dialects import
autodiff` then `autodiff.AdamStepOp` reaches every op.

```mlir
%g:2 = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<16x8xf32>, tensor<16xf32>)
         -> (tensor<16x8xf32>, tensor<16xf32>)
%w1, %m1, %v1, %s1 = autodiff.adam_step %w, %g#0, %m, %v, %s lr(%lr) betas(%b1, %b2)
         eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one)
         : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>
```
"""

from __future__ import annotations

from xdsl.ir import Dialect

from aicfc.dialects.autodiff.amp import AmpSelectOp, UnscaleGradOp, UpdateScaleOp
from aicfc.dialects.autodiff.attention_grad import (
    PackedQKVAttentionGradOp,
    ScaledDotProductAttentionGradOp,
)
from aicfc.dialects.autodiff.backward import BackwardOp
from aicfc.dialects.autodiff.fused_step import MlpTrainStepOp
from aicfc.dialects.autodiff.grads import (
    AddLayerNormGradOp,
    DropoutGradOp,
    EmbeddingGradOp,
    EpilogueGradOp,
    GemmEpilogueGradOp,
    LayerNormGradOp,
    SoftmaxGradOp,
)
from aicfc.dialects.autodiff.loss_grads import (
    CrossEntropyGradOp,
    CrossEntropyWithGradOp,
    MseLossGradOp,
)
from aicfc.dialects.autodiff.optimizers import AdamStepOp, SgdStepOp
from aicfc.dialects.autodiff.training import (
    AccumulateGradOp,
    AccumulationStepOp,
    ClipGradNormOp,
    LrScheduleOp,
)
from aicfc.dialects.graph.activations import *  # noqa: F403 (the activations' gradient ops)
from aicfc.dialects.graph.activations import GRAD_OPS
from aicfc.dialects.graph.activations import __all__ as ACTIVATION_NAMES

__all__ = [
    "AccumulateGradOp",
    "AccumulationStepOp",
    "AdamStepOp",
    "AddLayerNormGradOp",
    "AmpSelectOp",
    "Autodiff",
    "BackwardOp",
    "ClipGradNormOp",
    "CrossEntropyGradOp",
    "CrossEntropyWithGradOp",
    "DropoutGradOp",
    "EmbeddingGradOp",
    "EpilogueGradOp",
    "GemmEpilogueGradOp",
    "LayerNormGradOp",
    "LrScheduleOp",
    "MlpTrainStepOp",
    "MseLossGradOp",
    "PackedQKVAttentionGradOp",
    "ScaledDotProductAttentionGradOp",
    "SgdStepOp",
    "SoftmaxGradOp",
    "UnscaleGradOp",
    "UpdateScaleOp",
    *ACTIVATION_NAMES,
]

Autodiff = Dialect(
    "autodiff",
    [
        BackwardOp,
        *GRAD_OPS,
        SoftmaxGradOp,
        CrossEntropyGradOp,
        CrossEntropyWithGradOp,
        MseLossGradOp,
        DropoutGradOp,
        EpilogueGradOp,
        GemmEpilogueGradOp,
        EmbeddingGradOp,
        LayerNormGradOp,
        AddLayerNormGradOp,
        ScaledDotProductAttentionGradOp,
        PackedQKVAttentionGradOp,
        AdamStepOp,
        SgdStepOp,
        UnscaleGradOp,
        AmpSelectOp,
        UpdateScaleOp,
        MlpTrainStepOp,
        LrScheduleOp,
        ClipGradNormOp,
        AccumulationStepOp,
        AccumulateGradOp,
    ],
    [],
)
