// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s

// The transformer's fusion patterns (passes/fusion/patterns.py): attention, the residual
// add + layer norm, and the layer patterns on [B, T, D]. Negative cases are named dont_*.
// A dtype mismatch inside a chain cannot be written (each verifier gives its result its
// operands' type): test/python/passes/test_fuse_transformer.py checks the matcher's rule.

// The attention chain (q k^T, scale, causal mask, softmax over the keys, P v) becomes one
// graph.scaled_dot_product_attention; its lse result is new (no users yet).
// CHECK-LABEL: func.func @fuse_attention_causal
// CHECK-NEXT: %o, %{{.*}} = graph.scaled_dot_product_attention %q, %k, %v causal scale = 2.500000e-01 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: func.return %o : tensor<2x4x8x16xf32>
func.func @fuse_attention_causal(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<2x4x8x8xf32>
  %m = graph.causal_mask %sc : tensor<2x4x8x8xf32>
  %p = graph.softmax %m axis = -1 : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  func.return %o : tensor<2x4x8x16xf32>
}

// Without a causal mask the fused op is not causal (the non-causal chain never becomes a
// causal op); T != S, and the axis may be written as the last one's index.
// CHECK-LABEL: func.func @fuse_attention_not_causal
// CHECK-NEXT: %o, %{{.*}} = graph.scaled_dot_product_attention %q, %k, %v scale = 0.35355339059327373 : (tensor<1x2x6x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> (tensor<1x2x6x8xf32>, tensor<1x2x6xf32>)
// CHECK-NEXT: func.return %o : tensor<1x2x6x8xf32>
func.func @fuse_attention_not_causal(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x6x8xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x2x6x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x6x5xf32>
  %sc = graph.scale %s factor = 0.35355339059327373 : tensor<1x2x6x5xf32>
  %p = graph.softmax %sc axis = 3 : tensor<1x2x6x5xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x6x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x6x8xf32>
  func.return %o : tensor<1x2x6x8xf32>
}

// Dropout on the probabilities joins: the fused op draws graph.dropout's mask (same seed
// and offset operand) on the flattened [B, H, T, S] probabilities.
// CHECK-LABEL: func.func @fuse_attention_dropout
// CHECK-NEXT: %o, %{{.*}} = graph.scaled_dot_product_attention %q, %k, %v offset %off causal scale = 2.500000e-01 dropout_p = 1.000000e-01 seed = 5 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: func.return %o : tensor<2x4x8x16xf32>
func.func @fuse_attention_dropout(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %off: tensor<i64>) -> tensor<2x4x8x16xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<2x4x8x8xf32>
  %m = graph.causal_mask %sc : tensor<2x4x8x8xf32>
  %p = graph.softmax %m axis = -1 : tensor<2x4x8x8xf32>
  %d = graph.dropout %p, %off p = 0.1 seed = 5 : tensor<2x4x8x8xf32>, tensor<i64>
  %o = graph.matmul %d, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  func.return %o : tensor<2x4x8x16xf32>
}

// Other float dtypes fuse too, and q, k, v may be one value.
// CHECK-LABEL: func.func @fuse_attention_f64
// CHECK-NEXT: %o, %{{.*}} = graph.scaled_dot_product_attention %q, %q, %q causal scale = 5.000000e-01 : (tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64>) -> (tensor<1x1x4x2xf64>, tensor<1x1x4xf64>)
// CHECK-NEXT: func.return %o : tensor<1x1x4x2xf64>
func.func @fuse_attention_f64(%q: tensor<1x1x4x2xf64>) -> tensor<1x1x4x2xf64> {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64>) -> tensor<1x1x4x4xf64>
  %sc = graph.scale %s factor = 0.5 : tensor<1x1x4x4xf64>
  %m = graph.causal_mask %sc : tensor<1x1x4x4xf64>
  %p = graph.softmax %m axis = -1 : tensor<1x1x4x4xf64>
  %o = graph.matmul %p, %q : (tensor<1x1x4x4xf64>, tensor<1x1x4x2xf64>) -> tensor<1x1x4x2xf64>
  func.return %o : tensor<1x1x4x2xf64>
}

