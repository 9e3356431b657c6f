// RUN: aicfc-opt %s -p aicfc-expand-backward --print-debuginfo | filecheck %s

// Gradient ops carry the location of the forward op they differentiate; the
// seed constant carries the autodiff.backward's.
// CHECK-LABEL: func.func @linear_relu(
// CHECK:       graph.constant dense<1.000000e+00> : tensor<f32> loc("{{.*}}aicfc-expand-backward-loc.mlir":16:3)
// CHECK-NEXT:  autodiff.cross_entropy_grad {{.*}} loc("{{.*}}aicfc-expand-backward-loc.mlir":15:3)
// CHECK-NEXT:  autodiff.relu_grad {{.*}} loc("{{.*}}aicfc-expand-backward-loc.mlir":14:3)
// CHECK-NEXT:  graph.reduce_sum {{.*}} loc("{{.*}}aicfc-expand-backward-loc.mlir":13:3)
// CHECK-NEXT:  graph.matmul {{.*}} loc("{{.*}}aicfc-expand-backward-loc.mlir":12:3)
func.func @linear_relu(%x: tensor<8x4xf32>, %w: tensor<4x10xf32>, %b: tensor<10xf32>, %y: tensor<8xi32>) -> tensor<4x10xf32> {
  %h = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x10xf32>) -> tensor<8x10xf32>
  %z = graph.bias_add %h, %b : (tensor<8x10xf32>, tensor<10xf32>) -> tensor<8x10xf32>
  %a = graph.relu %z : tensor<8x10xf32>
  %l = graph.cross_entropy %a, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w, %b : tensor<f32>, (tensor<4x10xf32>, tensor<10xf32>) -> (tensor<4x10xf32>, tensor<10xf32>)
  func.return %g#0 : tensor<4x10xf32>
}
