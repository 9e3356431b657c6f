// RUN: aicfc-opt %s -p aicfc-expand-backward --split-input-file --verify-diagnostics | filecheck %s
// RUN: not aicfc-opt %s -p aicfc-expand-backward 2>&1 | filecheck %s --check-prefix=STDERR

// An optimizer update between the wrt value and the loss (OpInfo: differentiable=False).
// CHECK: aicfc-expand-backward-invalid.mlir:9:3: error: 'autodiff.adam_step' is not differentiable: an optimizer update is not differentiated (it lies between a wrt value and the loss of the autodiff.backward at {{.*}}aicfc-expand-backward-invalid.mlir:11:3)
// STDERR: {{^}}{{.*}}aicfc-expand-backward-invalid.mlir:9:3: error: 'autodiff.adam_step' is not differentiable
// STDERR-NOT: Traceback
func.func @no_backward_through_adam_step(%p: tensor<4xf32>, %gr: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %st: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) -> tensor<4xf32> {
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %gr, %m, %v, %st lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %l = graph.reduce_sum %p1 axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %p : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}

// -----

// CHECK: aicfc-expand-backward-invalid.mlir:20:3: error: 'autodiff.sgd_step' is not differentiable: an optimizer update is not differentiated
func.func @no_backward_through_sgd_step(%p: tensor<4xf32>, %gr: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) -> tensor<4xf32> {
  %y = graph.tanh %p : tensor<4xf32>
  %p1 = autodiff.sgd_step %y, %gr lr(%h) momentum(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %l = graph.reduce_sum %p1 axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %p : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}

// -----

// Second order through gelu would need gelu''; no op computes it.
// CHECK: aicfc-expand-backward-invalid.mlir:31:3: error: 'autodiff.gelu_grad' is not differentiable: its VJP needs gelu''(x) = phi(x) (2 - x^2), which no op computes
func.func @no_second_order_through_gelu_grad(%dy: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %dx = autodiff.gelu_grad %dy, %x : tensor<4xf32>
  %l = graph.reduce_sum %dx axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %x : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}

// -----

// CHECK: aicfc-expand-backward-invalid.mlir:41:3: error: 'autodiff.epilogue_grad' is not differentiable: with act gelu, its second derivative needs gelu''
func.func @no_second_order_through_epilogue_grad_gelu(%dy: tensor<8x4xf32>, %z: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %dz, %db = autodiff.epilogue_grad %dy, %z act = gelu : (tensor<8x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  %l = graph.reduce_sum %db axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %dy : tensor<f32>, (tensor<8x4xf32>) -> (tensor<8x4xf32>)
  func.return %g : tensor<8x4xf32>
}

// -----

// An op of another dialect has no VJP rule.
// CHECK: aicfc-expand-backward-invalid.mlir:52:3: error: 'arith.addf' is not differentiable: no VJP rule is registered for it (passes/vjp_rules/)
func.func @no_rule_for_foreign_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  %l = graph.reduce_sum %y axes = [0] : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %x : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}