// The probabilities are also returned: an intermediate with a second user stops the chain
// (the fused op never materialises them).
// CHECK-LABEL: func.func @dont_fuse_attention_second_user
// CHECK-NEXT: %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %sc = graph.scale %s factor = 2.500000e-01 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %m = graph.causal_mask %sc : tensor<1x2x4x4xf32>
// CHECK-NEXT: %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_attention_second_user(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<1x2x4x4xf32>
  %m = graph.causal_mask %sc : tensor<1x2x4x4xf32>
  %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// No scale step: the chain is not scaled dot-product attention.
// CHECK-LABEL: func.func @dont_fuse_attention_missing_scale
// CHECK-NEXT: %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %m = graph.causal_mask %s : tensor<1x2x4x4xf32>
// CHECK-NEXT: %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %o : tensor<1x2x4x8xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_attention_missing_scale(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m = graph.causal_mask %s : tensor<1x2x4x4xf32>
  %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %o : tensor<1x2x4x8xf32>
}

// A mask with fill 0 (the gradient's form) is not the causal mask of attention.
// CHECK-LABEL: func.func @dont_fuse_attention_mask_fill_zero
// CHECK-NEXT: %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %sc = graph.scale %s factor = 2.500000e-01 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %m = graph.causal_mask %sc fill = 0.000000e+00 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %o : tensor<1x2x4x8xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_attention_mask_fill_zero(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<1x2x4x4xf32>
  %m = graph.causal_mask %sc fill = 0.0 : tensor<1x2x4x4xf32>
  %p = graph.softmax %m axis = -1 : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %o : tensor<1x2x4x8xf32>
}

// A softmax over the queries' axis is not attention's softmax over the keys.
// CHECK-LABEL: func.func @dont_fuse_attention_softmax_other_axis
// CHECK-NEXT: %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %sc = graph.scale %s factor = 2.500000e-01 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %p = graph.softmax %sc axis = 2 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %o : tensor<1x2x4x8xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_attention_softmax_other_axis(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<1x2x4x4xf32>
  %p = graph.softmax %sc axis = 2 : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %o : tensor<1x2x4x8xf32>
}

// v's head size differs from k's: the fused op takes one head size.
// CHECK-LABEL: func.func @dont_fuse_attention_other_head_size
// CHECK-NEXT: %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %sc = graph.scale %s factor = 2.500000e-01 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %p = graph.softmax %sc axis = -1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
// CHECK-NEXT: func.return %o : tensor<1x2x4x6xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_attention_other_head_size(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32> {
  %s = graph.matmul %q, %q transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<1x2x4x4xf32>
  %p = graph.softmax %sc axis = -1 : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
  func.return %o : tensor<1x2x4x6xf32>
}

// The residual add in front of a layer norm fuses; the sum keeps its other users (the
// residual stream) through the fused op's first result.
// CHECK-LABEL: func.func @fuse_add_layer_norm_residual
// CHECK-NEXT: %s, %y, %m, %r = graph.add_layer_norm %x, %h weight %w bias %b eps = 1.000000e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-NEXT: func.return %s, %y : tensor<2x8x16xf32>, tensor<2x8x16xf32>
func.func @fuse_add_layer_norm_residual(%x: tensor<2x8x16xf32>, %h: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %s = graph.add %x, %h : tensor<2x8x16xf32>
  %y, %m, %r = graph.layer_norm %s weight %w bias %b eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  func.return %s, %y : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// The norm's mean and rstd have users (its gradient): the fused op's replace them.
// CHECK-LABEL: func.func @fuse_add_layer_norm_statistics_used
// CHECK-NEXT: %s, %y, %m, %r = graph.add_layer_norm %x, %h eps = 1.000000e-05 : tensor<8x16xf32>, tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %dx = autodiff.layer_norm_grad %dy, %s, %m, %r : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x16xf32>)
// CHECK-NEXT: func.return %y, %dx : tensor<8x16xf32>, tensor<8x16xf32>
func.func @fuse_add_layer_norm_statistics_used(%x: tensor<8x16xf32>, %h: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %s = graph.add %x, %h : tensor<8x16xf32>
  %y, %m, %r = graph.layer_norm %s eps = 1.0e-05 : tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx = autodiff.layer_norm_grad %dy, %s, %m, %r : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x16xf32>)
  func.return %y, %dx : tensor<8x16xf32>, tensor<8x16xf32>
}

