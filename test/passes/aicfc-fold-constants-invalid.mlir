// RUN: not aicfc-opt %s -p aicfc-fold-constants 2>&1 | filecheck %s

// Constant labels outside [0, C): the reference refuses them, and so does the pass,
// naming the op (was an internal error with a ValueError).
// CHECK: aicfc-fold-constants-invalid.mlir:[[# @LINE + 5]]:3: error: 'graph.cross_entropy' cannot be evaluated on its constant operands: labels must be in [0, 3) for 3 classes, got values from 0 to 7
// CHECK-NOT: internal error
func.func @no_fold_labels_out_of_range() -> tensor<f32> {
  %x = graph.constant dense<[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]> : tensor<2x3xf32>
  %y = graph.constant dense<[0, 7]> : tensor<2xi32>
  %l = graph.cross_entropy %x, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
