// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fuse,aicfc-autocast,aicfc-expand-backward,aicfc-fuse,aicfc-fold-casts' | filecheck %s
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fold-casts' | filecheck %s --check-prefix=ALONE


// The MLP train step after autocast, the backward and its fusion: each weight gradient's
// product and the logits' gemm_epilogue write f32 themselves (bf16 operands), the
// logits' epilogue adds the f32 master bias; no cast to f32 is left but the loss's
// gradient cast to bf16. Run alone on the f32 input, the pass changes nothing.

// CHECK-LABEL: func.func @mlp_step
// CHECK:       %[[B2:.*]] = graph.cast %b2 : tensor<4xf32> to tensor<4xbf16>
// CHECK:       %z = graph.gemm_epilogue %h, %{{.*}} bias %b2 transpose_b : (tensor<8x32xbf16>, tensor<4x32xbf16>, tensor<4xf32>) -> tensor<8x4xf32>
// CHECK-NOT:   graph.cast %z
// CHECK:       autodiff.cross_entropy_with_grad %z
// CHECK:       %dz = graph.cast %{{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// CHECK:       %dw2 = graph.matmul %dz, %h transpose_a : (tensor<8x4xbf16>, tensor<8x32xbf16>) -> tensor<4x32xf32>
// CHECK:       %dw1 = graph.matmul %{{.*}}, %{{.*}} transpose_a : (tensor<8x32xbf16>, tensor<8x16xbf16>) -> tensor<32x16xf32>
// CHECK-NOT:   to tensor<{{.*}}xf32>
// CHECK:       autodiff.adam_step %w1, %dw1,
// CHECK:       func.return %l, %w1n, %dw2

// ALONE-LABEL: func.func @mlp_step
// ALONE-NOT:   graph.cast

func.func @mlp_step(%x: tensor<8x16xf32> {aicfc.role = "input", aicfc.name = "x"}, %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"}, %w1: tensor<32x16xf32> {aicfc.role = "param", aicfc.name = "0.weight"}, %b1: tensor<32xf32> {aicfc.role = "param", aicfc.name = "0.bias"}, %w2: tensor<4x32xf32> {aicfc.role = "param", aicfc.name = "2.weight"}, %b2: tensor<4xf32> {aicfc.role = "param", aicfc.name = "2.bias"}, %m1: tensor<32x16xf32>, %v1: tensor<32x16xf32>, %s1: tensor<f32>) -> (tensor<f32>, tensor<32x16xf32>, tensor<4x32xf32>) {
  %h0 = graph.matmul %x, %w1 transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %h1 = graph.bias_add %h0, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h = graph.relu %h1 : tensor<8x32xf32>
  %z0 = graph.matmul %h, %w2 transpose_b : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
  %z = graph.bias_add %z0, %b2 : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %l = graph.cross_entropy %z, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w1, %w2 : tensor<f32>, (tensor<32x16xf32>, tensor<4x32xf32>) -> (tensor<32x16xf32>, tensor<4x32xf32>)
  %lr = graph.constant dense<1.0e-3> : tensor<f64>
  %beta1 = graph.constant dense<0.9> : tensor<f64>
  %beta2 = graph.constant dense<0.999> : tensor<f64>
  %eps = graph.constant dense<1.0e-8> : tensor<f64>
  %wd = graph.constant dense<0.0> : tensor<f64>
  %gs = graph.constant dense<1.0> : tensor<f32>
  %ap = graph.constant dense<1.0> : tensor<f32>
  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g#0, %m1, %v1, %s1 lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%gs) apply(%ap) : tensor<32x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %w1n, %g#1 : tensor<f32>, tensor<32x16xf32>, tensor<4x32xf32>
}

// -----


// A GPT block's forward: the attention projection's gemm_epilogue feeds add_layer_norm
// in f32 and the tied head's logits feed the loss and the result, each now an f32 product
// of bf16 operands; the casts that feed attention (f32 policy) and the layer norms'
// outputs cast to bf16 stay.

