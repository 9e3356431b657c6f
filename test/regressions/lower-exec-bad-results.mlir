// Regressions of aicfc-lower-exec on function signatures a user writes by hand.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics -p aicfc-lower-exec | filecheck %s

// A result named after a param is its next value; one of another shape became
// an exec.copy that failed verification with no location.
func.func @next_value_of_another_shape(%w: tensor<4xf32> {aicfc.role = "param", aicfc.name = "w"}, %x: tensor<5xf32> {aicfc.role = "input", aicfc.name = "x"}) -> (tensor<5xf32> {aicfc.name = "w"}) {
  %r = graph.relu %x : tensor<5xf32>
  // CHECK: {{.*}}lower-exec-bad-results.mlir:[[# @LINE + 1]]:3: error: 'func.return' result #0 is named "w", the next value of that param, but it is tensor<5xf32> where the param is tensor<4xf32>
  func.return %r : tensor<5xf32>
}

// -----

func.func @next_value_of_another_dtype(%m: tensor<4xf32> {aicfc.role = "state", aicfc.name = "m"}, %x: tensor<4xf64> {aicfc.role = "input", aicfc.name = "x"}) -> (tensor<4xf64> {aicfc.name = "m"}) {
  // CHECK: {{.*}}lower-exec-bad-results.mlir:[[# @LINE + 1]]:3: error: 'func.return' result #0 is named "m", the next value of that state, but it is tensor<4xf64> where the state is tensor<4xf32>
  func.return %x : tensor<4xf64>
}

// -----

// A non-string aicfc.role read as absent: the argument silently became an input.
// CHECK: {{.*}}lower-exec-bad-results.mlir:[[# @LINE + 1]]:1: error: 'func.func' argument #0 has aicfc.role = 3 : i64; expected a string
func.func @role_that_is_not_a_string(%w: tensor<4xf32> {aicfc.role = 3, aicfc.name = "w"}) {
  func.return
}

// -----

// CHECK: {{.*}}lower-exec-bad-results.mlir:[[# @LINE + 1]]:1: error: 'func.func' argument #0 has aicfc.name = ["w"]; expected a string
func.func @name_that_is_not_a_string(%w: tensor<4xf32> {aicfc.role = "param", aicfc.name = ["w"]}) {
  func.return
}