// Only the residual add has a fused form.
// CHECK-LABEL: func.func @dont_fuse_layer_norm_of_a_sub
// CHECK-NEXT: %s = graph.sub %x, %h : tensor<8x16xf32>
// CHECK-NEXT: %y, %m, %r = graph.layer_norm %s eps = 1.000000e-05 : tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: func.return %y : tensor<8x16xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_layer_norm_of_a_sub(%x: tensor<8x16xf32>, %h: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = graph.sub %x, %h : tensor<8x16xf32>
  %y, %m, %r = graph.layer_norm %s eps = 1.0e-05 : tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return %y : tensor<8x16xf32>
}

// A Linear on [B, T, D] fuses into a gemm_epilogue exactly as on [N, D] (the leading dims
// fold into M).
// CHECK-LABEL: func.func @fuse_linear_on_btd
// CHECK-NEXT: %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<2x8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
// CHECK-NEXT: func.return %y : tensor<2x8x64xf32>
func.func @fuse_linear_on_btd(%x: tensor<2x8x16xf32>, %w: tensor<64x16xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %m = graph.matmul %x, %w transpose_b : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  %z = graph.bias_add %m, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %y = graph.gelu %z : tensor<2x8x64xf32>
  func.return %y : tensor<2x8x64xf32>
}

// Its backward: the activation gradient and the bias gradient over every leading axis.
// CHECK-LABEL: func.func @fuse_backward_gelu_btd
// CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %z act = gelu : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
// CHECK-NEXT: func.return %dz, %db : tensor<2x8x64xf32>, tensor<64xf32>
func.func @fuse_backward_gelu_btd(%dy: tensor<2x8x64xf32>, %z: tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>) {
  %dz = autodiff.gelu_grad %dy, %z : tensor<2x8x64xf32>
  %db = graph.reduce_sum %dz axes = [0, 1] : tensor<2x8x64xf32> -> tensor<64xf32>
  func.return %dz, %db : tensor<2x8x64xf32>, tensor<64xf32>
}

// A language model's loss over [B, T, V] logits fuses with its gradient.
// CHECK-LABEL: func.func @fuse_loss_with_grad_btv
// CHECK-NEXT: %l, %dx = autodiff.cross_entropy_with_grad %x, %y, %d : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x8x65xf32>)
// CHECK-NEXT: func.return %l, %dx : tensor<f32>, tensor<2x8x65xf32>
func.func @fuse_loss_with_grad_btv(%x: tensor<2x8x65xf32>, %y: tensor<2x8xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x8x65xf32>) {
  %l = graph.cross_entropy %x, %y : (tensor<2x8x65xf32>, tensor<2x8xi32>) -> tensor<f32>
  %dx = autodiff.cross_entropy_grad %x, %y, %d : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x65xf32>
  func.return %l, %dx : tensor<f32>, tensor<2x8x65xf32>
}

// A batched rhs is no layer's weight: no gemm_epilogue takes it.
// CHECK-LABEL: func.func @dont_fuse_batched_weight
// CHECK-NEXT: %m = graph.matmul %x, %w : (tensor<2x8x16xf32>, tensor<2x16x64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: %z = graph.bias_add %m, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: func.return %z : tensor<2x8x64xf32>
// CHECK-NOT: graph.scaled_dot_product_attention
// CHECK-NOT: graph.add_layer_norm
// CHECK-NOT: graph.gemm_epilogue
func.func @dont_fuse_batched_weight(%x: tensor<2x8x16xf32>, %w: tensor<2x16x64xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %m = graph.matmul %x, %w : (tensor<2x8x16xf32>, tensor<2x16x64xf32>) -> tensor<2x8x64xf32>
  %z = graph.bias_add %m, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  func.return %z : tensor<2x8x64xf32>
}
