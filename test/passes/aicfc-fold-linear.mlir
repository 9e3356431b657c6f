// RUN: aicfc-opt %s -p aicfc-fold-linear --split-input-file --verify-diagnostics | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fold-linear{force=true}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=FORCE
// RUN: not aicfc-opt %s -p aicfc-fold-linear --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// y = (x W1^T + b1) W2^T + b2 = x (W2 W1)^T + (W2 b1 + b2): 8*4 = 32 <= 6*4 + 8*6 = 72.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %[[W:.*]] = graph.matmul %w2, %w1 : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %b1 : tensor<6xf32> -> tensor<1x6xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.matmul %[[R]], %w2 transpose_b : (tensor<1x6xf32>, tensor<8x6xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.reshape %[[P]] : tensor<1x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.add %[[V]], %b2 : tensor<8xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %x, %[[W]] transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.bias_add %[[M]], %[[B]] : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @fold(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
                %b1: tensor<6xf32> {aicfc.role = "param", aicfc.name = "0.bias"},
                %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "1.weight"},
                %b2: tensor<8xf32> {aicfc.role = "param", aicfc.name = "1.bias"}) -> tensor<3x8xf32> {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.bias_add %0, %b1 : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
  %2 = graph.matmul %1, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  %3 = graph.bias_add %2, %b2 : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  func.return %3 : tensor<3x8xf32>
}

// -----

// Fused layers (after aicfc-fuse) fold into one gemm_epilogue; no biases, W stored [in, out].
// CHECK-LABEL: func.func @fold_fused_no_bias
// CHECK-NEXT:    %[[W:.*]] = graph.matmul %w2, %w1 transpose_a transpose_b : (tensor<6x8xf32>, tensor<4x6xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.gemm_epilogue %x, %[[W]] transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @fold_fused_no_bias(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                              %w1: tensor<4x6xf32> {aicfc.role = "param", aicfc.name = "a"},
                              %w2: tensor<6x8xf32> {aicfc.role = "param", aicfc.name = "b"}) -> tensor<3x8xf32> {
  %0 = graph.gemm_epilogue %x, %w1 : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %1 = graph.gemm_epilogue %0, %w2 : (tensor<3x6xf32>, tensor<6x8xf32>) -> tensor<3x8xf32>
  func.return %1 : tensor<3x8xf32>
}

// -----

// Three layers fold into one: the second fold reads the first fold's computed weight.
// CHECK-LABEL: func.func @fold_chain_of_three
// CHECK-COUNT-2: graph.matmul %w
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %x, %{{.*}} transpose_b : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @fold_chain_of_three(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                               %w1: tensor<4x4xf32> {aicfc.role = "param", aicfc.name = "a"},
                               %w2: tensor<4x4xf32> {aicfc.role = "param", aicfc.name = "b"},
                               %w3: tensor<2x4xf32> {aicfc.role = "param", aicfc.name = "c"}) -> tensor<3x2xf32> {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %2 = graph.matmul %1, %w3 transpose_b : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  func.return %2 : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @dont_fold_with_relu_between
// CHECK-NEXT:    graph.matmul %x, %w1
// CHECK-NEXT:    graph.relu
// CHECK-NEXT:    graph.matmul %{{.*}}, %w2
// CHECK-NEXT:    func.return
func.func @dont_fold_with_relu_between(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                       %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "a"},
                                       %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "b"}) -> tensor<3x8xf32> {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.relu %0 : tensor<3x6xf32>
  %2 = graph.matmul %1, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  func.return %2 : tensor<3x8xf32>
}

// -----

// A fused activation is nonlinear too.
// CHECK-LABEL: func.func @dont_fold_fused_relu
// CHECK-NEXT:    graph.gemm_epilogue %x, %w1 act = relu
// CHECK-NEXT:    graph.gemm_epilogue
func.func @dont_fold_fused_relu(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "a"},
                                %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "b"}) -> tensor<3x8xf32> {
  %0 = graph.gemm_epilogue %x, %w1 act = relu transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.gemm_epilogue %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  func.return %1 : tensor<3x8xf32>
}

// -----

