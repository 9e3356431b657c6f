// A user wrote `lr = 0.001` (as for `axis = 1`, `perm = [1, 0]`) and got
// "Expected float literal": some ops wrote valued properties as `key value`.
// Now every valued property of graph, autodiff and exec is `key = value`
// (operand keywords such as `bias %b` and unit flags such as `decoupled` stay
// bare), and the old form is a located syntax error that asks for the '='.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK-LABEL: func.func @adam_lr_equals
// CHECK-NEXT:  autodiff.adam_step %p, %p, %p, %p, %s lr = 1.000000e-03 beta2 = 9.900000e-01 eps = 1.000000e-07 weight_decay = 1.000000e-02 decoupled : tensor<4xf32>, tensor<f32>
func.func @adam_lr_equals(%p: tensor<4xf32>, %s: tensor<f32>) {
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr = 0.001 beta2 = 0.99 eps = 1.0e-7 weight_decay = 0.01 decoupled : tensor<4xf32>, tensor<f32>
  func.return
}

// -----

// CHECK-LABEL: func.func @sgd_and_dropout_equals
// CHECK-NEXT:  autodiff.sgd_step %p, %p, %p lr = 1.000000e-01 momentum = 9.000000e-01 nesterov
// CHECK-NEXT:  graph.dropout %p, %o p = 2.500000e-01 seed = 3 :
// CHECK-NEXT:  autodiff.dropout_grad %p, %o p = 2.500000e-01 seed = 3 :
func.func @sgd_and_dropout_equals(%p: tensor<4xf32>, %o: tensor<i64>) {
  %p1, %b1 = autodiff.sgd_step %p, %p, %p lr = 0.1 momentum = 0.9 nesterov : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %d = graph.dropout %p, %o p = 0.25 seed = 3 : tensor<4xf32>, tensor<i64>
  %g = autodiff.dropout_grad %p, %o p = 0.25 seed = 3 : tensor<4xf32>, tensor<i64>
  func.return
}

// -----

// CHECK-LABEL: func.func @epilogue_act_equals
// CHECK-NEXT:  graph.gemm_epilogue %x, %w bias %b act = relu transpose_b :
// CHECK-NEXT:  autodiff.epilogue_grad %y, %y act = relu :
func.func @epilogue_act_equals(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>) {
  %y = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %dz, %db = autodiff.epilogue_grad %y, %y act = relu : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  func.return
}

// -----

// CHECK-LABEL: exec.program @exec_equals arena = 32 {
// CHECK-NEXT:  exec.alloc offset = 0 :
// CHECK:       exec.launch "numpy.relu"(%t) outs(%t) alias = "out0_in0" :
exec.program @exec_equals arena = 32 {
  %t = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%t) outs(%t) alias = "out0_in0" : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "t" %t : !exec.buffer<4xf32, tmp>
}

// -----

// The old form points at the value where the '=' belongs.
func.func @old_form_is_a_located_error(%p: tensor<4xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}valued-property-key-equals-value.mlir:[[# @LINE + 1]]:65: error: Expected '='
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr 0.001 : tensor<4xf32>, tensor<f32>
  func.return
}
