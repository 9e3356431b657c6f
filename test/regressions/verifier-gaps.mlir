// Regressions: IR that verified but meant nothing (or a silent NaN / wrong
// result) is now refused with a located message naming the op. One case per
// gap found by the adversarial pass over the dialects.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Layout ops and reduce_sum took any element type (i1, index, complex); no kernel holds them.
func.func @reduce_sum_of_i1_is_refused(%x: tensor<4xi1>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.reduce_sum: input must have a float or i32/i64 element type, got i1
  %s = graph.reduce_sum %x axes = [0] : tensor<4xi1> -> tensor<i1>
  func.return
}

// -----

func.func @transpose_of_index_is_refused(%x: tensor<2x3xindex>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.transpose: input must have a float or i32/i64 element type, got index
  %y = graph.transpose %x perm = [1, 0] : tensor<2x3xindex> -> tensor<3x2xindex>
  func.return
}

// -----

func.func @reshape_of_i8_is_refused(%x: tensor<2x3xi8>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.reshape: input must have a float or i32/i64 element type, got i8
  %y = graph.reshape %x : tensor<2x3xi8> -> tensor<6xi8>
  func.return
}

// -----

func.func @broadcast_to_of_i1_is_refused(%x: tensor<3xi1>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.broadcast_to: input must have a float or i32/i64 element type, got i1
  %y = graph.broadcast_to %x : tensor<3xi1> -> tensor<2x3xi1>
  func.return
}

// -----

// A loss over no elements is 0/0: it verified and ran to NaN.
func.func @cross_entropy_with_zero_classes_is_refused(%x: tensor<4x0xf32>, %y: tensor<4xi32>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.cross_entropy: logits must have at least one element (a mean over none is undefined), got [4, 0]
  %l = graph.cross_entropy %x, %y : (tensor<4x0xf32>, tensor<4xi32>) -> tensor<f32>
  func.return
}

// -----

func.func @mse_loss_of_an_empty_batch_is_refused(%p: tensor<0x3xf32>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: graph.mse_loss: pred must have at least one element (a mean over none is undefined), got [0, 3]
  %l = graph.mse_loss %p, %p : tensor<0x3xf32> -> tensor<f32>
  func.return
}

// -----

func.func @cross_entropy_grad_of_an_empty_batch_is_refused(%x: tensor<0x3xf32>, %y: tensor<0xi32>, %d: tensor<f32>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_grad: logits must have at least one element (a mean over none is undefined), got [0, 3]
  %g = autodiff.cross_entropy_grad %x, %y, %d : (tensor<0x3xf32>, tensor<0xi32>, tensor<f32>) -> tensor<0x3xf32>
  func.return
}

// -----

// Optimizer hyperparameters: NaN and inf passed the `< 0` checks; torch.optim
// refuses negative weight decay (Adam, SGD) and negative lr/momentum (SGD). The
// hyperparameters are operands: a constant one is checked here, a state one where the
// API sets it.
func.func @adam_step_with_infinite_lr_is_refused(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<0x7FF0000000000000> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: lr must be finite, got inf
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%bad) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_with_nan_eps_is_refused(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<0x7FF8000000000000> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: eps must be finite, got nan
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%bad) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_with_negative_weight_decay_is_refused(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<-1.0e-2> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: weight_decay must be non-negative, got -0.01
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%bad) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_with_negative_lr_is_refused(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<-0.1> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: lr must be non-negative, got -0.1
  %p1 = autodiff.sgd_step %p, %g lr(%bad) momentum(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_with_nan_lr_is_refused(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<0x7FF8000000000000> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: lr must be finite, got nan
  %p1 = autodiff.sgd_step %p, %g lr(%bad) momentum(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_with_negative_weight_decay_is_refused(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  %bad = graph.constant dense<-0.5> : tensor<f64>
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: weight_decay must be non-negative, got -0.5
  %p1 = autodiff.sgd_step %p, %g lr(%h) momentum(%h) weight_decay(%bad) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

// exec ops outside an exec.program verified and were then ignored or mis-lowered.
func.func @exec_graph_in_a_func_is_refused() {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: exec.graph: must be inside an exec.program, got func.func
  exec.graph {
  }
  func.return
}

// -----

func.func @exec_launch_in_a_func_is_refused(%t: !exec.buffer<4xf32, tmp>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: exec.launch: must be inside an exec.program, got func.func
  exec.launch "numpy.relu"(%t) outs(%t) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  func.return
}

// -----

func.func @exec_output_in_a_func_is_refused(%t: !exec.buffer<4xf32, tmp>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: exec.output: must be inside an exec.program, got func.func
  exec.output "o" %t : !exec.buffer<4xf32, tmp>
  func.return
}

// -----

func.func @exec_copy_in_a_func_is_refused(%t: !exec.buffer<4xf32, tmp>, %u: !exec.buffer<4xf32, tmp>) {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: exec.copy: must be inside an exec.program, got func.func
  exec.copy %t -> %u : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, tmp>
  func.return
}

// -----

func.func @exec_constant_in_a_func_is_refused() {
  // CHECK: {{.*}}verifier-gaps.mlir:[[# @LINE + 1]]:3: error: exec.constant: must be inside an exec.program, got func.func
  %c = exec.constant dense<1.0> : tensor<4xf32> -> !exec.buffer<4xf32, const>
  func.return
}
