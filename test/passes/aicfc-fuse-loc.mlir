// RUN: aicfc-opt %s -p aicfc-fuse --print-debuginfo | filecheck %s

// A fused op takes the source location of the first op it replaces (the
// matmul; the activation gradient), so later diagnostics point at user code.
// (The Python filecheck has no [[@LINE]]: the line numbers below are literal.)

// CHECK-LABEL: func.func @locations
func.func @locations(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // CHECK: graph.gemm_epilogue {{.*}} loc("{{.*}}aicfc-fuse-loc.mlir":10:3)
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  // CHECK: autodiff.epilogue_grad {{.*}} loc("{{.*}}aicfc-fuse-loc.mlir":14:3)
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %y, %db : tensor<8x16xf32>, tensor<16xf32>
}
