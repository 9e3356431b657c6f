// Regressions found by the mutation fuzzer (test/python/fuzzing.py): each was
// `aicfc-opt: internal error: ...` and is now a located error.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @dense_integer_out_of_range() -> tensor<i64> {
  // CHECK: {{.*}}fuzz-findings.mlir:[[# @LINE + 1]]:3: error: Integer value 590295810358705651711 is out of range for type i64 which supports values in the range [-9223372036854775808, 18446744073709551616)
  %c = graph.constant dense<0x1FFFFFFFFFFFFFFFFF> : tensor<i64>
  func.return %c : tensor<i64>
}

// -----

func.func @dense_array_out_of_range(%x: tensor<8x10xf32>) -> tensor<f32> {
  // CHECK: {{.*}}fuzz-findings.mlir:[[# @LINE + 1]]:3: error: a value does not fit its element type (argument out of range)
  %s = graph.reduce_sum %x axes = [0x1FFFFFFFFFFFFFFFFF, 0] : tensor<8x10xf32> -> tensor<f32>
  func.return %s : tensor<f32>
}

// -----

func.func @generic_func_without_region() {
  // CHECK: {{.*}}fuzz-findings.mlir:[[# @LINE + 1]]:3: error: 'func.func' Expected 0 results, but got 1
  %r = "func.func"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<8xf32>
  func.return
}

// -----

func.func @unclosed_string(%p: tensor<4xf32>) {
  // CHECK: {{.*}}fuzz-findings.mlir:[[# @LINE + 1]]:8: error: End of file reached before closing string literal.
  %r = "graph.relu(%p) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
