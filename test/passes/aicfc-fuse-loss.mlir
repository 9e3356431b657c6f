// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fuse{patterns=forward}' | filecheck %s --check-prefix=FWD

// A loss and its gradient read the same logits and labels: aicfc-fuse makes them one
// autodiff.cross_entropy_with_grad, with the bias gradient (a column sum of the
// gradient) as its third result when that reduce_sum follows. The pattern is in the
// backward group.

// CHECK-LABEL: func.func @fuse_loss_grad_and_bias_grad
// FWD-LABEL: func.func @fuse_loss_grad_and_bias_grad
func.func @fuse_loss_grad_and_bias_grad(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %h: tensor<8x4xf32>) -> (tensor<f32>, tensor<10x4xf32>, tensor<10xf32>) {
  // CHECK-NEXT: %dl = graph.constant
  // CHECK-NEXT: %loss, %dx, %db = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<10xf32>)
  // CHECK-NEXT: %dw = graph.matmul %dx, %h transpose_a
  // CHECK-NEXT: func.return %loss, %dw, %db
  // FWD-NEXT: %loss = graph.cross_entropy
  // FWD-NEXT: %dl = graph.constant
  // FWD-NEXT: %dx = autodiff.cross_entropy_grad
  %loss = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %dl = graph.constant dense<1.000000e+00> : tensor<f32>
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %dw = graph.matmul %dx, %h transpose_a : (tensor<8x10xf32>, tensor<8x4xf32>) -> tensor<10x4xf32>
  %db = graph.reduce_sum %dx axes = [0] : tensor<8x10xf32> -> tensor<10xf32>
  func.return %loss, %dw, %db : tensor<f32>, tensor<10x4xf32>, tensor<10xf32>
}

// Without a bias-gradient reduction the fused op has two results.
// CHECK-LABEL: func.func @fuse_loss_and_grad
func.func @fuse_loss_and_grad(%x: tensor<8x10xf32>, %y: tensor<8xi64>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>) {
  // CHECK-NEXT: %loss, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  // CHECK-NEXT: func.return %loss, %dx
  %loss = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x10xf32>
  func.return %loss, %dx : tensor<f32>, tensor<8x10xf32>
}

// A sum over axis 1 is not a bias gradient: the loss and gradient fuse, the reduce stays.
// CHECK-LABEL: func.func @fuse_loss_and_grad_not_a_row_sum
func.func @fuse_loss_and_grad_not_a_row_sum(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8xf32>) {
  // CHECK-NEXT: %loss, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl
  // CHECK-NEXT: %s = graph.reduce_sum %dx axes = [1]
  %loss = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %s = graph.reduce_sum %dx axes = [1] : tensor<8x10xf32> -> tensor<8xf32>
  func.return %loss, %s : tensor<f32>, tensor<8xf32>
}

// A loss whose gradient is not taken stays as it is.
// CHECK-LABEL: func.func @dont_fuse_loss_without_grad
func.func @dont_fuse_loss_without_grad(%x: tensor<8x10xf32>, %y: tensor<8xi32>) -> tensor<f32> {
  // CHECK-NEXT: %loss = graph.cross_entropy %x, %y
  // CHECK-NEXT: func.return %loss
  %loss = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  func.return %loss : tensor<f32>
}

// The gradient of other logits is not this loss's gradient.
// CHECK-LABEL: func.func @dont_fuse_grad_of_other_logits
func.func @dont_fuse_grad_of_other_logits(%x: tensor<8x10xf32>, %x2: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>) {
  // CHECK-NEXT: %loss = graph.cross_entropy %x, %y
  // CHECK-NEXT: %dx = autodiff.cross_entropy_grad %x2, %y, %dl
  // CHECK-NOT: autodiff.cross_entropy_with_grad
  %loss = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %dx = autodiff.cross_entropy_grad %x2, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  func.return %loss, %dx : tensor<f32>, tensor<8x10xf32>
}

// graph.mse_loss has no fused form (LOSS_GRADS): its gradient is one elementwise pass.
// CHECK-LABEL: func.func @dont_fuse_mse
func.func @dont_fuse_mse(%p: tensor<8x4xf32>, %t: tensor<8x4xf32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x4xf32>) {
  // CHECK-NEXT: %loss = graph.mse_loss %p, %t
  // CHECK-NEXT: %dp = autodiff.mse_loss_grad %p, %t, %dl
  %loss = graph.mse_loss %p, %t : tensor<8x4xf32> -> tensor<f32>
  %dp = autodiff.mse_loss_grad %p, %t, %dl : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> tensor<8x4xf32>
  func.return %loss, %dp : tensor<f32>, tensor<8x4xf32>
}