// CHECK-LABEL: func.func @gpt_block
// CHECK:       %p = graph.gemm_epilogue %{{.*}}, %{{.*}} bias %bo transpose_b : (tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:  graph.add_layer_norm %x, %p
// CHECK:       %logits = graph.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xf32>
// CHECK-NEXT:  %loss = graph.cross_entropy %logits, %t
// CHECK-NEXT:  func.return %loss, %logits : tensor<f32>, tensor<2x4x16xf32>

func.func @gpt_block(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>, %lw: tensor<8xf32>, %lb: tensor<8xf32>, %wqkv: tensor<24x8xf32>, %bqkv: tensor<24xf32>, %wo: tensor<8x8xf32>, %bo: tensor<8xf32>, %wte: tensor<16x8xf32>) -> (tensor<f32>, tensor<2x4x16xf32>) {
  %ln, %mean, %rstd = graph.layer_norm %x weight %lw bias %lb eps = 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %qkv0 = graph.matmul %ln, %wqkv transpose_b : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %qkv = graph.bias_add %qkv0, %bqkv : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<2x4x24xf32> -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %q4 = graph.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %om = graph.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %p0 = graph.matmul %om, %wo transpose_b : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %p = graph.bias_add %p0, %bo : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = graph.add %x, %p : tensor<2x4x8xf32>
  %ln2, %mean2, %rstd2 = graph.layer_norm %r weight %lw bias %lb eps = 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %logits = graph.matmul %ln2, %wte transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = graph.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  func.return %loss, %logits : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// ALONE (the pass alone, on bf16 IR). Not folded: a product whose bf16 result has another user (it needs the rounded value),
// a cast to f64, a gemm_epilogue exporting its pre-activation; a reduce_sum and an
// epilogue_grad's bias gradient are.

// ALONE-LABEL: func.func @dont_fold_shared
// ALONE:       %m = graph.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// ALONE-NEXT:  %c = graph.cast %m : tensor<4x4xbf16> to tensor<4x4xf32>
// ALONE-NEXT:  %n = graph.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// ALONE-NEXT:  %d = graph.cast %n : tensor<4x4xbf16> to tensor<4x4xf64>
// ALONE-NEXT:  %y, %z = graph.gemm_epilogue
// ALONE-NEXT:  %zc = graph.cast %z
// ALONE-NEXT:  %s = graph.reduce_sum %a axes = [0] : tensor<4x4xbf16> -> tensor<4xf32>
// ALONE-NEXT:  %dz, %sc = autodiff.epilogue_grad %a, %a act = relu : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> (tensor<4x4xbf16>, tensor<4xf32>)
// ALONE-NEXT:  func.return %m, %c, %d, %y, %zc, %s, %dz, %sc
func.func @dont_fold_shared(%a: tensor<4x4xbf16>, %b: tensor<4xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xbf16>, tensor<4xf32>) {
  %m = graph.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %c = graph.cast %m : tensor<4x4xbf16> to tensor<4x4xf32>
  %n = graph.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %d = graph.cast %n : tensor<4x4xbf16> to tensor<4x4xf64>
  %y, %z = graph.gemm_epilogue %a, %a bias %b act = gelu : (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xbf16>)
  %zc = graph.cast %z : tensor<4x4xbf16> to tensor<4x4xf32>
  %s0 = graph.reduce_sum %a axes = [0] : tensor<4x4xbf16> -> tensor<4xbf16>
  %s = graph.cast %s0 : tensor<4xbf16> to tensor<4xf32>
  %dz, %db = autodiff.epilogue_grad %a, %a act = relu : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> (tensor<4x4xbf16>, tensor<4xbf16>)
  %sc = graph.cast %db : tensor<4xbf16> to tensor<4xf32>
  func.return %m, %c, %d, %y, %zc, %s, %dz, %sc : tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xbf16>, tensor<4xf32>
}
