// One case per verifier message of the graph dialect: each checks the message
// (which names the op and what mismatches) and where it points. Every
// `raise VerifyException` in dialects/graph/ and in the shared helpers of
// dialects/tensors.py must be exercised by a case here or in another dialect's
// invalid.mlir (test/python/test_registry.py says which one is missing).
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @add_bool(%a: tensor<4xi1>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.add: operands must be float or i32/i64 tensors, got i1
  %c = graph.add %a, %a : tensor<4xi1>
  func.return
}

// -----

func.func @constant_result_type() {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.constant: result type is tensor<8xf32>, expected tensor<4xf32>
  %c = "graph.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<8xf32>
  func.return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x3xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: operands must have rank >= 2 ([..., M, K] and [..., K, N]), got lhs [4] and rhs [4, 3]
  %c = graph.matmul %a, %b : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @matmul_contraction(%a: tensor<4x8xf32>, %b: tensor<16x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: contraction dimensions differ: lhs [4, 8] has K=8, rhs [16, 4] (transposed) has K=4
  %c = graph.matmul %a, %b transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<4x16xf32>
  func.return
}

// -----

func.func @matmul_dtype(%a: tensor<4x8xf32>, %b: tensor<8x16xf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: rhs has element type f16 but lhs has f32; they must match
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf16>) -> tensor<4x16xf32>
  func.return
}

// -----

func.func @matmul_result_shape(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: result type is tensor<16x4xf32>, expected tensor<4x16xf32>
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<16x4xf32>
  func.return
}

// -----

func.func @gemm_epilogue_bias_shape(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: bias must have shape [16] (N of the [8, 16] result), got [8]
  %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  func.return
}

// -----

func.func @gemm_epilogue_pre_act_without_act(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: the pre_act result needs an activation (act relu, gelu or silu)
  %y, %z = graph.gemm_epilogue %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_act_without_epilogue_form(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: act tanh has no epilogue form (expected none, relu, gelu or silu)
  %y = graph.gemm_epilogue %x, %w act = tanh : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  func.return
}

// -----

func.func @bias_add_shape(%x: tensor<8x16xf32>, %b: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.bias_add: bias must have shape [16] (the last dim of input [8, 16]), got [8]
  %y = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  func.return
}

// -----

func.func @relu_int(%x: tensor<8xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.relu: operand must have a float element type (f16, bf16, f32, f64), got i32
  %y = graph.relu %x : tensor<8xi32>
  func.return
}

// -----

func.func @relu_dynamic(%x: tensor<?x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.relu: operand must be a statically shaped tensor, got tensor<?x8xf32>
  %y = graph.relu %x : tensor<?x8xf32>
  func.return
}

// -----

func.func @dropout_p(%x: tensor<8xf32>, %off: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.dropout: p must be in [0, 1), got 1.0
  %y = graph.dropout %x, %off p = 1.0 seed = 7 : tensor<8xf32>, tensor<i64>
  func.return
}

// -----

func.func @dropout_offset(%x: tensor<8xf32>, %off: tensor<2xi64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.dropout: offset must be a scalar tensor<i64>, got tensor<2xi64>
  %y = graph.dropout %x, %off p = 0.1 seed = 7 : tensor<8xf32>, tensor<2xi64>
  func.return
}

// -----

func.func @reshape_numel(%x: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.reshape: cannot reshape [8, 16] (128 elements) to [100] (100 elements)
  %y = graph.reshape %x : tensor<8x16xf32> -> tensor<100xf32>
  func.return
}

// -----

func.func @transpose_perm(%x: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.transpose: perm [0, 0] is not a permutation of the 2 dims of [8, 16]
  %y = graph.transpose %x perm = [0, 0] : tensor<8x16xf32> -> tensor<8x8xf32>
  func.return
}

// -----

func.func @broadcast_to_rank(%x: tensor<2x8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.broadcast_to: cannot broadcast rank 3 [2, 8, 16] to lower rank 2 [8, 16]
  %y = graph.broadcast_to %x : tensor<2x8x16xf32> -> tensor<8x16xf32>
  func.return
}

// -----

func.func @broadcast_to_dim(%x: tensor<3xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.broadcast_to: cannot broadcast [3] to [8, 16]: dim 0 is 3, target dim 1 is 16
  %y = graph.broadcast_to %x : tensor<3xf32> -> tensor<8x16xf32>
  func.return
}

// -----

func.func @softmax_axis(%x: tensor<8x10xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.softmax: axis 2 is out of range for rank 2
  %y = graph.softmax %x axis = 2 : tensor<8x10xf32>
  func.return
}

// -----

func.func @reduce_sum_repeated_axes(%x: tensor<8x10xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.reduce_sum: axes [1, -1] repeat a dimension
  %y = graph.reduce_sum %x axes = [1, -1] : tensor<8x10xf32> -> tensor<8xf32>
  func.return
}

// -----

func.func @cross_entropy_logits_rank(%x: tensor<f32>, %y: tensor<i32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: logits must have rank >= 1 ([..., C]), got []
  %l = graph.cross_entropy %x, %y : (tensor<f32>, tensor<i32>) -> tensor<f32>
  func.return
}

// -----

func.func @cross_entropy_label_dtype(%x: tensor<8x10xf32>, %y: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: labels must be i32 or i64, got f32
  %l = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xf32>) -> tensor<f32>
  func.return
}

