// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s

// The packed_qkv_attention pattern (passes/fusion/patterns.py): a GPT block's attention
// reads q, k, v as head views of c_attn's packed output [N, T, 3D] (split, reshape to
// [N, T, H, d], transpose to [N, H, T, d]) and merges the heads back (transpose, reshape
// to [N, T, D]). After the attention pattern has formed the fused op, the layout ops fold
// into graph.packed_qkv_attention, which reads qkv with strides and writes [N, T, D].
// Negative cases are named dont_*.

// A GPT block's attention (nanoGPT's CausalSelfAttention between c_attn and c_proj).
// CHECK-LABEL: func.func @fuse_gpt_block_attention
// CHECK-NEXT: %qkv = graph.gemm_epilogue %x, %w_attn bias %b_attn : (tensor<2x8x48xf32>, tensor<48x144xf32>, tensor<144xf32>) -> tensor<2x8x144xf32>
// CHECK-NEXT: %y, %{{.*}} = graph.packed_qkv_attention %qkv heads = 3 causal scale = 2.500000e-01 : (tensor<2x8x144xf32>) -> (tensor<2x8x48xf32>, tensor<2x3x8xf32>)
// CHECK-NEXT: %out = graph.gemm_epilogue %y, %w_proj bias %b_proj : (tensor<2x8x48xf32>, tensor<48x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
// CHECK-NEXT: func.return %out : tensor<2x8x48xf32>
// CHECK-NOT: graph.split
// CHECK-NOT: graph.transpose
// CHECK-NOT: graph.reshape
func.func @fuse_gpt_block_attention(%x: tensor<2x8x48xf32>, %w_attn: tensor<48x144xf32>, %b_attn: tensor<144xf32>, %w_proj: tensor<48x48xf32>, %b_proj: tensor<48xf32>) -> tensor<2x8x48xf32> {
  %mm = graph.matmul %x, %w_attn : (tensor<2x8x48xf32>, tensor<48x144xf32>) -> tensor<2x8x144xf32>
  %qkv = graph.bias_add %mm, %b_attn : (tensor<2x8x144xf32>, tensor<144xf32>) -> tensor<2x8x144xf32>
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [48, 48, 48] : tensor<2x8x144xf32> -> (tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>)
  %q4 = graph.reshape %q : tensor<2x8x48xf32> -> tensor<2x8x3x16xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> -> tensor<2x3x8x16xf32>
  %k4 = graph.reshape %k : tensor<2x8x48xf32> -> tensor<2x8x3x16xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> -> tensor<2x3x8x16xf32>
  %v4 = graph.reshape %v : tensor<2x8x48xf32> -> tensor<2x8x3x16xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> -> tensor<2x3x8x16xf32>
  %s = graph.matmul %qh, %kh transpose_b : (tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>) -> tensor<2x3x8x8xf32>
  %sc = graph.scale %s factor = 0.25 : tensor<2x3x8x8xf32>
  %m = graph.causal_mask %sc : tensor<2x3x8x8xf32>
  %p = graph.softmax %m axis = -1 : tensor<2x3x8x8xf32>
  %o = graph.matmul %p, %vh : (tensor<2x3x8x8xf32>, tensor<2x3x8x16xf32>) -> tensor<2x3x8x16xf32>
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> -> tensor<2x8x3x16xf32>
  %y = graph.reshape %ot : tensor<2x8x3x16xf32> -> tensor<2x8x48xf32>
  %mp = graph.matmul %y, %w_proj : (tensor<2x8x48xf32>, tensor<48x48xf32>) -> tensor<2x8x48xf32>
  %out = graph.bias_add %mp, %b_proj : (tensor<2x8x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  func.return %out : tensor<2x8x48xf32>
}

// One head, dropout on the probabilities (the offset operand and the seed move over).
// CHECK-LABEL: func.func @fuse_packed_one_head_dropout
// CHECK-NEXT: %y, %{{.*}} = graph.packed_qkv_attention %qkv offset %off heads = 1 causal scale = 2.500000e-01 dropout_p = 1.000000e-01 seed = 7 : (tensor<1x5x48xf32>, tensor<i64>) -> (tensor<1x5x16xf32>, tensor<1x1x5xf32>)
// CHECK-NEXT: func.return %y : tensor<1x5x16xf32>
func.func @fuse_packed_one_head_dropout(%qkv: tensor<1x5x48xf32>, %off: tensor<i64>) -> tensor<1x5x16xf32> {
  %q, %k, %v = graph.split %qkv axis = -1 sizes = [16, 16, 16] : tensor<1x5x48xf32> -> (tensor<1x5x16xf32>, tensor<1x5x16xf32>, tensor<1x5x16xf32>)
  %q4 = graph.reshape %q : tensor<1x5x16xf32> -> tensor<1x5x1x16xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x5x1x16xf32> -> tensor<1x1x5x16xf32>
  %k4 = graph.reshape %k : tensor<1x5x16xf32> -> tensor<1x5x1x16xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x5x1x16xf32> -> tensor<1x1x5x16xf32>
  %v4 = graph.reshape %v : tensor<1x5x16xf32> -> tensor<1x5x1x16xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x5x1x16xf32> -> tensor<1x1x5x16xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh offset %off causal scale = 0.25 dropout_p = 0.1 seed = 7 : (tensor<1x1x5x16xf32>, tensor<1x1x5x16xf32>, tensor<1x1x5x16xf32>, tensor<i64>) -> (tensor<1x1x5x16xf32>, tensor<1x1x5xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<1x1x5x16xf32> -> tensor<1x5x1x16xf32>
  %y = graph.reshape %ot : tensor<1x5x1x16xf32> -> tensor<1x5x16xf32>
  func.return %y : tensor<1x5x16xf32>
}

// k is read elsewhere too: the layout in front must be dead after the fold, so nothing
// folds (the attention op keeps its head operands).
// CHECK-LABEL: func.func @dont_fuse_packed_head_second_user
// CHECK: graph.scaled_dot_product_attention %qh, %kh, %vh
// CHECK-NOT: graph.packed_qkv_attention
func.func @dont_fuse_packed_head_second_user(%qkv: tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>) {
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q4 = graph.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %y = graph.reshape %ot : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  func.return %y, %kh : tensor<1x4x8xf32>, tensor<1x2x4x4xf32>
}

// q and k swapped (k is the split's first piece): not the packed order q, k, v.
// CHECK-LABEL: func.func @dont_fuse_packed_swapped_pieces
// CHECK: graph.scaled_dot_product_attention %kh, %qh, %vh
// CHECK-NOT: graph.packed_qkv_attention
func.func @dont_fuse_packed_swapped_pieces(%qkv: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q4 = graph.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %kh, %qh, %vh causal scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %y = graph.reshape %ot : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  func.return %y : tensor<1x4x8xf32>
}

// The output stays in heads ([N, H, T, d] is returned): no merge, no fold.
// CHECK-LABEL: func.func @dont_fuse_packed_without_merge
// CHECK: graph.scaled_dot_product_attention %qh, %kh, %vh
// CHECK-NOT: graph.packed_qkv_attention
func.func @dont_fuse_packed_without_merge(%qkv: tensor<1x4x24xf32>) -> tensor<1x2x4x4xf32> {
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q4 = graph.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  func.return %o : tensor<1x2x4x4xf32>
}

// q from one projection, k and v from another (two splits): no single packed operand.
// CHECK-LABEL: func.func @dont_fuse_packed_two_projections
// CHECK: graph.scaled_dot_product_attention %qh, %kh, %vh
// CHECK-NOT: graph.packed_qkv_attention
func.func @dont_fuse_packed_two_projections(%a: tensor<1x4x24xf32>, %b: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  %q, %k0, %v0 = graph.split %a axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q0, %k, %v = graph.split %b axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q4 = graph.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %y = graph.reshape %ot : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  func.return %y : tensor<1x4x8xf32>
}

// The merge transposes with another permutation ([N, H, d, T] is not the heads merged).
// CHECK-LABEL: func.func @dont_fuse_packed_other_merge
// CHECK: graph.scaled_dot_product_attention %qh, %kh, %vh
// CHECK-NOT: graph.packed_qkv_attention
func.func @dont_fuse_packed_other_merge(%qkv: tensor<1x4x24xf32>) -> tensor<1x2x16xf32> {
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %q4 = graph.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 1, 3, 2] : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %y = graph.reshape %ot : tensor<1x2x4x4xf32> -> tensor<1x2x16xf32>
  func.return %y : tensor<1x2x16xf32>
}
