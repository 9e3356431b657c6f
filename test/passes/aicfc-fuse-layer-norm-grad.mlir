// RUN: aicfc-opt %s -p aicfc-fuse | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fuse{patterns=forward}' | filecheck %s --check-prefix=FWD

// The residual stream's gradient add fused into the layer norm's backward
// (passes/fusion/patterns.py, layer_norm_grad_add): add(dr, layer_norm_grad#dx) becomes
// autodiff.add_layer_norm_grad with dr its second operand; dweight and dbias keep their
// users. Negative cases are named dont_*. The pattern is in the backward group.

// dx on the add's right (as add_layer_norm's VJP emits add(ds, dx)).
// CHECK-LABEL: func.func @fuse_rhs
// CHECK-NEXT: %s, %dw, %db = autodiff.add_layer_norm_grad %dy, %dr, %x, %m, %r weight %w : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: func.return %s, %dw, %db
// FWD-LABEL: func.func @fuse_rhs
// FWD-NEXT: autodiff.layer_norm_grad
// FWD-NEXT: graph.add %dr, %dx
func.func @fuse_rhs(%dy: tensor<2x4x8xf32>, %dr: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %m: tensor<2x4xf32>, %r: tensor<2x4xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %s = graph.add %dr, %dx : tensor<2x4x8xf32>
  func.return %s, %dw, %db : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// dx on the add's left; no weight (no dweight, no dbias). dr is made after the norm's
// gradient: the fused op goes where the add was.
// CHECK-LABEL: func.func @fuse_lhs_no_weight
// CHECK-NEXT: %dr = graph.relu %z : tensor<4x8xf32>
// CHECK-NEXT: %s = autodiff.add_layer_norm_grad %dy, %dr, %x, %m, %r : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x8xf32>)
// CHECK-NEXT: func.return %s
func.func @fuse_lhs_no_weight(%dy: tensor<4x8xf32>, %z: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4xf32>, %r: tensor<4xf32>) -> tensor<4x8xf32> {
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x8xf32>)
  %dr = graph.relu %z : tensor<4x8xf32>
  %s = graph.add %dx, %dr : tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}

// dweight is read before the add: the fused op goes before that reader.
// CHECK-LABEL: func.func @fuse_before_a_reader_of_dw
// CHECK-NEXT: %s, %dw, %db = autodiff.add_layer_norm_grad %dy, %dr, %x, %m, %r weight %w
// CHECK-NEXT: %dw2 = graph.add %dw, %db : tensor<8xf32>
// CHECK-NEXT: func.return %s, %dw2
func.func @fuse_before_a_reader_of_dw(%dy: tensor<4x8xf32>, %dr: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4xf32>, %r: tensor<4xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dw2 = graph.add %dw, %db : tensor<8xf32>
  %s = graph.add %dr, %dx : tensor<4x8xf32>
  func.return %s, %dw2 : tensor<4x8xf32>, tensor<8xf32>
}

// dx has a second reader (ln_f's dx also feeds the c_proj products): nothing fuses.
// CHECK-LABEL: func.func @dont_fuse_dx_second_user
// CHECK-NEXT: %dx = autodiff.layer_norm_grad
// CHECK-NEXT: %s = graph.add %dr, %dx
// CHECK-NOT: autodiff.add_layer_norm_grad
func.func @dont_fuse_dx_second_user(%dy: tensor<4x8xf32>, %dr: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4xf32>, %r: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x8xf32>)
  %s = graph.add %dr, %dx : tensor<4x8xf32>
  func.return %s, %dx : tensor<4x8xf32>, tensor<4x8xf32>
}

// The add of dx to itself (both operands dx: two uses) does not fuse.
// CHECK-LABEL: func.func @dont_fuse_twice_dx
// CHECK-NEXT: %dx = autodiff.layer_norm_grad
// CHECK-NEXT: %s = graph.add %dx, %dx
func.func @dont_fuse_twice_dx(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4xf32>, %r: tensor<4xf32>) -> tensor<4x8xf32> {
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x8xf32>)
  %s = graph.add %dx, %dx : tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
