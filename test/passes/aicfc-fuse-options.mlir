// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s --check-prefix=ALL
// RUN: aicfc-opt %s -p 'aicfc-fuse{patterns=all}' | filecheck %s --check-prefix=ALL
// RUN: aicfc-opt %s -p 'aicfc-fuse{patterns=forward}' | filecheck %s --check-prefix=FWD
// RUN: aicfc-opt %s -p 'aicfc-fuse{patterns=backward}' | filecheck %s --check-prefix=BWD
// RUN: not aicfc-opt %s -p 'aicfc-fuse{patterns=sideways}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: aicfc-opt %s -p 'aicfc-fuse{exclude=gemm_epilogue_grad}' | filecheck %s --check-prefix=NODX
// RUN: not aicfc-opt %s -p 'aicfc-fuse{exclude=gemm_bias}' 2>&1 | filecheck %s --check-prefix=BADEX

// BADEX: aicfc-opt: error: bad pass options in 'aicfc-fuse{exclude=gemm_bias}': aicfc-fuse: unknown pattern 'gemm_bias' for option 'exclude'; expected one of: attention, packed_qkv_attention, gemm_bias_act, add_layer_norm, act_grad_bias_grad, gemm_epilogue_grad, loss_with_grad, layer_norm_grad_add, layer_norm_grad_add_lhs

// BAD: aicfc-opt: error: bad pass options in 'aicfc-fuse{patterns=sideways}': aicfc-fuse: unknown value 'sideways' for option 'patterns'; expected one of: all, forward, backward

// The option picks the pattern group: forward (gemm epilogues), backward
// (activation-grad + bias-grad), or all.

// ALL-LABEL: func.func @layer
// ALL-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu
// ALL-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
// ALL-NEXT: func.return %y, %dz, %db

// FWD-LABEL: func.func @layer
// FWD-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = relu
// FWD-NEXT: %dz = autodiff.relu_grad %dy, %y
// FWD-NEXT: %db = graph.reduce_sum %dz axes = [0]
// FWD-NEXT: func.return %y, %dz, %db

// BWD-LABEL: func.func @layer
// BWD-NEXT: %m = graph.matmul %x, %w
// BWD-NEXT: %z = graph.bias_add %m, %b
// BWD-NEXT: %y = graph.relu %z
// BWD-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
// BWD-NEXT: func.return %y, %dz, %db
func.func @layer(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) {
  %m = graph.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = graph.bias_add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = graph.relu %z : tensor<8x16xf32>
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %y, %dz, %db : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>
}

// exclude leaves one pattern out: the dX product stays a matmul before epilogue_grad.

// ALL-LABEL: func.func @dx_product
// ALL-NEXT: %dz, %db = autodiff.gemm_epilogue_grad %dz2, %w2, %y act = relu
// NODX-LABEL: func.func @dx_product
// NODX-NEXT: %dy = graph.matmul %dz2, %w2
// NODX-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu
func.func @dx_product(%dz2: tensor<8x10xf32>, %w2: tensor<10x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %dy = graph.matmul %dz2, %w2 : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %dz = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %db = graph.reduce_sum %dz axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %dz, %db : tensor<8x16xf32>, tensor<16xf32>
}
