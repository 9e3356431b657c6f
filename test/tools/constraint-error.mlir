// A result type that breaks an op's type constraint (here graph.relu, whose
// operand and result share one type) is reported with the whole constraint
// message, naming the op and both types, not just its first line.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @relu_result_type(%x: tensor<4x8xf32>) {
  // CHECK: {{.*}}constraint-error.mlir:[[# @LINE + 1]]:3: error: 'graph.relu' result 'result' at position 0 does not verify: attribute tensor<4x8xf32> expected from variable 'T', but got tensor<4x9xf32>
  %y = "graph.relu"(%x) : (tensor<4x8xf32>) -> tensor<4x9xf32>
  func.return
}

// -----

func.func @adam_state_type(%p: tensor<4xf32>, %m: tensor<8xf32>, %s: tensor<f32>, %h: tensor<f64>, %c: tensor<f32>) {
  // CHECK: {{.*}}constraint-error.mlir:[[# @LINE + 1]]:3: error: 'autodiff.adam_step' operand 'exp_avg' at position 2 does not verify: attribute tensor<4xf32> expected from variable 'T', but got tensor<8xf32>
  %r:4 = "autodiff.adam_step"(%p, %p, %m, %m, %s, %h, %h, %h, %h, %h, %c, %c) : (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  func.return
}