// -----

func.func @cross_entropy_label_shape(%x: tensor<8x10xf32>, %y: tensor<10xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: labels must have shape [8] (the leading dims of logits [8, 10]), got [10]
  %l = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<10xi32>) -> tensor<f32>
  func.return
}

// -----

func.func @reduce_sum_bool(%x: tensor<4xi1>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.reduce_sum: input must have a float or i32/i64 element type, got i1
  %s = graph.reduce_sum %x axes = [0] : tensor<4xi1> -> tensor<i1>
  func.return
}

// -----

func.func @cross_entropy_empty_batch(%x: tensor<0x10xf32>, %y: tensor<0xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: logits must have at least one element (a mean over none is undefined), got [0, 10]
  %l = graph.cross_entropy %x, %y : (tensor<0x10xf32>, tensor<0xi32>) -> tensor<f32>
  func.return
}

// -----

func.func @matmul_batch_broadcast(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: batch dims [2] of lhs and [3] of rhs do not broadcast: dim 0 of the batch is 2 and 3
  %c = "graph.matmul"(%a, %b) : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  func.return
}

// -----

func.func @gemm_epilogue_batched_rhs(%x: tensor<2x8x4xf32>, %w: tensor<2x4x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: rhs must be a matrix [K, N] or [N, K] (a layer's weight), got [2, 4, 16]
  %y = graph.gemm_epilogue %x, %w : (tensor<2x8x4xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
  func.return
}

// -----

func.func @gemm_epilogue_transpose_a_batched(%x: tensor<2x4x8xf32>, %w: tensor<4x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: transpose_a needs a rank-2 lhs (the leading dims of [2, 4, 8] fold into M only untransposed)
  %y = graph.gemm_epilogue %x, %w transpose_a : (tensor<2x4x8xf32>, tensor<4x16xf32>) -> tensor<2x8x16xf32>
  func.return
}

// -----

func.func @scale_factor_inf(%x: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scale: factor must be finite, got inf
  %y = graph.scale %x factor = 0x7FF0000000000000 : tensor<8xf32>
  func.return
}

// -----

func.func @split_sizes(%x: tensor<2x12xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.split: sizes [4, 4] must be non-negative and add up to 12 (dim 1 of [2, 12])
  %a, %b = graph.split %x axis = 1 sizes = [4, 4] : tensor<2x12xf32> -> (tensor<2x4xf32>, tensor<2x4xf32>)
  func.return
}

// -----

func.func @split_results(%x: tensor<2x12xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.split: 2 sizes but 1 results
  %a = "graph.split"(%x) <{axis = 1 : i64, sizes = array<i64: 4, 8>}> : (tensor<2x12xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

func.func @concat_empty() {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.concat: needs at least one input
  %y = "graph.concat"() <{axis = 0 : i64}> : () -> tensor<2xf32>
  func.return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.concat: input #1 [4, 5] must match input #0 [2, 3] in every dim but 1
  %y = graph.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

func.func @embedding_ids_float(%ids: tensor<2x8xf32>, %w: tensor<65x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.embedding: ids must be integer (i32 or i64), got f32
  %e = graph.embedding %ids, %w : (tensor<2x8xf32>, tensor<65x16xf32>) -> tensor<2x8x16xf32>
  func.return
}

// -----

func.func @embedding_table_rank(%ids: tensor<2x8xi32>, %w: tensor<65xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.embedding: weight must be a table [V, D], got [65]
  %e = "graph.embedding"(%ids, %w) : (tensor<2x8xi32>, tensor<65xf32>) -> tensor<2x8x65xf32>
  func.return
}

// -----

func.func @layer_norm_empty(%x: tensor<8x0xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: input must have a non-empty last dim to normalise over, got [8, 0]
  %y, %m, %r = graph.layer_norm %x eps = 1.0e-05 : tensor<8x0xf32> -> (tensor<8x0xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @layer_norm_bias_without_weight(%x: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: a bias needs a weight (torch.nn.LayerNorm has no bias-only form; pass a weight of ones)
  %y, %m, %r = "graph.layer_norm"(%x, %b) <{eps = 1.0e-05 : f64, operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<8x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @layer_norm_weight_shape(%x: tensor<8x16xf32>, %w: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: weight must have shape [16] (the last dim of input [8, 16]), got [8]
  %y, %m, %r = graph.layer_norm %x weight %w eps = 1.0e-05 : tensor<8x16xf32>, tensor<8xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @layer_norm_eps(%x: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: eps must be finite and >= 0, got -1.0
  %y, %m, %r = graph.layer_norm %x eps = -1.0 : tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @add_layer_norm_residual(%x: tensor<8x16xf32>, %r: tensor<4x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.add_layer_norm: residual tensor<4x16xf32> and input tensor<8x16xf32> must have one type
  %s, %y, %m, %rs = graph.add_layer_norm %x, %r eps = 1.0e-05 : tensor<8x16xf32>, tensor<4x16xf32> -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @causal_mask_rank(%x: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.causal_mask: input must have rank >= 2 ([..., T, S]), got [8]
  %y = graph.causal_mask %x : tensor<8xf32>
  func.return
}

// -----

func.func @causal_mask_nan(%x: tensor<8x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.causal_mask: fill must not be nan
  %y = graph.causal_mask %x fill = 0x7FF8000000000000 : tensor<8x8xf32>
  func.return
}

// -----

func.func @attention_rank(%q: tensor<2x8x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: q, k and v must be rank 4 [B, H, T, d], got [2, 8, 4], [2, 8, 4] and [2, 8, 4]
  %o, %l = "graph.scaled_dot_product_attention"(%q, %q, %q) <{scale = 0.5 : f64}> : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
  func.return
}

// -----

func.func @attention_kv(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x6x4xf32>, %v: tensor<1x2x6x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: k and v must be [B, H, S, d] = [1, 2, S, 4] (B, H and d of q [1, 2, 8, 4]), got k [1, 2, 6, 4] and v [1, 2, 6, 8]
  %o, %l = graph.scaled_dot_product_attention %q, %k, %v scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
  func.return
}

// -----

func.func @attention_dropout_p(%q: tensor<1x2x8x4xf32>, %off: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: dropout_p must be in [0, 1), got 1.0
  %o, %l = graph.scaled_dot_product_attention %q, %q, %q offset %off scale = 0.5 dropout_p = 1.0 seed = 1 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<i64>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
  func.return
}

// -----

func.func @attention_offset_without_dropout(%q: tensor<1x2x8x4xf32>, %off: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: the offset operand is needed exactly when dropout_p > 0 (dropout_p = 0.0)
  %o, %l = graph.scaled_dot_product_attention %q, %q, %q offset %off scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<i64>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
  func.return
}

// -----

func.func @attention_seed_without_dropout(%q: tensor<1x2x8x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: a seed without dropout_p has no effect
  %o, %l = graph.scaled_dot_product_attention %q, %q, %q scale = 0.5 seed = 3 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
  func.return
}

// -----

func.func @packed_attention_width(%qkv: tensor<2x8x50xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.packed_qkv_attention: qkv must be [N, T, 3 D] with D a multiple of heads = 2 (q, k, v of 2 heads each), got [2, 8, 50]
  %o, %l = "graph.packed_qkv_attention"(%qkv) <{num_heads = 2 : i64, scale = 0.5 : f64}> : (tensor<2x8x50xf32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
  func.return
}

// -----

func.func @packed_attention_heads(%qkv: tensor<2x8x48xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.packed_qkv_attention: heads must be >= 1, got 0
  %o, %l = "graph.packed_qkv_attention"(%qkv) <{num_heads = 0 : i64, scale = 0.5 : f64}> : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x0x8xf32>)
  func.return
}

// -----

func.func @packed_attention_lse(%qkv: tensor<2x8x48xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.packed_qkv_attention: result type is tensor<2x8x2xf32>, expected tensor<2x2x8xf32>
  %o, %l = "graph.packed_qkv_attention"(%qkv) <{num_heads = 2 : i64, scale = 0.5 : f64}> : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x2xf32>)
  func.return
}

// -----

func.func @packed_attention_lse_dtype(%qkv: tensor<2x8x48xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.packed_qkv_attention: result #1 has element type f16; expected bf16 (the operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation written unrounded)
  %o, %l = "graph.packed_qkv_attention"(%qkv) <{num_heads = 2 : i64, scale = 0.5 : f64}> : (tensor<2x8x48xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x2x8xf16>)
  func.return
}

// -----

func.func @attention_scale(%q: tensor<1x2x8x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.scaled_dot_product_attention: scale must be finite, got inf
  %o, %l = graph.scaled_dot_product_attention %q, %q, %q causal scale = 0x7FF0000000000000 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
  func.return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cast: result shape [8, 4] differs from the input shape [4, 8]; a cast changes only the element type
  %y = "graph.cast"(%x) : (tensor<4x8xf32>) -> tensor<8x4xbf16>
  func.return
}

// -----

func.func @cast_int(%x: tensor<4x8xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cast: input must have a float element type (f16, bf16, f32, f64), got i32
  %y = graph.cast %x : tensor<4x8xi32> to tensor<4x8xbf16>
  func.return
}

// -----

// A wide result (dialects/wide_results.py): f32 over bf16/f16 operands only.
func.func @matmul_wide_from_f32(%a: tensor<4x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: result #0 has element type f64; expected f32 (the operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation written unrounded)
  %c = graph.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf64>
  func.return
}

// -----

func.func @matmul_bf16_to_f16(%a: tensor<4x4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: result #0 has element type f16; expected bf16 (the operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation written unrounded)
  %c = graph.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xf16>
  func.return
}

// -----

// A narrow result (dialects/wide_results.py): a layer norm's y in bf16/f16 over f32 only.
func.func @layer_norm_narrow_from_bf16(%x: tensor<8x16xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: result #0 has element type f16; expected bf16 (the operands' dtype), or bf16/f16 when the operands are f32 (the float32 result rounded to nearest even as it is stored)
  %y, %m, %r = graph.layer_norm %x eps = 1.0e-05 : tensor<8x16xbf16> -> (tensor<8x16xf16>, tensor<8xbf16>, tensor<8xbf16>)
  func.return
}

// -----

func.func @add_layer_norm_narrow_to_f64(%x: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.add_layer_norm: result #1 has element type f64; expected f32 (the operands' dtype), or bf16/f16 when the operands are f32 (the float32 result rounded to nearest even as it is stored)
  %s, %y, %m, %r = graph.add_layer_norm %x, %x eps = 1.0e-05 : tensor<8x16xf32>, tensor<8x16xf32> -> (tensor<8x16xf32>, tensor<8x16xf64>, tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_wide_low_bias(%a: tensor<4x4xbf16>, %b: tensor<4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.gemm_epilogue: bias has element type bf16 but result has f32; they must match
  %c = graph.gemm_epilogue %a, %a bias %b : (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4xbf16>) -> tensor<4x4xf32>
  func.return
}

// -----

func.func @reduce_sum_wide_from_i32(%a: tensor<4x4xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.reduce_sum: result #0 has element type f32; expected i32 (the operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation written unrounded)
  %c = graph.reduce_sum %a axes = [0] : tensor<4x4xi32> -> tensor<4xf32>
  func.return
}
