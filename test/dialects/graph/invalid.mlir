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
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.matmul: operands must be rank 2, got lhs [4] and rhs [4, 3]
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

func.func @cross_entropy_logits_rank(%x: tensor<8x10x2xf32>, %y: tensor<8xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: logits must be rank 2 [N, C], got [8, 10, 2]
  %l = graph.cross_entropy %x, %y : (tensor<8x10x2xf32>, tensor<8xi32>) -> tensor<f32>
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
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: labels must have shape [8] (N of logits [8, 10]), got [10]
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
