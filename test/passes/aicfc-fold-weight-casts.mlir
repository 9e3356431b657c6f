// RUN: aicfc-opt %s -p 'aicfc-fuse,aicfc-autocast,aicfc-expand-backward,cse,aicfc-fold-weight-casts' | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fuse,aicfc-autocast{dtype=fp16},aicfc-loss-scale,aicfc-expand-backward,cse,aicfc-fold-weight-casts' | filecheck %s --check-prefix=F16

// The bf16 MLP step: the weights and the bias updated by Adam get a bf16 copy, a state
// argument named "<param>.bf16"; the forward product and the backward's dX product read
// it where they read the cast; each adam_step rewrites it (low_copy) and the step returns
// its next value under the copy's name. The gradients (the cast's VJP) are untouched.
// The SGD-updated weight keeps its cast (sgd_step has no low copy).

// CHECK-LABEL: func.func @mlp_step
// CHECK-SAME:  %[[W1C:w1_bf16]]: tensor<32x16xbf16> {aicfc.role = "state", aicfc.name = "0.weight.bf16"}, %[[B1C:b1_bf16]]: tensor<32xbf16> {aicfc.role = "state", aicfc.name = "0.bias.bf16"})
// CHECK-SAME:  tensor<32x16xbf16> {aicfc.name = "0.weight.bf16"}, tensor<32xbf16> {aicfc.name = "0.bias.bf16"})
// CHECK-NOT:   graph.cast %w1
// CHECK-NOT:   graph.cast %b1
// CHECK:       %h = graph.gemm_epilogue %{{.*}}, %[[W1C]] bias %[[B1C]] act = relu transpose_b
// CHECK:       %[[W2:.*]] = graph.cast %w2 : tensor<4x32xf32> to tensor<4x32xbf16>
// CHECK:       %dw1 = graph.cast %{{.*}} : tensor<32x16xbf16> to tensor<32x16xf32>
// CHECK:       %w1n, %m1n, %v1n, %s1n, %[[W1N:.*]] = autodiff.adam_step %w1, %dw1, %m1, %v1, %s1 {{.*}} low_copy(%[[W1C]] : tensor<32x16xbf16>) : {{.*}} -> tensor<32x16xbf16>
// CHECK:       %b1n, %m2n, %v2n, %s2n, %[[B1N:.*]] = autodiff.adam_step %b1, %db1, {{.*}} low_copy(%[[B1C]] : tensor<32xbf16>) : {{.*}} -> tensor<32xbf16>
// CHECK:       %w2n = autodiff.sgd_step %w2, %dw2
// CHECK:       func.return %l, %w1n, %m1n, %v1n, %s1n, %b1n, %m2n, %v2n, %s2n, %w2n, %[[W1N]], %[[B1N]] :

// fp16 with loss scaling: each next value is an amp_select of the update and the old
// param, so nothing is folded and the casts stay.

// F16-LABEL: func.func @mlp_step
// F16-NOT:   low_copy
// F16:       graph.cast %w1 : tensor<32x16xf32> to tensor<32x16xf16>
// F16:       autodiff.amp_select
// F16-NOT:   low_copy
func.func @mlp_step(%x: tensor<8x16xf32> {aicfc.role = "input", aicfc.name = "x"}, %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"}, %w1: tensor<32x16xf32> {aicfc.role = "param", aicfc.name = "0.weight"}, %b1: tensor<32xf32> {aicfc.role = "param", aicfc.name = "0.bias"}, %w2: tensor<4x32xf32> {aicfc.role = "param", aicfc.name = "2.weight"}, %m1: tensor<32x16xf32> {aicfc.role = "state", aicfc.name = "0.weight.exp_avg"}, %v1: tensor<32x16xf32> {aicfc.role = "state", aicfc.name = "0.weight.exp_avg_sq"}, %s1: tensor<f32> {aicfc.role = "state", aicfc.name = "0.weight.step"}, %m2: tensor<32xf32> {aicfc.role = "state", aicfc.name = "0.bias.exp_avg"}, %v2: tensor<32xf32> {aicfc.role = "state", aicfc.name = "0.bias.exp_avg_sq"}, %s2: tensor<f32> {aicfc.role = "state", aicfc.name = "0.bias.step"}) -> (tensor<f32> {aicfc.name = "loss"}, tensor<32x16xf32> {aicfc.name = "0.weight"}, tensor<32x16xf32> {aicfc.name = "0.weight.exp_avg"}, tensor<32x16xf32> {aicfc.name = "0.weight.exp_avg_sq"}, tensor<f32> {aicfc.name = "0.weight.step"}, tensor<32xf32> {aicfc.name = "0.bias"}, tensor<32xf32> {aicfc.name = "0.bias.exp_avg"}, tensor<32xf32> {aicfc.name = "0.bias.exp_avg_sq"}, tensor<f32> {aicfc.name = "0.bias.step"}, tensor<4x32xf32> {aicfc.name = "2.weight"}) {
  %h0 = graph.matmul %x, %w1 transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %h1 = graph.bias_add %h0, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h = graph.relu %h1 : tensor<8x32xf32>
  %z = graph.matmul %h, %w2 transpose_b : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
  %l = graph.cross_entropy %z, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %g:3 = autodiff.backward %l wrt %w1, %b1, %w2 : tensor<f32>, (tensor<32x16xf32>, tensor<32xf32>, tensor<4x32xf32>) -> (tensor<32x16xf32>, tensor<32xf32>, tensor<4x32xf32>)
  %lr = graph.constant dense<1.0e-3> : tensor<f64>
  %beta1 = graph.constant dense<0.9> : tensor<f64>
  %beta2 = graph.constant dense<0.999> : tensor<f64>
  %eps = graph.constant dense<1.0e-8> : tensor<f64>
  %wd = graph.constant dense<0.0> : tensor<f64>
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g#0, %m1, %v1, %s1 lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one) : tensor<32x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1n, %m2n, %v2n, %s2n = autodiff.adam_step %b1, %g#1, %m2, %v2, %s2 lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%one) apply(%one) : tensor<32xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %w2n = autodiff.sgd_step %w2, %g#2 lr(%lr) momentum(%wd) weight_decay(%wd) grad_scale(%one) apply(%one) : tensor<4x32xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %w1n, %m1n, %v1n, %s1n, %b1n, %m2n, %v2n, %s2n, %w2n : tensor<f32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<f32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<f32>, tensor<4x32xf32>
}
