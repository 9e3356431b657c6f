// RUN: aicfc-opt %s -p aicfc-analyze | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fuse,aicfc-analyze{function=predict}' | filecheck %s --check-prefix=FUSED
// RUN: aicfc-opt %s -p 'aicfc-expand-backward,aicfc-analyze{function=train_step}' | filecheck %s --check-prefix=GRAD
// RUN: not aicfc-opt %s -p 'aicfc-analyze{function=nope}' 2>&1 | filecheck %s --check-prefix=ERR

// Input[1, 10] -> Linear(10, 20) -> ReLU -> Linear(20, 5) (docs/design.md#operator-analysis).
// CHECK-LABEL: Operator report of @predict
// CHECK:       Node 0: Linear(in_features=10, out_features=20, bias=True)
// CHECK-NEXT:    Ops: graph.matmul, graph.bias_add
// CHECK-NEXT:    Input shape: [1, 10]
// CHECK-NEXT:    Output shape: [1, 20]
// CHECK-NEXT:    Dtype: f32
// CHECK-NEXT:    Parameters: 220 (0.weight [20, 10], 0.bias [20])
// 2*1*20*10 + 20 (bias)
// CHECK-NEXT:    FLOPs: 420
// matmul 4*(10 + 200 + 20), bias_add 4*(20 + 20 + 20)
// CHECK-NEXT:    Bytes moved: 1160
// CHECK-NEXT:    Properties: linear, trainable
// CHECK:       Node 1: ReLU
// CHECK-NEXT:    Ops: graph.relu
// CHECK-NEXT:    Input shape: [1, 20]
// CHECK-NEXT:    Output shape: [1, 20]
// CHECK-NEXT:    Dtype: f32
// CHECK-NEXT:    Parameters: 0
// CHECK-NEXT:    FLOPs: 20
// CHECK-NEXT:    Bytes moved: 160
// CHECK-NEXT:    Properties: nonlinear, irreversible, collapse-producing
// CHECK:       Node 2: Linear(in_features=20, out_features=5, bias=True)
// CHECK-NEXT:    Ops: graph.matmul, graph.bias_add
// CHECK-NEXT:    Input shape: [1, 20]
// CHECK-NEXT:    Output shape: [1, 5]
// CHECK-NEXT:    Dtype: f32
// CHECK-NEXT:    Parameters: 105 (2.weight [5, 20], 2.bias [5])
// CHECK-NEXT:    FLOPs: 205
// CHECK-NEXT:    Bytes moved: 560
// CHECK-NEXT:    Properties: linear, trainable
// CHECK:       Total parameters: 325
// CHECK-NEXT:  Total FLOPs: 645
// CHECK-NEXT:  Total bytes moved: 1880
// 645 / 1880
// CHECK-NEXT:  Arithmetic intensity: 0.343 FLOP/byte
// CHECK-NEXT:  Potential collapse point: Node 1 ReLU (every negative input becomes 0)
// CHECK-NEXT:  Linear expansion: 10 -> 20 (Node 0)
// CHECK-NEXT:  Linear contraction: 20 -> 5 (Node 2)
// CHECK-NEXT:  Optimization candidates:
// CHECK-NEXT:  - inspect effective rank of Node 0 Linear(10 -> 20): it expands 10 -> 20, so its outputs span at most 10 of 20 dimensions
// CHECK-NEXT:  - measure ReLU activation ratio at Node 1:
// CHECK-NEXT:  - consider hidden dimension reduction: Node 0 Linear(10 -> 20) expands 10 -> 20 and Node 1 ReLU then collapses part of it
// CHECK-NEXT:  - fuse Node 0 Linear(10 -> 20) and Node 1 ReLU into one graph.gemm_epilogue: graph.matmul + graph.bias_add + graph.relu
// CHECK-NEXT:  - fuse Node 2 Linear(20 -> 5) into one graph.gemm_epilogue: graph.matmul + graph.bias_add

