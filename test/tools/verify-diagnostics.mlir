// --verify-diagnostics prints each chunk's diagnostic (located) or its module to
// stdout and exits 0 (xDSL's behaviour, not MLIR's expected-error checker), so
// the invalid.mlir suites FileCheck the messages.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: builtin.module {
// CHECK-NEXT: func.func @valid
func.func @valid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.softmax %x axis = 0 : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// CHECK: {{//}} -----
// CHECK-NEXT: {{.*}}verify-diagnostics.mlir:[[# @LINE + 3]]:3: error: graph.softmax: axis 5 is out of range for rank 1
func.func @invalid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.softmax %x axis = 0 : tensor<4xf32>
  %z = graph.softmax %x axis = 5 : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// CHECK: {{//}} -----
// CHECK-NEXT: builtin.module {
// CHECK-NEXT: func.func @after_invalid
func.func @after_invalid(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
