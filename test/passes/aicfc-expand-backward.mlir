// RUN: aicfc-opt %s -p aicfc-expand-backward | filecheck %s

// A linear layer in PyTorch's layout (y = x w^T + b) under an MSE loss.
// Every line of the result is pinned (CHECK-NEXT): no autodiff.backward is left.
// CHECK-LABEL: func.func @linear(
// CHECK-NEXT:    %[[H:.*]] = graph.matmul %x, %w transpose_b
// CHECK-NEXT:    %[[Y:.*]] = graph.bias_add %[[H]], %b
// CHECK-NEXT:    %[[L:.*]] = graph.mse_loss %[[Y]], %t
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DY:.*]] = autodiff.mse_loss_grad %[[Y]], %t, %[[SEED]]
// CHECK-NEXT:    %[[DB:.*]] = graph.reduce_sum %[[DY]] axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %[[DY]], %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    func.return %[[DW]], %[[DB]]
func.func @linear(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %t: tensor<8x16xf32>) -> (tensor<16x4xf32>, tensor<16xf32>) {
  %h = graph.matmul %x, %w transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %y = graph.bias_add %h, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %l = graph.mse_loss %y, %t : tensor<8x16xf32> -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<f32>, (tensor<16x4xf32>, tensor<16xf32>) -> (tensor<16x4xf32>, tensor<16xf32>)
  func.return %g#0, %g#1 : tensor<16x4xf32>, tensor<16xf32>
}

// gemm_epilogue relu is the composite of its parts (docs/design.md#composite-backward).
// Every line is pinned: the transposes stay flags of the products, no graph.transpose appears.
// CHECK-LABEL: func.func @gemm_epilogue_relu(
// CHECK-NEXT:    %[[Y:.*]] = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
// CHECK-NEXT:    %[[P:.*]] = graph.mul %[[Y]], %r
// CHECK-NEXT:    graph.reduce_sum %[[P]] axes = [0, 1]
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DP:.*]] = graph.broadcast_to %[[SEED]]
// CHECK-NEXT:    %[[DY:.*]] = graph.mul %[[DP]], %r
// CHECK-NEXT:    %[[DZ:.*]] = autodiff.relu_grad %[[DY]], %[[Y]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DX:.*]] = graph.matmul %[[DZ]], %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %[[DZ]], %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.reduce_sum %[[DZ]] axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
// CHECK-NEXT:    func.return %[[DX]], %[[DW]], %[[DB]]
func.func @gemm_epilogue_relu(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %r: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) {
  %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %p = graph.mul %y, %r : tensor<8x16xf32>
  %l = graph.reduce_sum %p axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %g:3 = autodiff.backward %l wrt %x, %w, %b : tensor<f32>, (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>)
  func.return %g#0, %g#1, %g#2 : tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>
}

// gelu takes the saved pre-activation Z from the pre_act result.
// CHECK-LABEL: func.func @gemm_epilogue_gelu_pre_act(
// CHECK:         %[[Y:[^,]*]], %[[Z:[^ ]*]] = graph.gemm_epilogue %x, %w bias %b act = gelu
// CHECK:         %[[DY:.*]] = autodiff.mse_loss_grad %[[Y]]
// CHECK-NEXT:    %[[DZ:.*]] = autodiff.gelu_grad %[[DY]], %[[Z]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %x, %[[DZ]] transpose_a : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[DW]]
func.func @gemm_epilogue_gelu_pre_act(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %t: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y, %z = graph.gemm_epilogue %x, %w bias %b act = gelu : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %l = graph.mse_loss %y, %t : tensor<8x16xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<4x16xf32>) -> (tensor<4x16xf32>)
  func.return %g : tensor<4x16xf32>
}

