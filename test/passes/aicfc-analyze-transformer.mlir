// RUN: aicfc-opt %s -p aicfc-analyze | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fuse,aicfc-analyze' | filecheck %s --check-prefix=FUSED

// A token embedding, a layer norm and one causal attention (B = 1, T = 4, 2 heads of 2;
// q = k = v for brevity): the report's properties (embedding: a gather; layer norm and
// softmax: nonlinear) and attention's FLOPs, 4 B H T^2 d = 256 for its two products plus
// 5 per score (32 scores: scale, mask, softmax) = 416, once the chain is fused.

// CHECK-LABEL: Operator report of @predict
// CHECK:       Node 0: Embedding
// CHECK:         Parameters: 20 (wte.weight [5, 4])
// CHECK-NEXT:    FLOPs: 0
// CHECK:         Properties: linear, trainable, gather
// CHECK:       Node 1: LayerNorm
// CHECK:         Parameters: 8 (ln.weight [4], ln.bias [4])
// CHECK:         Properties: trainable, nonlinear, irreversible, collapse-producing
// CHECK:       Softmax
// CHECK:         Properties: nonlinear
// CHECK:       Total parameters: 28

// FUSED-LABEL: Operator report of @predict
// FUSED:       ScaledDotProductAttention
// FUSED-NEXT:    Ops: graph.scaled_dot_product_attention
// FUSED-NEXT:    Input shapes: [1, 2, 4, 2], [1, 2, 4, 2], [1, 2, 4, 2]
// FUSED-NEXT:    Output shapes: [1, 2, 4, 2], [1, 2, 4]
// FUSED-NEXT:    Dtype: f32
// FUSED-NEXT:    Parameters: 0
// FUSED-NEXT:    FLOPs: 416
// FUSED:         Properties: nonlinear, irreversible, collapse-producing
// FUSED-NOT:     stochastic
// FUSED:       Total parameters: 28

func.func @predict(%x: tensor<1x4xi32> {aicfc.role = "input", aicfc.name = "x"}, %wte: tensor<5x4xf32> {aicfc.role = "param", aicfc.name = "wte.weight"}, %w: tensor<4xf32> {aicfc.role = "param", aicfc.name = "ln.weight"}, %b: tensor<4xf32> {aicfc.role = "param", aicfc.name = "ln.bias"}) -> (tensor<1x2x4x2xf32> {aicfc.name = "y"}) {
  %0 = graph.embedding %x, %wte : (tensor<1x4xi32>, tensor<5x4xf32>) -> tensor<1x4x4xf32>
  %1, %2, %3 = graph.layer_norm %0 weight %w bias %b eps = 1.000000e-05 : tensor<1x4x4xf32>, tensor<4xf32>, tensor<4xf32> -> (tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %4 = graph.reshape %1 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %5 = graph.transpose %4 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %6 = graph.matmul %5, %5 transpose_b : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %7 = graph.scale %6 factor = 0.70710678118654746 : tensor<1x2x4x4xf32>
  %8 = graph.causal_mask %7 : tensor<1x2x4x4xf32>
  %9 = graph.softmax %8 axis = -1 : tensor<1x2x4x4xf32>
  %10 = graph.matmul %9, %5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  func.return %10 : tensor<1x2x4x2xf32>
}
