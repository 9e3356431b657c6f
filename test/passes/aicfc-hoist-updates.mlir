// RUN: aicfc-opt %s -p aicfc-hoist-updates | filecheck %s
// RUN: aicfc-opt %s -p aicfc-hoist-updates,aicfc-hoist-updates | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-hoist-updates{max_runs=1}' | filecheck %s --check-prefix=ONE
// RUN: not aicfc-opt %s -p 'aicfc-hoist-updates{max_runs=0}' 2>&1 | filecheck %s --check-prefix=BAD

// BAD: aicfc-hoist-updates: max_runs must be at least 1, got 0

// The hyperparameters are arguments every update reads (shared operands: they order no
// update after another).

// Two layers' backward (the gradients stand in: %y for dY, its column sum for db2), as
// aicfc-expand-backward leaves it: every update after the last gradient. Each moves up to just after its gradient's definition and its parameter's
// last reader before it (w2 is read by the dX product %dh), never past its own
// position; the products keep their order, updates with one anchor keep theirs, and a
// second run changes nothing.

// CHECK-LABEL: func.func @two_layers
// CHECK:         %h = graph.matmul %x, %w1
// CHECK-NEXT:    %y = graph.matmul %h, %w2
// CHECK-NEXT:    %db2 = graph.reduce_sum %y
// CHECK-NEXT:    %b2n = autodiff.sgd_step %b2, %db2
// CHECK-NEXT:    %dw2 = graph.matmul %h, %y transpose_a
// CHECK-NEXT:    %dh = graph.matmul %y, %w2 transpose_b
// CHECK-NEXT:    %w2n = autodiff.sgd_step %w2, %dw2
// CHECK-NEXT:    %dw1 = graph.matmul %x, %dh transpose_a
// CHECK-NEXT:    %w1n = autodiff.sgd_step %w1, %dw1
// CHECK-NEXT:    func.return

// With max_runs=1 the three runs hoisting would make are too many: the block stays.
// ONE-LABEL: func.func @two_layers
// ONE:         %dw1 = graph.matmul %x, %dh transpose_a
// ONE-NEXT:    %w1n = autodiff.sgd_step %w1, %dw1
// ONE-NEXT:    %w2n = autodiff.sgd_step %w2, %dw2
// ONE-NEXT:    %b2n = autodiff.sgd_step %b2, %db2
// ONE-NEXT:    func.return
func.func @two_layers(%x: tensor<4x3xf32>, %w1: tensor<3x5xf32>, %w2: tensor<5x2xf32>, %b2: tensor<2xf32>, %lr: tensor<f64>, %mu: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %ap: tensor<f32>) -> (tensor<3x5xf32>, tensor<5x2xf32>, tensor<2xf32>) {
  %h = graph.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = graph.matmul %h, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
  %db2 = graph.reduce_sum %y axes = [0] : tensor<4x2xf32> -> tensor<2xf32>
  %dw2 = graph.matmul %h, %y transpose_a : (tensor<4x5xf32>, tensor<4x2xf32>) -> tensor<5x2xf32>
  %dh = graph.matmul %y, %w2 transpose_b : (tensor<4x2xf32>, tensor<5x2xf32>) -> tensor<4x5xf32>
  %dw1 = graph.matmul %x, %dh transpose_a : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %w1n = autodiff.sgd_step %w1, %dw1 lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<3x5xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %w2n = autodiff.sgd_step %w2, %dw2 lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<5x2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b2n = autodiff.sgd_step %b2, %db2 lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %w1n, %w2n, %b2n : tensor<3x5xf32>, tensor<5x2xf32>, tensor<2xf32>
}

// Updates whose operands are all arguments go to the top of the block, in their order.

// CHECK-LABEL: func.func @arguments_only
// CHECK-NEXT:    %a1 = autodiff.sgd_step %a, %ga
// CHECK-NEXT:    %b1 = autodiff.sgd_step %b, %gb
// CHECK-NEXT:    %t = graph.tanh %x
func.func @arguments_only(%x: tensor<2xf32>, %a: tensor<2xf32>, %ga: tensor<2xf32>, %b: tensor<2xf32>, %gb: tensor<2xf32>, %lr: tensor<f64>, %mu: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %ap: tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %t = graph.tanh %x : tensor<2xf32>
  %a1 = autodiff.sgd_step %a, %ga lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1 = autodiff.sgd_step %b, %gb lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %t, %a1, %b1 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// A value two updates both read (here one gradient; a shared hyperparameter on the
// optimizers that take one) orders neither after the other: %bn goes right after %b's
// last reader, before %an.

// CHECK-LABEL: func.func @shared_operand
// CHECK:         %g = graph.tanh %x
// CHECK-NEXT:    %b1 = graph.add %b, %x
// CHECK-NEXT:    %bn = autodiff.sgd_step %b, %g
// CHECK-NEXT:    %a1 = graph.add %a, %x
// CHECK-NEXT:    %an = autodiff.sgd_step %a, %g
// CHECK-NEXT:    %t = graph.relu %x
func.func @shared_operand(%x: tensor<2xf32>, %a: tensor<2xf32>, %b: tensor<2xf32>, %lr: tensor<f64>, %mu: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %ap: tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %g = graph.tanh %x : tensor<2xf32>
  %b1 = graph.add %b, %x : tensor<2xf32>
  %a1 = graph.add %a, %x : tensor<2xf32>
  %t = graph.relu %x : tensor<2xf32>
  %an = autodiff.sgd_step %a, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %bn = autodiff.sgd_step %b, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%ap) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %an, %bn, %a1, %b1, %t : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