// Without pre_act, gelu's Z is recomputed by the same GEMM with act none.
// CHECK-LABEL: func.func @gemm_epilogue_gelu_recompute(
// CHECK:         %[[DY:.*]] = autodiff.mse_loss_grad
// CHECK-NEXT:    %[[Z:.*]] = graph.gemm_epilogue %x, %w transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[DZ:.*]] = autodiff.gelu_grad %[[DY]], %[[Z]]
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %[[DZ]], %x transpose_a transpose_b : (tensor<8x16xf32>, tensor<4x8xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    func.return %[[DW]]
func.func @gemm_epilogue_gelu_recompute(%x: tensor<4x8xf32>, %w: tensor<16x4xf32>, %t: tensor<8x16xf32>) -> tensor<16x4xf32> {
  %y = graph.gemm_epilogue %x, %w act = gelu transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %l = graph.mse_loss %y, %t : tensor<8x16xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<16x4xf32>) -> (tensor<16x4xf32>)
  func.return %g : tensor<16x4xf32>
}

// Multi-result: pre_act is used downstream, so its gradient adds into dZ.
// CHECK-LABEL: func.func @multi_result_pre_act_used(
// CHECK:         %[[Y:[^,]*]], %[[Z:[^ ]*]] = graph.gemm_epilogue %x, %w bias %b act = relu
// CHECK:         %[[DS:.*]] = autodiff.mse_loss_grad
// CHECK-NEXT:    %[[DZY:.*]] = autodiff.relu_grad %[[DS]], %[[Y]]
// CHECK-NEXT:    %[[DZ:.*]] = graph.add %[[DZY]], %[[DS]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.reduce_sum %[[DZ]] axes = [0]
// CHECK-NEXT:    func.return %[[DB]]
func.func @multi_result_pre_act_used(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %t: tensor<8x16xf32>) -> tensor<16xf32> {
  %y, %z = graph.gemm_epilogue %x, %w bias %b act = relu : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %s = graph.add %y, %z : tensor<8x16xf32>
  %l = graph.mse_loss %s, %t : tensor<8x16xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %b : tensor<f32>, (tensor<16xf32>) -> (tensor<16xf32>)
  func.return %g : tensor<16xf32>
}

// Fan-out: %x feeds two ops; its gradient is the sum of both partials.
// CHECK-LABEL: func.func @fan_out(
// CHECK:         %[[A:.*]] = graph.tanh %x
// CHECK:         %[[DM:.*]] = autodiff.mse_loss_grad
// CHECK-NEXT:    %[[DA:.*]] = graph.mul %[[DM]], %x
// CHECK-NEXT:    %[[DX1:.*]] = graph.mul %[[DM]], %[[A]]
// CHECK-NEXT:    %[[DX2:.*]] = autodiff.tanh_grad %[[DA]], %[[A]]
// CHECK-NEXT:    %[[DX:.*]] = graph.add %[[DX1]], %[[DX2]] : tensor<4x4xf32>
// CHECK-NEXT:    func.return %[[DX]]
func.func @fan_out(%x: tensor<4x4xf32>, %t: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = graph.tanh %x : tensor<4x4xf32>
  %m = graph.mul %a, %x : tensor<4x4xf32>
  %l = graph.mse_loss %m, %t : tensor<4x4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %x : tensor<f32>, (tensor<4x4xf32>) -> (tensor<4x4xf32>)
  func.return %g : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @cross_entropy(
// CHECK-NEXT:    graph.cross_entropy
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DX:.*]] = autodiff.cross_entropy_grad %x, %y, %[[SEED]] : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
// CHECK-NEXT:    func.return %[[DX]]
func.func @cross_entropy(%x: tensor<8x10xf32>, %y: tensor<8xi32>) -> tensor<8x10xf32> {
  %l = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %g = autodiff.backward %l wrt %x : tensor<f32>, (tensor<8x10xf32>) -> (tensor<8x10xf32>)
  func.return %g : tensor<8x10xf32>
}

// %v does not reach the loss: its gradient is a zero constant.
// CHECK-LABEL: func.func @wrt_off_path(
// CHECK:         %[[DX:.*]] = graph.broadcast_to %{{.*}} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:    %[[DV:.*]] = graph.constant dense<0.000000e+00> : tensor<3x2xf32>
// CHECK-NEXT:    func.return %[[DX]], %[[DV]]
func.func @wrt_off_path(%x: tensor<4xf32>, %v: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<3x2xf32>) {
  %l = graph.reduce_sum %x axes = [0] : tensor<4xf32> -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %x, %v : tensor<f32>, (tensor<4xf32>, tensor<3x2xf32>) -> (tensor<4xf32>, tensor<3x2xf32>)
  func.return %g#0, %g#1 : tensor<4xf32>, tensor<3x2xf32>
}

