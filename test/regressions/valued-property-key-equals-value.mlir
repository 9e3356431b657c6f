// A user wrote `lr = 0.001` (as for `axis = 1`, `perm = [1, 0]`; adam_step's lr is an
// operand now, so clip_grad_norm's max_norm stands in for it here) and got
// "Expected float literal": some ops wrote valued properties as `key value`.
// Now every valued property of graph, autodiff and exec is `key = value`
// (operand keywords such as `bias %b` and unit flags such as `decoupled` stay
// bare), and the old form is a located syntax error that asks for the '='.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK-LABEL: func.func @clip_and_accumulation_equals
// CHECK-NEXT:  autodiff.clip_grad_norm %p max_norm = 1.000000e+00 :
// CHECK-NEXT:  autodiff.accumulation_step %c every = 2 :
// CHECK-NEXT:  autodiff.accumulate_grad %p, %p, %a every = 2 :
func.func @clip_and_accumulation_equals(%p: tensor<4xf32>, %c: tensor<i64>) {
  %n, %k = autodiff.clip_grad_norm %p max_norm = 1.0 : tensor<4xf32> -> tensor<f32>
  %c1, %a = autodiff.accumulation_step %c every = 2 : tensor<i64> -> tensor<f32>
  %m, %acc = autodiff.accumulate_grad %p, %p, %a every = 2 : tensor<4xf32>, tensor<f32>
  func.return
}

// -----

// CHECK-LABEL: func.func @dropout_equals
// CHECK-NEXT:  graph.dropout %p, %o p = 2.500000e-01 seed = 3 :
// CHECK-NEXT:  autodiff.dropout_grad %p, %o p = 2.500000e-01 seed = 3 :
func.func @dropout_equals(%p: tensor<4xf32>, %o: tensor<i64>) {
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
func.func @old_form_is_a_located_error(%p: tensor<4xf32>) {
  // CHECK: {{.*}}valued-property-key-equals-value.mlir:[[# @LINE + 1]]:48: error: Expected '='
  %n, %k = autodiff.clip_grad_norm %p max_norm 1.0 : tensor<4xf32> -> tensor<f32>
  func.return
}
