// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fold-narrowing-casts' | filecheck %s
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fuse,aicfc-autocast,aicfc-expand-backward,aicfc-fuse,aicfc-fold-casts,aicfc-fold-narrowing-casts' | filecheck %s --check-prefix=STEP

// A pre-LN block's layer norms after autocast (f32 statistics and math, the output cast
// to bf16 for the product): each layer norm stores its output in bf16 itself; the sum,
// mean and rstd stay f32. An f16 cast folds as well.

// CHECK-LABEL: func.func @fold_layer_norms
// CHECK-NEXT:  %s, %y, %m, %r = graph.add_layer_norm %x, %res weight %w bias %b eps = 1.000000e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:  %p = graph.matmul %y, %wq transpose_b : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT:  %z, %m2, %r2 = graph.layer_norm %s eps = 1.000000e-05 : tensor<4x8xf32> -> (tensor<4x8xf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT:   graph.cast
// CHECK:       func.return %s, %p, %z, %m, %r, %m2, %r2
func.func @fold_layer_norms(%x: tensor<4x8xf32>, %res: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %wq: tensor<8x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %s, %y0, %m, %r = graph.add_layer_norm %x, %res weight %w bias %b eps = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %y = graph.cast %y0 : tensor<4x8xf32> to tensor<4x8xbf16>
  %p = graph.matmul %y, %wq transpose_b : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
  %z0, %m2, %r2 = graph.layer_norm %s eps = 1.0e-5 : tensor<4x8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %z = graph.cast %z0 : tensor<4x8xf32> to tensor<4x8xf16>
  func.return %s, %p, %z, %m, %r, %m2, %r2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// STEP-LABEL: func.func @fold_layer_norms

// -----

// Not folded: an output the program also reads in f32 (its other user needs the
// unrounded value), a cast of the statistics (not a narrow result), a widening cast,
// and a layer norm of a bf16 input (its output is bf16 already).

// CHECK-LABEL: func.func @dont_fold
// CHECK-NEXT:  %y0, %m, %r = graph.layer_norm %x eps = 1.000000e-05 : tensor<4x8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:  %y = graph.cast %y0 : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT:  %mc = graph.cast %m : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT:  %z0, %m2, %r2 = graph.layer_norm %x eps = 1.000000e-05 : tensor<4x8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:  %z = graph.cast %z0 : tensor<4x8xf32> to tensor<4x8xf64>
// CHECK-NEXT:  %u0, %m3, %r3 = graph.layer_norm %h eps = 1.000000e-05 : tensor<4x8xbf16> -> (tensor<4x8xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK-NEXT:  %u = graph.cast %u0 : tensor<4x8xbf16> to tensor<4x8xf16>
func.func @dont_fold(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xbf16>, tensor<4x8xf64>, tensor<4x8xf16>) {
  %y0, %m, %r = graph.layer_norm %x eps = 1.0e-5 : tensor<4x8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %y = graph.cast %y0 : tensor<4x8xf32> to tensor<4x8xbf16>
  %mc = graph.cast %m : tensor<4xf32> to tensor<4xbf16>
  %z0, %m2, %r2 = graph.layer_norm %x eps = 1.0e-5 : tensor<4x8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %z = graph.cast %z0 : tensor<4x8xf32> to tensor<4x8xf64>
  %u0, %m3, %r3 = graph.layer_norm %h eps = 1.0e-5 : tensor<4x8xbf16> -> (tensor<4x8xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  %u = graph.cast %u0 : tensor<4x8xbf16> to tensor<4x8xf16>
  func.return %y0, %y, %mc, %z, %u : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xbf16>, tensor<4x8xf64>, tensor<4x8xf16>
}

// STEP-LABEL: func.func @dont_fold

// -----

// A one-layer pre-LN block's train step through mixed precision: the forward's two
// layer norms (graph.add_layer_norm for the second, the residual add fused) store their
// bf16 outputs for the products; no cast of a layer norm output is left. (The second
// norm's gradient has the residual stream's added: autodiff.add_layer_norm_grad.)

// STEP-LABEL: func.func @block_step
// STEP:        %{{.*}}, %{{.*}}, %{{.*}} = graph.layer_norm %x weight %w1 bias %b1 eps = 1.000000e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>)
// STEP:        graph.add_layer_norm %x, %{{.*}} weight %w2 bias %b2 eps = 1.000000e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>)
// STEP:        autodiff.add_layer_norm_grad
// STEP:        autodiff.layer_norm_grad
// STEP:        func.return
func.func @block_step(%x: tensor<4x8xf32>, %t: tensor<4xi32>, %w1: tensor<8xf32>, %b1: tensor<8xf32>, %wa: tensor<8x8xf32>, %w2: tensor<8xf32>, %b2: tensor<8xf32>, %wb: tensor<8x8xf32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<8xf32>) {
  %ln, %m, %r = graph.layer_norm %x weight %w1 bias %b1 eps = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %a = graph.matmul %ln, %wa transpose_b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = graph.add %x, %a : tensor<4x8xf32>
  %ln2, %m2, %r2 = graph.layer_norm %s weight %w2 bias %b2 eps = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %o = graph.matmul %ln2, %wb transpose_b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = graph.add %s, %o : tensor<4x8xf32>
  %l = graph.cross_entropy %z, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %wa, %w1 : tensor<f32>, (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>)
  func.return %l, %g#0, %g#1 : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>
}