// The hidden value is also returned: folding would compute both, so nothing folds.
// CHECK-LABEL: func.func @dont_fold_shared_hidden
// CHECK-NEXT:    graph.matmul %x, %w1
// CHECK-NEXT:    graph.matmul %{{.*}}, %w2
func.func @dont_fold_shared_hidden(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                   %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "a"},
                                   %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "b"}) -> (tensor<3x8xf32>, tensor<3x6xf32>) {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  func.return %1, %0 : tensor<3x8xf32>, tensor<3x6xf32>
}

// -----

// x @ y @ z with input-dependent y is a product of activations, not of weights.
// CHECK-LABEL: func.func @dont_fold_activation_product
// CHECK-NEXT:    graph.matmul %x, %y
// CHECK-NEXT:    graph.matmul %{{.*}}, %w
func.func @dont_fold_activation_product(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                        %y: tensor<6x4xf32> {aicfc.role = "input", aicfc.name = "y"},
                                        %w: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "w"}) -> tensor<3x8xf32> {
  %0 = graph.matmul %x, %y transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  func.return %1 : tensor<3x8xf32>
}

// -----

// A bottleneck 32 -> 4 -> 32: one [32, 32] weight (1024) is bigger than 4*32 + 32*4 = 256.
// CHECK-LABEL: func.func @dont_fold_when_bigger
// CHECK-NEXT:    graph.matmul %x, %w1
// CHECK-NEXT:    graph.bias_add
// CHECK-NEXT:    graph.matmul %{{.*}}, %w2
// CHECK-NEXT:    graph.bias_add
// CHECK-NEXT:    func.return
// FORCE-LABEL: func.func @dont_fold_when_bigger
// FORCE-NEXT:    %[[W:.*]] = graph.matmul %w2, %w1 : (tensor<32x4xf32>, tensor<4x32xf32>) -> tensor<32x32xf32>
// FORCE:         %[[M:.*]] = graph.matmul %x, %[[W]] transpose_b : (tensor<2x32xf32>, tensor<32x32xf32>) -> tensor<2x32xf32>
// FORCE-NEXT:    %[[Y:.*]] = graph.bias_add %[[M]]
// FORCE-NEXT:    func.return %[[Y]]
func.func @dont_fold_when_bigger(%x: tensor<2x32xf32> {aicfc.role = "input", aicfc.name = "x"},
                                 %w1: tensor<4x32xf32> {aicfc.role = "param", aicfc.name = "down.weight"},
                                 %b1: tensor<4xf32> {aicfc.role = "param", aicfc.name = "down.bias"},
                                 %w2: tensor<32x4xf32> {aicfc.role = "param", aicfc.name = "up.weight"},
                                 %b2: tensor<32xf32> {aicfc.role = "param", aicfc.name = "up.bias"}) -> tensor<2x32xf32> {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<2x32xf32>, tensor<4x32xf32>) -> tensor<2x4xf32>
  %1 = graph.bias_add %0, %b1 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %2 = graph.matmul %1, %w2 transpose_b : (tensor<2x4xf32>, tensor<32x4xf32>) -> tensor<2x32xf32>
  %3 = graph.bias_add %2, %b2 : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  func.return %3 : tensor<2x32xf32>
}

// -----

// A train step: folding would change what the optimizer updates.
// ERR: error: 'graph.matmul' aicfc-fold-linear: cannot fold linear layers in the training function @dont_fold_in_train_step (it contains autodiff.backward): folding replaces '0.weight' and '1.weight', which the optimizer updates, by their product; run it on the inference function only: aicfc-fold-linear{function=predict}
func.func @dont_fold_in_train_step(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                   %y: tensor<3x8xf32> {aicfc.role = "input", aicfc.name = "y"},
                                   %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
                                   %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "1.weight"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<6x4xf32> {aicfc.name = "0.weight"}, tensor<8x6xf32> {aicfc.name = "1.weight"}) {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  %l = graph.mse_loss %1, %y : tensor<3x8xf32> -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w1, %w2 : tensor<f32>, (tensor<6x4xf32>, tensor<8x6xf32>) -> (tensor<6x4xf32>, tensor<8x6xf32>)
  %h_lr = graph.constant dense<1.000000e-01> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %n1 = autodiff.sgd_step %w1, %g#0 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<6x4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %n2 = autodiff.sgd_step %w2, %g#1 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<8x6xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %n1, %n2 : tensor<f32>, tensor<6x4xf32>, tensor<8x6xf32>
}
