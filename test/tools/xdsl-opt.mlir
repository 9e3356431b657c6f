// Plain xDSL sees aicfc: the `xdsl.universe` entry point (aicfc/universe.py) registers
// the graph, autodiff and exec dialects and the aicfc-* passes, so `xdsl-opt` from the
// same environment parses our IR and runs our passes, and prints what aicfc-opt prints.
// (An editable install records entry points when installed: reinstall after adding one.)
// RUN: xdsl-opt %S/../passes/aicfc-fuse.mlir -p aicfc-fuse > %t.xdsl && aicfc-opt %S/../passes/aicfc-fuse.mlir -p aicfc-fuse > %t.ours && diff %t.xdsl %t.ours
// RUN: xdsl-opt %s -p 'aicfc-fuse,aicfc-expand-backward' | filecheck %s

// CHECK-LABEL: func.func @layer(
// CHECK-NEXT:    %[[Y:.*]] = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b
// CHECK-NEXT:    graph.reduce_sum %[[Y]] axes = [0, 1]
// CHECK-NEXT:    %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DY:.*]] = graph.broadcast_to %[[SEED]]
// CHECK-NEXT:    %[[DZ:.*]] = autodiff.relu_grad %[[DY]], %[[Y]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.matmul %[[DZ]], %x transpose_a
// CHECK-NEXT:    func.return %[[DW]]
func.func @layer(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>) -> tensor<16x4xf32> {
  %m = graph.matmul %x, %w transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  %l = graph.reduce_sum %y axes = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<16x4xf32>) -> (tensor<16x4xf32>)
  func.return %g : tensor<16x4xf32>
}
