// RUN: aicfc-opt %s -p canonicalize | filecheck %s
// RUN: aicfc-opt %s -p canonicalize,aicfc-fuse | filecheck %s --check-prefix=FUSE

// transpose(transpose(x, p), q) with p[q[i]] == i is x.
// CHECK-LABEL: func.func @transpose_of_transpose_cancels
// CHECK-NOT:     graph.transpose
// CHECK:         func.return %x
func.func @transpose_of_transpose_cancels(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = graph.transpose %0 perm = [1, 2, 0] : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
  func.return %1 : tensor<2x3x4xf32>
}

// Otherwise the two become one transpose with r[i] = p[q[i]]: [2, 0, 1] then [0, 2, 1] is [2, 1, 0].
// CHECK-LABEL: func.func @transpose_of_transpose_composes
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %x perm = {{\[}}2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT:    func.return %[[T]]
func.func @transpose_of_transpose_composes(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = graph.transpose %0 perm = [0, 2, 1] : tensor<4x2x3xf32> -> tensor<4x3x2xf32>
  func.return %1 : tensor<4x3x2xf32>
}

// The inner transpose stays when something else reads it.
// CHECK-LABEL: func.func @transpose_of_transpose_keeps_shared_inner
// CHECK-NEXT:    %[[A:.*]] = graph.transpose %x perm = {{\[}}1, 0]
// CHECK-NEXT:    func.return %x, %[[A]]
func.func @transpose_of_transpose_keeps_shared_inner(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>) {
  %0 = graph.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = graph.transpose %0 perm = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  func.return %1, %0 : tensor<2x3xf32>, tensor<3x2xf32>
}

// CHECK-LABEL: func.func @identity_transpose
// CHECK-NEXT:    func.return %x
func.func @identity_transpose(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.transpose %x perm = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @dont_remove_single_transpose
// CHECK-NEXT:    graph.transpose %x perm = {{\[}}1, 0]
func.func @dont_remove_single_transpose(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = graph.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  func.return %0 : tensor<3x2xf32>
}

// A square transpose keeps the type but is no identity.
// CHECK-LABEL: func.func @dont_remove_square_transpose
// CHECK-NEXT:    graph.transpose %x perm = {{\[}}1, 0]
func.func @dont_remove_square_transpose(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = graph.transpose %x perm = [1, 0] : tensor<3x3xf32> -> tensor<3x3xf32>
  func.return %0 : tensor<3x3xf32>
}

// CHECK-LABEL: func.func @reshape_same_shape
// CHECK-NEXT:    func.return %x
func.func @reshape_same_shape(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %0 = graph.reshape %x : tensor<6x4xf32> -> tensor<6x4xf32>
  func.return %0 : tensor<6x4xf32>
}

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %0 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = graph.reshape %0 : tensor<24xf32> -> tensor<4x6xf32>
  func.return %1 : tensor<4x6xf32>
}

// A round trip through another shape is no reshape at all.
// CHECK-LABEL: func.func @reshape_of_reshape_back_to_source
// CHECK-NOT:     graph.reshape
// CHECK:         func.return %x
func.func @reshape_of_reshape_back_to_source(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = graph.reshape %0 : tensor<6x4xf32> -> tensor<2x3x4xf32>
  func.return %1 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @dont_remove_reshape_that_changes_shape
// CHECK-NEXT:    graph.reshape %x : tensor<6x4xf32> -> tensor<24xf32>
func.func @dont_remove_reshape_that_changes_shape(%x: tensor<6x4xf32>) -> tensor<24xf32> {
  %0 = graph.reshape %x : tensor<6x4xf32> -> tensor<24xf32>
  func.return %0 : tensor<24xf32>
}

// CHECK-LABEL: func.func @broadcast_same_shape
// CHECK-NEXT:    func.return %x
func.func @broadcast_same_shape(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %0 = graph.broadcast_to %x : tensor<6x4xf32> -> tensor<6x4xf32>
  func.return %0 : tensor<6x4xf32>
}

// add(matmul(x, w), broadcast_to(b)) is a bias_add, with the broadcast on either side.
// CHECK-LABEL: func.func @broadcast_add_is_bias_add
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %x, %w transpose_b
// CHECK-NEXT:    %[[B:.*]] = graph.bias_add %[[M]], %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT:    func.return %[[B]]
func.func @broadcast_add_is_bias_add(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<6x5xf32> {
  %m = graph.matmul %x, %w transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %bb = graph.broadcast_to %b : tensor<5xf32> -> tensor<6x5xf32>
  %y = graph.add %m, %bb : tensor<6x5xf32>
  func.return %y : tensor<6x5xf32>
}

// CHECK-LABEL: func.func @broadcast_add_is_bias_add_swapped
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %x, %w transpose_b
// CHECK-NEXT:    %[[B:.*]] = graph.bias_add %[[M]], %b
// CHECK-NEXT:    func.return %[[B]]
func.func @broadcast_add_is_bias_add_swapped(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<6x5xf32> {
  %m = graph.matmul %x, %w transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %bb = graph.broadcast_to %b : tensor<5xf32> -> tensor<6x5xf32>
  %y = graph.add %bb, %m : tensor<6x5xf32>
  func.return %y : tensor<6x5xf32>
}

// A [1, N] row broadcast is not a bias_add operand (bias_add takes [N]).
// CHECK-LABEL: func.func @dont_bias_add_from_row_broadcast
// CHECK:         graph.broadcast_to
// CHECK-NEXT:    graph.add
func.func @dont_bias_add_from_row_broadcast(%x: tensor<6x5xf32>, %b: tensor<1x5xf32>) -> tensor<6x5xf32> {
  %bb = graph.broadcast_to %b : tensor<1x5xf32> -> tensor<6x5xf32>
  %y = graph.add %x, %bb : tensor<6x5xf32>
  func.return %y : tensor<6x5xf32>
}

// bias_add is a float op: an integer broadcast add stays.
// CHECK-LABEL: func.func @dont_bias_add_integer
// CHECK:         graph.broadcast_to
// CHECK-NEXT:    graph.add
func.func @dont_bias_add_integer(%x: tensor<6x5xi32>, %b: tensor<5xi32>) -> tensor<6x5xi32> {
  %bb = graph.broadcast_to %b : tensor<5xi32> -> tensor<6x5xi32>
  %y = graph.add %x, %bb : tensor<6x5xi32>
  func.return %y : tensor<6x5xi32>
}

// CHECK-LABEL: func.func @drop_unused_pre_act
// CHECK-NEXT:    %[[Y:.*]] = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @drop_unused_pre_act(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<6x5xf32> {
  %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>)
  func.return %y : tensor<6x5xf32>
}

// CHECK-LABEL: func.func @dont_drop_used_pre_act
// CHECK-NEXT:    %{{.*}}, %{{.*}} = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>)
func.func @dont_drop_used_pre_act(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>) {
  %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>)
  func.return %y, %z : tensor<6x5xf32>, tensor<6x5xf32>
}

// The chain: canonicalize turns the broadcast add into a bias_add, aicfc-fuse makes one epilogue.
// FUSE-LABEL: func.func @broadcast_add_relu_fuses
// FUSE-NEXT:    %[[Y:.*]] = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// FUSE-NEXT:    func.return %[[Y]]
func.func @broadcast_add_relu_fuses(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<6x5xf32> {
  %m = graph.matmul %x, %w transpose_b : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %bb = graph.broadcast_to %b : tensor<5xf32> -> tensor<6x5xf32>
  %y = graph.add %bb, %m : tensor<6x5xf32>
  %r = graph.relu %y : tensor<6x5xf32>
  func.return %r : tensor<6x5xf32>
}

// A product by a splat constant is a scale (attention's 1/sqrt(d), a VJP's -1), either order.
// CHECK-LABEL: func.func @mul_by_splat_is_scale
// CHECK-NEXT:    %[[A:.*]] = graph.scale %x factor = 1.250000e-01 : tensor<2x4x8x8xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.scale %x factor = -1.000000e+00 : tensor<2x4x8x8xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @mul_by_splat_is_scale(%x: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = graph.constant dense<0.125> : tensor<2x4x8x8xf32>
  %a = graph.mul %x, %c : tensor<2x4x8x8xf32>
  %m = graph.constant dense<-1.0> : tensor<2x4x8x8xf32>
  %b = graph.mul %m, %x : tensor<2x4x8x8xf32>
  func.return %a, %b : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// CHECK-LABEL: func.func @dont_scale_by_a_non_splat_constant
// CHECK:         graph.mul
func.func @dont_scale_by_a_non_splat_constant(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %y = graph.mul %x, %c : tensor<2xf32>
  func.return %y : tensor<2xf32>
}

// graph.scale takes floats: an integer product stays.
// CHECK-LABEL: func.func @dont_scale_integers
// CHECK:         graph.mul
func.func @dont_scale_integers(%x: tensor<3xi32>) -> tensor<3xi32> {
  %c = graph.constant dense<2> : tensor<3xi32>
  %y = graph.mul %x, %c : tensor<3xi32>
  func.return %y : tensor<3xi32>
}

// CHECK-LABEL: func.func @scale_by_one
// CHECK-NEXT:    func.return %x
func.func @scale_by_one(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = graph.scale %x factor = 1.0 : tensor<3xf32>
  func.return %y : tensor<3xf32>
}
