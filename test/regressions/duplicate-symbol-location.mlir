// Regression: a symbol defined twice was reported by builtin.module with no
// source position ("<file>: error: ..."); it now points at the second definition.
// RUN: not aicfc-opt %s 2>&1 | filecheck %s
// RUN: not aicfc-opt %s -p aicfc-lower-exec 2>&1 | filecheck %s

// CHECK-NOT: Traceback
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// CHECK: {{.*}}duplicate-symbol-location.mlir:[[# @LINE + 1]]:1: error: 'builtin.module' Redefinition of symbol "step"
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