// After aicfc-fuse the same network is two nodes with the same parameters.
// FUSED-LABEL: Operator report of @predict
// FUSED:       Node 0: Linear(in_features=10, out_features=20, bias=True) + ReLU (fused)
// FUSED-NEXT:    Ops: graph.gemm_epilogue
// FUSED:         Parameters: 220 (0.weight [20, 10], 0.bias [20])
// FUSED-NEXT:    FLOPs: 440
// FUSED:         Properties: trainable, nonlinear, irreversible, collapse-producing
// FUSED:       Node 1: Linear(in_features=20, out_features=5, bias=True)
// FUSED:         Parameters: 105 (2.weight [5, 20], 2.bias [5])
// FUSED:         Properties: linear, trainable
// FUSED:       Total parameters: 325
// FUSED-NEXT:  Total FLOPs: 645
// FUSED:       Potential collapse point: Node 0 Linear(10 -> 20) + ReLU (every negative input becomes 0)
// FUSED-NOT:   Operator report of @two_linears
func.func @predict(%x: tensor<1x10xf32> {aicfc.role = "input", aicfc.name = "x"},
                   %w1: tensor<20x10xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
                   %b1: tensor<20xf32> {aicfc.role = "param", aicfc.name = "0.bias"},
                   %w2: tensor<5x20xf32> {aicfc.role = "param", aicfc.name = "2.weight"},
                   %b2: tensor<5xf32> {aicfc.role = "param", aicfc.name = "2.bias"})
    -> (tensor<1x5xf32> {aicfc.name = "output"}) {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<1x10xf32>, tensor<20x10xf32>) -> tensor<1x20xf32>
  %1 = graph.bias_add %0, %b1 : (tensor<1x20xf32>, tensor<20xf32>) -> tensor<1x20xf32>
  %2 = graph.relu %1 : tensor<1x20xf32>
  %3 = graph.matmul %2, %w2 transpose_b : (tensor<1x20xf32>, tensor<5x20xf32>) -> tensor<1x5xf32>
  %4 = graph.bias_add %3, %b2 : (tensor<1x5xf32>, tensor<5xf32>) -> tensor<1x5xf32>
  func.return %4 : tensor<1x5xf32>
}

// Two linears with nothing nonlinear between: a fold candidate when the folded weight is
// not bigger (8*4 <= 6*4 + 8*6), "keep apart" when it is (32*32 > 4*32 + 32*4).
// CHECK-LABEL: Operator report of @two_linears
// CHECK:       Node 0: Linear(in_features=4, out_features=6, bias=False)
// CHECK:       Node 1: Linear(in_features=6, out_features=8, bias=False)
// CHECK:       Node 2: Tanh
// CHECK:         Properties: nonlinear
// CHECK:       Node 3: Linear(in_features=8, out_features=32, bias=False)
// CHECK:       Node 4: Tanh
// CHECK:       Node 5: Linear(in_features=32, out_features=4, bias=False)
// CHECK:       Node 6: Linear(in_features=4, out_features=32, bias=False)
// CHECK:       Total parameters: 584
// tanh is a bijection: no collapse point.
// CHECK:       Potential collapse points: none
// CHECK-NEXT:  Linear expansion: 4 -> 6 (Node 0)
// CHECK-NEXT:  Linear expansion: 6 -> 8 (Node 1)
// CHECK-NEXT:  Linear expansion: 8 -> 32 (Node 3)
// CHECK-NEXT:  Linear expansion: 4 -> 32 (Node 6)
// CHECK-NEXT:  Linear contraction: 32 -> 4 (Node 5)
// CHECK:       - fold Node 0 Linear(4 -> 6) and Node 1 Linear(6 -> 8) into one Linear(4 -> 8): nothing nonlinear between them; the weight needs 32 instead of 72 parameters (aicfc-fold-linear, inference only)
// CHECK-NOT:   - fold Node 1
// CHECK:       - keep Node 5 Linear(32 -> 4) and Node 6 Linear(4 -> 32) apart: nothing nonlinear between them, but one Linear(32 -> 32) needs 1024 weight parameters instead of 256
func.func @two_linears(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                       %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "a.weight"},
                       %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "b.weight"},
                       %w3: tensor<32x8xf32> {aicfc.role = "param", aicfc.name = "c.weight"},
                       %w4: tensor<4x32xf32> {aicfc.role = "param", aicfc.name = "d.weight"},
                       %w5: tensor<32x4xf32> {aicfc.role = "param", aicfc.name = "e.weight"})
    -> tensor<3x32xf32> {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  %2 = graph.tanh %1 : tensor<3x8xf32>
  %3 = graph.matmul %2, %w3 transpose_b : (tensor<3x8xf32>, tensor<32x8xf32>) -> tensor<3x32xf32>
  %4 = graph.tanh %3 : tensor<3x32xf32>
  %5 = graph.matmul %4, %w4 transpose_b : (tensor<3x32xf32>, tensor<4x32xf32>) -> tensor<3x4xf32>
  %6 = graph.matmul %5, %w5 transpose_b : (tensor<3x4xf32>, tensor<32x4xf32>) -> tensor<3x32xf32>
  func.return %6 : tensor<3x32xf32>
}

