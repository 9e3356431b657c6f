"""The graph dialect: forward tensor ops with value semantics.

Every op carries an `OpInfo` trait with its static 64-bit flag mask
(docs/design.md#op-flags) and the analysis methods of `AicfcOp`
(docs/design.md#operator-analysis). Elementwise binary
ops take operands of one type; broadcasting is explicit (`graph.broadcast_to`,
`graph.bias_add`), as in StableHLO. Matrix ops are rank 2.

The ops live in small modules of this package (attributes, base, matrix,
elementwise, layout, reductions); this module re-exports every public name, so
`from aicfc.dialects.graph import MatmulOp` works, and defines the `Graph`
dialect object.

```mlir
%h = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
       : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<64x128xf32>
%l = graph.cross_entropy %logits, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
```
"""

from __future__ import annotations

from xdsl.ir import Dialect

from aicfc.dialects.graph.attributes import Activation, ActivationAttr
from aicfc.dialects.graph.base import BinaryElementwiseOp, GraphOp, UnaryElementwiseOp
from aicfc.dialects.graph.elementwise import (
    AddOp,
    BiasAddOp,
    DropoutOp,
    GeluOp,
    MulOp,
    ReluOp,
    SubOp,
    TanhOp,
)
from aicfc.dialects.graph.layout import BroadcastToOp, ReshapeOp, TargetShapeOp, TransposeOp
from aicfc.dialects.graph.matrix import ConstantOp, GemmEpilogueOp, MatmulOp, MatrixProductOp
from aicfc.dialects.graph.reductions import CrossEntropyOp, MseLossOp, ReduceSumOp, SoftmaxOp

__all__ = [
    "Activation",
    "ActivationAttr",
    "AddOp",
    "BiasAddOp",
    "BinaryElementwiseOp",
    "BroadcastToOp",
    "ConstantOp",
    "CrossEntropyOp",
    "DropoutOp",
    "GeluOp",
    "GemmEpilogueOp",
    "Graph",
    "GraphOp",
    "MatmulOp",
    "MatrixProductOp",
    "MseLossOp",
    "MulOp",
    "ReduceSumOp",
    "ReluOp",
    "ReshapeOp",
    "SoftmaxOp",
    "SubOp",
    "TanhOp",
    "TargetShapeOp",
    "TransposeOp",
    "UnaryElementwiseOp",
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
        ReluOp,
        GeluOp,
        TanhOp,
        DropoutOp,
        ReshapeOp,
        TransposeOp,
        BroadcastToOp,
        SoftmaxOp,
        ReduceSumOp,
        CrossEntropyOp,
        MseLossOp,
    ],
    [ActivationAttr],
)