// CHECK-LABEL: func.func @explicit_seed(
// CHECK-NOT:     graph.constant
// CHECK:         %[[DY:.*]] = graph.broadcast_to %s : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:    %[[DX:.*]] = autodiff.relu_grad %[[DY]], %y
// CHECK-NEXT:    func.return %[[DX]]
func.func @explicit_seed(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  %l = graph.reduce_sum %y axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %x seed %s : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}

// CHECK-LABEL: func.func @wrt_is_loss(
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    func.return %[[SEED]]
func.func @wrt_is_loss(%l: tensor<f32>) -> tensor<f32> {
  %g = autodiff.backward %l wrt %l : tensor<f32>, (tensor<f32>) -> (tensor<f32>)
  func.return %g : tensor<f32>
}

// Only ops between a wrt value and the loss get gradient ops. Every line is pinned:
// no autodiff.tanh_grad.
// CHECK-LABEL: func.func @dont_differentiate_off_path(
// CHECK-NEXT:    %[[A:.*]] = graph.tanh %x
// CHECK-NEXT:    %[[H:.*]] = graph.matmul %[[A]], %w
// CHECK-NEXT:    %[[L:.*]] = graph.mse_loss %[[H]], %t
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DH:.*]] = autodiff.mse_loss_grad %[[H]], %t, %[[SEED]]
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %[[A]], %[[DH]] transpose_a
// CHECK-NEXT:    func.return %[[DW]]
func.func @dont_differentiate_off_path(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %t: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %a = graph.tanh %x : tensor<8x4xf32>
  %h = graph.matmul %a, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %l = graph.mse_loss %h, %t : tensor<8x16xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<4x16xf32>) -> (tensor<4x16xf32>)
  func.return %g : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @sub_reduce_broadcast(
// CHECK:         %[[DR:.*]] = graph.broadcast_to %{{.*}} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:    %[[K:.*]] = graph.reshape %[[DR]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[DD:.*]] = graph.broadcast_to %[[K]] : tensor<4x1xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[M1:.*]] = graph.constant dense<-1.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT:    %[[DBB:.*]] = graph.mul %[[DD]], %[[M1]]
// CHECK-NEXT:    %[[DB:.*]] = graph.reduce_sum %[[DBB]] axes = [0] : tensor<4x3xf32> -> tensor<3xf32>
// CHECK-NEXT:    func.return %[[DD]], %[[DB]]
func.func @sub_reduce_broadcast(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>) {
  %bb = graph.broadcast_to %b : tensor<3xf32> -> tensor<4x3xf32>
  %d = graph.sub %a, %bb : tensor<4x3xf32>
  %r = graph.reduce_sum %d axes = [1] : tensor<4x3xf32> -> tensor<4xf32>
  %l = graph.reduce_sum %r axes = [0] : tensor<4xf32> -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %a, %b : tensor<f32>, (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  func.return %g#0, %g#1 : tensor<4x3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @dropout_softmax(
// CHECK:         %[[S:.*]] = graph.softmax %x axis = 1
// CHECK:         %[[DD:.*]] = autodiff.mse_loss_grad
// CHECK-NEXT:    %[[DS:.*]] = autodiff.dropout_grad %[[DD]], %off p = 1.000000e-01 seed = 7 : tensor<4x5xf32>, tensor<i64>
// CHECK-NEXT:    %[[DX:.*]] = autodiff.softmax_grad %[[DS]], %[[S]] axis = 1 : tensor<4x5xf32>
// CHECK-NEXT:    func.return %[[DX]]
func.func @dropout_softmax(%x: tensor<4x5xf32>, %off: tensor<i64>, %t: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %s = graph.softmax %x axis = 1 : tensor<4x5xf32>
  %d = graph.dropout %s, %off p = 1.000000e-01 seed = 7 : tensor<4x5xf32>, tensor<i64>
  %l = graph.mse_loss %d, %t : tensor<4x5xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %x : tensor<f32>, (tensor<4x5xf32>) -> (tensor<4x5xf32>)
  func.return %g : tensor<4x5xf32>
}
