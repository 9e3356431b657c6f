// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s

// Forward: matmul -> bias_add -> act becomes one graph.gemm_epilogue.

// CHECK-LABEL: func.func @fuse_gemm_bias_relu
func.func @fuse_gemm_bias_relu(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NOT: graph.matmul
  // CHECK-NOT: graph.bias_add
  // CHECK: %y = graph.gemm_epilogue %x, %w bias %b act = relu : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: func.return %y
  // CHECK-NOT: graph.relu
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// gelu: the fused op always exports pre_act (Z, cuBLASLt's GELU_AUX) for the backward.
// CHECK-LABEL: func.func @fuse_gemm_bias_gelu_pre_act
func.func @fuse_gemm_bias_gelu_pre_act(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NOT: graph.matmul
  // CHECK-NOT: graph.bias_add
  // CHECK: %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: func.return %y
  // CHECK-NOT: graph.gelu
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.gelu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @fuse_gemm_bias_only
func.func @fuse_gemm_bias_only(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NOT: graph.matmul
  // CHECK: %z = graph.gemm_epilogue %x, %w bias %b : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: func.return %z
  // CHECK-NOT: graph.bias_add
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  func.return %z : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @fuse_gemm_act_only
func.func @fuse_gemm_act_only(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NOT: graph.matmul
  // CHECK: %y = graph.gemm_epilogue %x, %w act = relu : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: func.return %y
  // CHECK-NOT: graph.relu
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %m : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @fuse_gemm_gelu_no_bias
func.func @fuse_gemm_gelu_no_bias(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %y, %m = graph.gemm_epilogue %x, %w act = gelu : (tensor<8x4xf32>, tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: func.return %y
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %y = graph.gelu %m : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// Y = relu(X^T W^T + b): both transpose flags are kept.
// CHECK-LABEL: func.func @fuse_transpose_flags_kept
func.func @fuse_transpose_flags_kept(%x: tensor<4x8xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: func.return %y
  %m = graph.matmul %x, %w transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// Z has another user: relu may fuse because the fused op re-exports Z as pre_act.
// CHECK-LABEL: func.func @fuse_relu_reexports_pre_act
func.func @fuse_relu_reexports_pre_act(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %y, %z = graph.gemm_epilogue %x, %w bias %b act = relu : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: %t = graph.tanh %z
  // CHECK-NEXT: func.return %y, %t
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  %t = graph.tanh %z : tensor<8x16xf32>
  func.return %y, %t : tensor<8x16xf32>, tensor<8x16xf32>
}

// A user of Z sits between the bias_add and the gelu: the fused op goes before it.
// CHECK-LABEL: func.func @fuse_placed_before_first_reader
func.func @fuse_placed_before_first_reader(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu
  // CHECK-NEXT: %t = graph.tanh %z
  // CHECK-NEXT: func.return %y, %t
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %t = graph.tanh %z : tensor<8x16xf32>
  %y = graph.gelu %z : tensor<8x16xf32>
  func.return %y, %t : tensor<8x16xf32>, tensor<8x16xf32>
}

// The bias is defined between the matmul and the bias_add: still dominates the fused op.
// CHECK-LABEL: func.func @fuse_bias_defined_after_matmul
func.func @fuse_bias_defined_after_matmul(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b0: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %b = graph.relu %b0
  // CHECK-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu
  // CHECK-NEXT: func.return %y
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %b = graph.relu %b0 : tensor<16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// A gemm_epilogue with no bias and act none is a plain product: it may be extended.
// CHECK-LABEL: func.func @fuse_extends_plain_gemm_epilogue
func.func @fuse_extends_plain_gemm_epilogue(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
  // CHECK-NEXT: func.return %y
  %m = graph.gemm_epilogue %x, %w transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// Other float dtypes fuse too (every op of the chain has the same DTYPE_* bit).
// CHECK-LABEL: func.func @fuse_f64_chain
func.func @fuse_f64_chain(%x: tensor<8x4xf64>, %w: tensor<4x16xf64>, %b: tensor<16xf64>) -> tensor<8x16xf64> {
  // CHECK-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu : (tensor<8x4xf64>, tensor<4x16xf64>, tensor<16xf64>) -> tensor<8x16xf64>
  %m = graph.matmul %x, %w : (tensor<8x4xf64>, tensor<4x16xf64>) -> tensor<8x16xf64>
  %z = graph.bias_add %m, %b : (tensor<8x16xf64>, tensor<16xf64>) -> tensor<8x16xf64>
  %y = graph.relu %z : tensor<8x16xf64>
  func.return %y : tensor<8x16xf64>
}

// Backward: act_grad -> reduce_sum axes = [0] becomes one autodiff.epilogue_grad.
// dZ keeps its other users (the dW and dX products) through the fused op's first result.

// CHECK-LABEL: func.func @fuse_backward_relu
func.func @fuse_backward_relu(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>, %x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<8x4xf32>, tensor<16xf32>) {
  // CHECK-NOT: autodiff.relu_grad
  // CHECK: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dw = graph.matmul %x, %dz transpose_a
  // CHECK-NEXT: %dx = graph.matmul %dz, %w transpose_b
  // CHECK-NEXT: func.return %dw, %dx, %db
  // CHECK-NOT: graph.reduce_sum
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %dw = graph.matmul %x, %dz transpose_a : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %dx = graph.matmul %dz, %w transpose_b : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %dw, %dx, %db : tensor<4x16xf32>, tensor<8x4xf32>, tensor<16xf32>
}

// gelu: saved is the pre-activation Z, the same second operand as gelu_grad's.
// CHECK-LABEL: func.func @fuse_backward_gelu
func.func @fuse_backward_gelu(%dy: tensor<8x16xf32>, %z: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // CHECK-NOT: autodiff.gelu_grad
  // CHECK: %dz, %db = autodiff.epilogue_grad %dy, %z act = gelu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: func.return %dz, %db
  // CHECK-NOT: graph.reduce_sum
  %dz = autodiff.gelu_grad %dy, %z : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %dz, %db : tensor<8x16xf32>, tensor<16xf32>
}

// axes = [-2] of a rank-2 tensor is axis 0.
// CHECK-LABEL: func.func @fuse_backward_negative_axis
func.func @fuse_backward_negative_axis(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<16xf32> {
  // CHECK-NEXT: %{{.*}}, %db = autodiff.epilogue_grad %dy, %y act = relu
  // CHECK-NEXT: func.return %db
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [-2] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %db : tensor<16xf32>
}

// One layer's forward and backward in one function: both patterns apply.
// CHECK-LABEL: func.func @fuse_layer_forward_and_backward
func.func @fuse_layer_forward_and_backward(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16x4xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %z act = gelu
  // CHECK-NEXT: %dw = graph.matmul %dz, %x transpose_a
  // CHECK-NEXT: func.return %y, %dw, %db
  %m = graph.matmul %x, %w transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.gelu %z : tensor<8x16xf32>
  %dz = autodiff.gelu_grad %dy, %z : tensor<8x16xf32>
  %dw = graph.matmul %dz, %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %y, %dw, %db : tensor<8x16xf32>, tensor<16x4xf32>, tensor<16xf32>
}

// The next layer's dX product feeding this layer's backward epilogue: matmul ->
// act_grad -> reduce_sum becomes epilogue_grad (one round), then the product and the
// epilogue_grad one autodiff.gemm_epilogue_grad (the next round); dY is never a value.
// CHECK-LABEL: func.func @fuse_dx_product_into_the_backward_epilogue
func.func @fuse_dx_product_into_the_backward_epilogue(%dz2: tensor<8x10xf32>, %w2: tensor<10x16xf32>, %y: tensor<8x16xf32>, %x: tensor<8x4xf32>) -> (tensor<16x4xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %dz, %db = autodiff.gemm_epilogue_grad %dz2, %w2, %y act = relu : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dw = graph.matmul %dz, %x transpose_a
  // CHECK-NEXT: func.return %dw, %db
  %dy = graph.matmul %dz2, %w2 : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %dw = graph.matmul %dz, %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %dw, %db : tensor<16x4xf32>, tensor<16xf32>
}

// The product's transpose flags carry over; gelu's saved value is Z.
// CHECK-LABEL: func.func @fuse_transposed_dx_product_gelu
func.func @fuse_transposed_dx_product_gelu(%dz2: tensor<10x8xf32>, %w2: tensor<16x10xf32>, %z: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %dz, %db = autodiff.gemm_epilogue_grad %dz2, %w2, %z act = gelu transpose_a transpose_b
  // CHECK-NEXT: func.return %dz, %db
  %dy = graph.matmul %dz2, %w2 transpose_a transpose_b : (tensor<10x8xf32>, tensor<16x10xf32>) -> tensor<8x16xf32>
  %dz, %db = autodiff.epilogue_grad %dy, %z act = gelu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return %dz, %db : tensor<8x16xf32>, tensor<16xf32>
}

// dY with another user is a value the fused op would not produce: no fusion.
// CHECK-LABEL: func.func @dont_fuse_dx_product_with_other_users
func.func @dont_fuse_dx_product_with_other_users(%dz2: tensor<8x10xf32>, %w2: tensor<10x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %dy = graph.matmul %dz2, %w2
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
  // CHECK-NOT: autodiff.gemm_epilogue_grad
  %dy = graph.matmul %dz2, %w2 : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return %dy, %dz, %db : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>
}

// The product as epilogue_grad's saved operand (not its gradient): no fusion.
// CHECK-LABEL: func.func @dont_fuse_a_product_read_as_saved
func.func @dont_fuse_a_product_read_as_saved(%dy: tensor<8x16xf32>, %a: tensor<8x10xf32>, %b: tensor<10x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %y = graph.matmul %a, %b
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
  %y = graph.matmul %a, %b : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return %dz, %db : tensor<8x16xf32>, tensor<16xf32>
}

// silu (an activation added by one row of the activation table): Linear + SiLU fuses into
// our GEMM epilogue, exporting pre_act as gelu does (silu_grad reads the input), and its
// backward chain into epilogue_grad act = silu.
// CHECK-LABEL: func.func @fuse_layer_silu_forward_and_backward
func.func @fuse_layer_silu_forward_and_backward(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16x4xf32>, tensor<16xf32>) {
  // CHECK-NEXT: %y, %z = graph.gemm_epilogue %x, %w bias %b act = silu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %z act = silu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dw = graph.matmul %dz, %x transpose_a
  // CHECK-NEXT: func.return %y, %dw, %db
  %m = graph.matmul %x, %w transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.silu %z : tensor<8x16xf32>
  %dz = autodiff.silu_grad %dy, %z : tensor<8x16xf32>
  %dw = graph.matmul %dz, %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %y, %dw, %db : tensor<8x16xf32>, tensor<16x4xf32>, tensor<16xf32>
}

// ---------------------------------------------------------------------------
// Negative cases. A dtype or layout mismatch inside a chain cannot be written:
// the verifiers give matmul's result lhs's element type, bias_add/relu/gelu/
// reduce_sum their input's, and value tensors are always dense row-major
// (LAYOUT_CONTIG), so those checks of the matcher have no lit case.
// ---------------------------------------------------------------------------

// The matmul result is also returned: it is not single-use and gemm_epilogue
// does not re-export the raw product when a bias follows.
// CHECK-LABEL: func.func @dont_fuse_multi_use
func.func @dont_fuse_multi_use(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %m = graph.matmul
  // CHECK-NEXT: %z = graph.bias_add %m, %b
  // CHECK-NEXT: %y = graph.relu %z
  // CHECK-NOT: graph.gemm_epilogue
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y, %m : tensor<8x16xf32>, tensor<8x16xf32>
}

// tanh has no epilogue form (no cuBLASLt TANH epilogue): nothing fuses.
// CHECK-LABEL: func.func @dont_fuse_tanh
func.func @dont_fuse_tanh(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %m = graph.matmul
  // CHECK-NEXT: %y = graph.tanh %m
  // CHECK-NOT: graph.gemm_epilogue
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %y = graph.tanh %m : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// With a bias in between, matmul + bias_add fuse and the tanh stays.
// CHECK-LABEL: func.func @fuse_gemm_bias_stops_at_tanh
func.func @fuse_gemm_bias_stops_at_tanh(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %z = graph.gemm_epilogue %x, %w bias %b :
  // CHECK-NEXT: %y = graph.tanh %z
  // CHECK-NEXT: func.return %y
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.tanh %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// A lone matmul is not worth an epilogue op.
// CHECK-LABEL: func.func @dont_fuse_lone_matmul
func.func @dont_fuse_lone_matmul(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %m = graph.matmul
  // CHECK-NOT: graph.gemm_epilogue
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  func.return %m : tensor<8x16xf32>
}

// The bias_add reads matmul(...) + c, not the product itself.
// CHECK-LABEL: func.func @dont_fuse_bias_add_not_consuming_matmul
func.func @dont_fuse_bias_add_not_consuming_matmul(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %c: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %m = graph.matmul
  // CHECK-NEXT: %s = graph.add %m, %c
  // CHECK-NEXT: %z = graph.bias_add %s, %b
  // CHECK-NEXT: %y = graph.relu %z
  // CHECK-NOT: graph.gemm_epilogue
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %s = graph.add %m, %c : tensor<8x16xf32>
  %z = graph.bias_add %s, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// relu(relu(A B)) is not a new epilogue: the fused op already has act relu.
// CHECK-LABEL: func.func @dont_fuse_into_fused_activation
func.func @dont_fuse_into_fused_activation(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %h = graph.gemm_epilogue %x, %w act = relu
  // CHECK-NEXT: %y = graph.relu %h
  // CHECK-NEXT: func.return %y
  %h = graph.gemm_epilogue %x, %w act = relu : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %h : tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// A second bias on a gemm_epilogue that already has one is not fused.
// CHECK-LABEL: func.func @dont_fuse_second_bias
func.func @dont_fuse_second_bias(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %h = graph.gemm_epilogue %x, %w bias %b :
  // CHECK-NEXT: %z = graph.bias_add %h, %c
  // CHECK-NEXT: func.return %z
  %h = graph.gemm_epilogue %x, %w bias %b : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %h, %c : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  func.return %z : tensor<8x16xf32>
}

// reduce_sum over axis 1 is not the bias gradient (a sum over rows).
// CHECK-LABEL: func.func @dont_fuse_reduce_other_axis
func.func @dont_fuse_reduce_other_axis(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8xf32> {
  // CHECK-NEXT: %dz = autodiff.relu_grad %dy, %y
  // CHECK-NEXT: %s = graph.reduce_sum %dz axes = [1]
  // CHECK-NOT: autodiff.epilogue_grad
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %s = graph.reduce_sum %dz axes = [1] : tensor<8x16xf32> -> tensor<8xf32>
  func.return %s : tensor<8xf32>
}

// CHECK-LABEL: func.func @dont_fuse_reduce_keepdims
func.func @dont_fuse_reduce_keepdims(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<1x16xf32> {
  // CHECK-NEXT: %dz = autodiff.relu_grad
  // CHECK-NEXT: %s = graph.reduce_sum %dz axes = [0] keepdims
  // CHECK-NOT: autodiff.epilogue_grad
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %s = graph.reduce_sum %dz axes = [0] keepdims : tensor<8x16xf32> -> tensor<1x16xf32>
  func.return %s : tensor<1x16xf32>
}

// CHECK-LABEL: func.func @dont_fuse_reduce_all_axes
func.func @dont_fuse_reduce_all_axes(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<f32> {
  // CHECK-NEXT: %dz = autodiff.relu_grad
  // CHECK-NEXT: %s = graph.reduce_sum %dz axes = [0, 1]
  // CHECK-NOT: autodiff.epilogue_grad
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %s = graph.reduce_sum %dz axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  func.return %s : tensor<f32>
}

// tanh_grad has no epilogue form.
// CHECK-LABEL: func.func @dont_fuse_tanh_grad
func.func @dont_fuse_tanh_grad(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<16xf32> {
  // CHECK-NEXT: %dz = autodiff.tanh_grad %dy, %y
  // CHECK-NEXT: %db = graph.reduce_sum %dz axes = [0]
  // CHECK-NOT: autodiff.epilogue_grad
  %dz = autodiff.tanh_grad %dy, %y : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %db : tensor<16xf32>
}

// A sum over axis 0 alone of a rank-3 gradient is not its bias gradient (that sums every
// leading axis, [0, 1]).
// CHECK-LABEL: func.func @dont_fuse_backward_rank3
func.func @dont_fuse_backward_rank3(%dy: tensor<2x8x16xf32>, %y: tensor<2x8x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %dz = autodiff.relu_grad
  // CHECK-NEXT: %s = graph.reduce_sum %dz axes = [0]
  // CHECK-NOT: autodiff.epilogue_grad
  %dz = autodiff.relu_grad %dy, %y : tensor<2x8x16xf32>
  %s = graph.reduce_sum %dz axes = [0] : tensor<2x8x16xf32> -> tensor<8x16xf32>
  func.return %s : tensor<8x16xf32>
}