// Layout ops and constants: shape-only properties, and what canonicalize would remove.
// CHECK-LABEL: Operator report of @layout
// CHECK:       Node 0: Reshape
// CHECK:         Properties: linear, shape-only
// CHECK:       Node 1: Reshape
// CHECK:       Node 2: Transpose
// CHECK:         Properties: linear, shape-only
// CHECK:       Node 3: Constant
// CHECK:         Properties: constant
// CHECK:       Node 4: Constant
// CHECK:       Node 5: Add
// CHECK:       Total parameters: 0
// CHECK:       Optimization candidates:
// CHECK-NEXT:  - merge Node 0 Reshape and Node 1 Reshape: a reshape of a reshape is one reshape or none (canonicalize)
// CHECK-NEXT:  - remove Node 2 Transpose: it returns its input unchanged (canonicalize)
// CHECK-NEXT:  - precompute Node 5 Add: all its operands are constants (aicfc-fold-constants)
func.func @layout(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2xf32>) {
  %0 = graph.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = graph.reshape %0 : tensor<6xf32> -> tensor<3x2xf32>
  %2 = graph.transpose %1 perm = [0, 1] : tensor<3x2xf32> -> tensor<3x2xf32>
  %a = graph.constant dense<1.0> : tensor<2xf32>
  %b = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %c = graph.add %a, %b : tensor<2xf32>
  func.return %2, %c : tensor<3x2xf32>, tensor<2xf32>
}

// A train step: autodiff ops are listed apart and left out of the totals.
// CHECK-LABEL: Operator report of @train_step
// CHECK:       Node 0: Linear(in_features=4, out_features=3, bias=True)
// CHECK:       Node 1: CrossEntropy
// CHECK-NEXT:    Ops: graph.cross_entropy
// CHECK-NEXT:    Input shapes: [2, 3], [2]
// CHECK-NEXT:    Output shape: []
// CHECK:       Training ops (autodiff, not in the totals): autodiff.backward x1, autodiff.sgd_step x2
// CHECK:       Total parameters: 15
// CHECK:       Potential collapse point: Node 1 CrossEntropy (reduces logits [2, 3] to a scalar loss)
// After aicfc-expand-backward the gradient matmuls read the weight too; they are gradient
// nodes, not layers, and stay out of the facts.
// GRAD-LABEL: Operator report of @train_step
// GRAD:       Node 0: Linear(in_features=4, out_features=3, bias=True)
// GRAD:       Node 1: CrossEntropy
// GRAD:       MatMul (gradient)
// GRAD-NOT:   Node {{[0-9]+}}: Linear
// GRAD:       Gradient nodes:
// GRAD:       Training ops (autodiff, not in the totals): autodiff.cross_entropy_grad x1, autodiff.sgd_step x2
// GRAD:       Total parameters: 15
// GRAD:       Potential collapse point: Node 1 CrossEntropy
// GRAD-NOT:   Potential collapse point
// GRAD:       Linear contraction: 4 -> 3 (Node 0)
func.func @train_step(%x: tensor<2x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                      %y: tensor<2xi32> {aicfc.role = "input", aicfc.name = "y"},
                      %w: tensor<3x4xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
                      %b: tensor<3xf32> {aicfc.role = "param", aicfc.name = "fc.bias"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<3x4xf32> {aicfc.name = "fc.weight"},
        tensor<3xf32> {aicfc.name = "fc.bias"}) {
  %0 = graph.matmul %x, %w transpose_b : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = graph.bias_add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.cross_entropy %1, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<f32>, (tensor<3x4xf32>, tensor<3xf32>) -> (tensor<3x4xf32>, tensor<3xf32>)
  %h_lr = graph.constant dense<1.000000e-01> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1 = autodiff.sgd_step %w, %g#0 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<3x4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1 = autodiff.sgd_step %b, %g#1 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<3xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %w1, %b1 : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}

// A transpose of a square matrix keeps the type but moves elements: nothing to remove
// (it was reported as "maps a tensor to its own shape"; canonicalize keeps it).
// CHECK-LABEL: Operator report of @dont_remove_square_transpose
// CHECK:       Optimization candidates: none
func.func @dont_remove_square_transpose(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = graph.transpose %x perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}

// ERR: error: aicfc-analyze: no function @nope in the module (functions: @predict, @two_linears, @layout, @train_step, @dont_remove_square_transpose)
