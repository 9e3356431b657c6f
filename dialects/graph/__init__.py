"""The graph dialect: forward tensor ops with value semantics.

Every op carries an `OpInfo` trait with its static 64-bit flag mask
(docs/design.md#op-flags) and the analysis methods of `AicfcOp`
(docs/design.md#operator-analysis). Elementwise binary
ops take operands of one type; broadcasting is explicit (`graph.broadcast_to`,
`graph.bias_add`), as in StableHLO. Matrix products take [..., M, K] operands whose
batch dims broadcast (torch.matmul); gemm_epilogue's weight is a matrix.

The ops live in small modules of this package (attributes, base, matrix,
cast, elementwise, activations, layout, reductions, embedding, normalization, attention);
this module re-exports every
public name, so `from aicfc.dialects.graph import MatmulOp` works, and defines
the `Graph` dialect object. The activations (activations.py) come as rows of
`ACTIVATIONS`: their ops are re-exported and listed in `Graph` from there, so a
new activation adds no line here.

```mlir
%h = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
       : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<64x128xf32>
%l = graph.cross_entropy %logits, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
```
"""

from __future__ import annotations

from xdsl.ir import Dialect

from aicfc.dialects.graph.activations import *  # noqa: F403 (the activations' ops and rows)
from aicfc.dialects.graph.activations import FORWARD_OPS
from aicfc.dialects.graph.activations import __all__ as ACTIVATION_NAMES
from aicfc.dialects.graph.attention import (
    AttentionBase,
    CausalMaskOp,
    PackedQKVAttentionOp,
    ScaledDotProductAttentionOp,
)
from aicfc.dialects.graph.attributes import ActivationAttr
from aicfc.dialects.graph.base import BinaryElementwiseOp, GraphOp, UnaryElementwiseOp
from aicfc.dialects.graph.cast import CastOp
from aicfc.dialects.graph.elementwise import AddOp, BiasAddOp, DropoutOp, MulOp, ScaleOp, SubOp
from aicfc.dialects.graph.embedding import EmbeddingOp
from aicfc.dialects.graph.layout import (
    BroadcastToOp,
    ConcatOp,
    ReshapeOp,
    SplitOp,
    TargetShapeOp,
    TransposeOp,
)
from aicfc.dialects.graph.matrix import ConstantOp, GemmEpilogueOp, MatmulOp, MatrixProductOp
from aicfc.dialects.graph.normalization import AddLayerNormOp, LayerNormBase, LayerNormOp
from aicfc.dialects.graph.reductions import CrossEntropyOp, MseLossOp, ReduceSumOp, SoftmaxOp

__all__ = [
    "ActivationAttr",
    "AddLayerNormOp",
    "AddOp",
    "AttentionBase",
    "BiasAddOp",
    "BinaryElementwiseOp",
    "BroadcastToOp",
    "CastOp",
    "CausalMaskOp",
    "ConcatOp",
    "ConstantOp",
    "CrossEntropyOp",
    "DropoutOp",
    "EmbeddingOp",
    "GemmEpilogueOp",
    "Graph",
    "GraphOp",
    "LayerNormBase",
    "LayerNormOp",
    "MatmulOp",
    "MatrixProductOp",
    "MseLossOp",
    "MulOp",
    "PackedQKVAttentionOp",
    "ReduceSumOp",
    "ReshapeOp",
    "ScaleOp",
    "ScaledDotProductAttentionOp",
    "SoftmaxOp",
    "SplitOp",
    "SubOp",
    "TargetShapeOp",
    "TransposeOp",
    "UnaryElementwiseOp",
    *ACTIVATION_NAMES,
]

Graph = Dialect(
    "graph",
    [
        ConstantOp,
        MatmulOp,
        GemmEpilogueOp,
        BiasAddOp,
        AddOp,
        SubOp,
        MulOp,
        ScaleOp,
        CastOp,
        *FORWARD_OPS,
        DropoutOp,
        ReshapeOp,
        TransposeOp,
        BroadcastToOp,
        SplitOp,
        ConcatOp,
        SoftmaxOp,
        ReduceSumOp,
        CrossEntropyOp,
        MseLossOp,
        EmbeddingOp,
        LayerNormOp,
        AddLayerNormOp,
        CausalMaskOp,
        ScaledDotProductAttentionOp,
        PackedQKVAttentionOp,
    ],
    [ActivationAttr],
)
