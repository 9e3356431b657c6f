// Every autodiff op in custom syntax: printed as checked, and unchanged by a
// round trip through the custom and the generic form (the optional seed and
// momentum buffer present and absent; a schedule's coefficients such as 1/3 exact; a
// property equal to its default is not printed in custom syntax and comes back from
// the default, as the generic form shows). The optimizers' hyperparameters are
// operands (state arguments in the train steps aicfc builds).
// RUN: aicfc-opt %s | filecheck %s
// RUN: aicfc-opt %s | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%loss: tensor<f32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>, %seed: tensor<f32>) {
func.func @backward(%loss: tensor<f32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>, %seed: tensor<f32>) {
  // CHECK-NEXT: %g, %g_1 = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<4x3xf32>, tensor<4xf32>) -> (tensor<4x3xf32>, tensor<4xf32>)
  // GENERIC: %g, %g_1 = "autodiff.backward"(%loss, %w, %b) <{operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<f32>, tensor<4x3xf32>, tensor<4xf32>) -> (tensor<4x3xf32>, tensor<4xf32>)
  %g:2 = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<4x3xf32>, tensor<4xf32>) -> (tensor<4x3xf32>, tensor<4xf32>)
  // CHECK-NEXT: %gs = autodiff.backward %loss wrt %w seed %seed : tensor<f32>, (tensor<4x3xf32>) -> (tensor<4x3xf32>)
  // GENERIC: %gs = "autodiff.backward"(%loss, %w, %seed) <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<f32>, tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %gs = autodiff.backward %loss wrt %w seed %seed : tensor<f32>, (tensor<4x3xf32>) -> (tensor<4x3xf32>)
  // CHECK-NEXT: %l1 = graph.reshape %loss : tensor<f32> -> tensor<1xf32>
  %l1 = graph.reshape %loss : tensor<f32> -> tensor<1xf32>
  // CHECK-NEXT: %g1 = autodiff.backward %l1 wrt %b : tensor<1xf32>, (tensor<4xf32>) -> (tensor<4xf32>)
  %g1 = autodiff.backward %l1 wrt %b : tensor<1xf32>, (tensor<4xf32>) -> (tensor<4xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @activation_grads
// CHECK-SAME: (%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
func.func @activation_grads(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
  // CHECK-NEXT: %0 = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  %0 = autodiff.relu_grad %dy, %y : tensor<8x16xf32>
  // CHECK-NEXT: %1 = autodiff.gelu_grad %dy, %y : tensor<8x16xf32>
  %1 = autodiff.gelu_grad %dy, %y : tensor<8x16xf32>
  // CHECK-NEXT: %2 = autodiff.tanh_grad %dy, %y : tensor<8x16xf32>
  %2 = autodiff.tanh_grad %dy, %y : tensor<8x16xf32>
  // CHECK-NEXT: %3 = autodiff.softmax_grad %dy, %y axis = 1 : tensor<8x16xf32>
  // GENERIC: %3 = "autodiff.softmax_grad"(%dy, %y) <{axis = 1 : i64}> : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = autodiff.softmax_grad %dy, %y axis = 1 : tensor<8x16xf32>
  // CHECK-NEXT: %4 = autodiff.softmax_grad %dy, %y axis = -2 : tensor<8x16xf32>
  %4 = autodiff.softmax_grad %dy, %y axis = -2 : tensor<8x16xf32>
  // CHECK-NEXT: %5 = autodiff.silu_grad %dy, %y : tensor<8x16xf32>
  // GENERIC: %5 = "autodiff.silu_grad"(%dy, %y) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = autodiff.silu_grad %dy, %y : tensor<8x16xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @loss_grads
// CHECK-SAME: (%x: tensor<8x10xf32>, %y: tensor<8xi32>, %t: tensor<8x10xf32>, %dl: tensor<f32>) {
func.func @loss_grads(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %t: tensor<8x10xf32>, %dl: tensor<f32>) {
  // CHECK-NEXT: %0 = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %0 = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  // CHECK-NEXT: %1 = autodiff.mse_loss_grad %x, %t, %dl : (tensor<8x10xf32>, tensor<8x10xf32>, tensor<f32>) -> tensor<8x10xf32>
  %1 = autodiff.mse_loss_grad %x, %t, %dl : (tensor<8x10xf32>, tensor<8x10xf32>, tensor<f32>) -> tensor<8x10xf32>
  // CHECK-NEXT: %2, %3, %4 = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<10xf32>)
  %2, %3, %4 = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<10xf32>)
  // CHECK-NEXT: %5, %6 = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  %5, %6 = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @dropout_grad
// CHECK-SAME: (%dy: tensor<8x16xf32>, %off: tensor<i64>) {
func.func @dropout_grad(%dy: tensor<8x16xf32>, %off: tensor<i64>) {
  // CHECK-NEXT: %0 = autodiff.dropout_grad %dy, %off p = 1.000000e-01 seed = 7 : tensor<8x16xf32>, tensor<i64>
  // GENERIC: %0 = "autodiff.dropout_grad"(%dy, %off) <{p = 1.000000e-01 : f64, seed = 7 : i64}> : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
  %0 = autodiff.dropout_grad %dy, %off p = 0.1 seed = 7 : tensor<8x16xf32>, tensor<i64>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @epilogue_grad
// CHECK-SAME: (%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
func.func @epilogue_grad(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dz2, %db2 = autodiff.epilogue_grad %dy, %y act = gelu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // GENERIC: %dz2, %db2 = "autodiff.epilogue_grad"(%dy, %y) <{act = #graph<activation gelu>}> : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %dz2, %db2 = autodiff.epilogue_grad %dy, %y act = gelu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dz3, %db3 = autodiff.epilogue_grad %dy, %y act = silu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %dz3, %db3 = autodiff.epilogue_grad %dy, %y act = silu : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @gemm_epilogue_grad
func.func @gemm_epilogue_grad(%dz2: tensor<8x10xf32>, %w2: tensor<10x16xf32>, %w2t: tensor<16x10xf32>, %y: tensor<8x16xf32>) {
  // CHECK-NEXT: %dz, %db = autodiff.gemm_epilogue_grad %dz2, %w2, %y act = relu : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %dz, %db = autodiff.gemm_epilogue_grad %dz2, %w2, %y act = relu : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dzt, %dbt = autodiff.gemm_epilogue_grad %dz2, %w2t, %y act = gelu transpose_b : (tensor<8x10xf32>, tensor<16x10xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // GENERIC: %dzt, %dbt = "autodiff.gemm_epilogue_grad"(%dz2, %w2t, %y) <{act = #graph<activation gelu>, transpose_b}> : (tensor<8x10xf32>, tensor<16x10xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %dzt, %dbt = autodiff.gemm_epilogue_grad %dz2, %w2t, %y act = gelu transpose_b : (tensor<8x10xf32>, tensor<16x10xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @adam_step
// CHECK-SAME: (%p: tensor<16x8xf32>, %g: tensor<16x8xf32>, %m: tensor<16x8xf32>, %v: tensor<16x8xf32>, %s: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %a: tensor<f32>) {
func.func @adam_step(%p: tensor<16x8xf32>, %g: tensor<16x8xf32>, %m: tensor<16x8xf32>, %v: tensor<16x8xf32>, %s: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %a: tensor<f32>) {
  // CHECK-NEXT: %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2) eps(%eps) weight_decay(%wd) grad_scale(%c) apply(%a) : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  // GENERIC: %p1, %m1, %v1, %s1 = "autodiff.adam_step"(%p, %g, %m, %v, %s, %lr, %b1, %b2, %eps, %wd, %c, %a) : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>)
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2) eps(%eps) weight_decay(%wd) grad_scale(%c) apply(%a) : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  // CHECK-NEXT: %p2, %m2, %v2, %s2 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2) eps(%eps) weight_decay(%wd) grad_scale(%c) apply(%a) decoupled : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  // GENERIC: %p2, %m2, %v2, %s2 = "autodiff.adam_step"(%p, %g, %m, %v, %s, %lr, %b1, %b2, %eps, %wd, %c, %a) <{decoupled_weight_decay}> : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>)
  %p2, %m2, %v2, %s2 = autodiff.adam_step %p, %g, %m, %v, %s lr(%lr) betas(%b1, %b2) eps(%eps) weight_decay(%wd) grad_scale(%c) apply(%a) decoupled : tensor<16x8xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// The low-precision copy that the update rewrites (aicfc-fold-weight-casts).
// CHECK-LABEL: func.func @adam_step_low_copy
// CHECK-SAME: (%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %a: tensor<f32>, %w: tensor<4xbf16>) {
func.func @adam_step_low_copy(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %a: tensor<f32>, %w: tensor<4xbf16>) {
  // CHECK-NEXT: %p1, %m1, %v1, %s1, %w1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%a) apply(%a) low_copy(%w : tensor<4xbf16>) decoupled : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xbf16>
  // GENERIC: %p1, %m1, %v1, %s1, %w1 = "autodiff.adam_step"(%p, %p, %p, %p, %s, %h, %h, %h, %h, %h, %a, %a, %w) <{decoupled_weight_decay}> : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xbf16>)
  %p1, %m1, %v1, %s1, %w1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%a) apply(%a) low_copy(%w : tensor<4xbf16>) decoupled : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xbf16>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @adam_step_f64
// CHECK-SAME: (%p: tensor<4xf64>, %s: tensor<f32>, %h: tensor<f64>, %a: tensor<f32>) {
func.func @adam_step_f64(%p: tensor<4xf64>, %s: tensor<f32>, %h: tensor<f64>, %a: tensor<f32>) {
  // CHECK-NEXT: %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%h) apply(%a) : tensor<4xf64>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f32>
  // GENERIC: %p1, %m1, %v1, %s1 = "autodiff.adam_step"(%p, %p, %p, %p, %s, %h, %h, %h, %h, %h, %h, %a) : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<f32>)
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%h) apply(%a) : tensor<4xf64>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @sgd_step
// CHECK-SAME: (%p: tensor<16x8xf32>, %g: tensor<16x8xf32>, %buf: tensor<16x8xf32>, %lr: tensor<f64>, %mu: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %a: tensor<f32>) {
func.func @sgd_step(%p: tensor<16x8xf32>, %g: tensor<16x8xf32>, %buf: tensor<16x8xf32>, %lr: tensor<f64>, %mu: tensor<f64>, %wd: tensor<f64>, %c: tensor<f32>, %a: tensor<f32>) {
  // CHECK-NEXT: %p1 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  // GENERIC: %p1 = "autodiff.sgd_step"(%p, %g, %lr, %mu, %wd, %c, %a) : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>) -> tensor<16x8xf32>
  %p1 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  // CHECK-NEXT: %p2, %b2 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) momentum_buffer(%buf) : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<16x8xf32>
  // GENERIC: %p2, %b2 = "autodiff.sgd_step"(%p, %g, %lr, %mu, %wd, %c, %a, %buf) : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
  %p2, %b2 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) momentum_buffer(%buf) : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<16x8xf32>
  // CHECK-NEXT: %p3, %b3 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) momentum_buffer(%buf) nesterov : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<16x8xf32>
  // GENERIC: %p3, %b3 = "autodiff.sgd_step"(%p, %g, %lr, %mu, %wd, %c, %a, %buf) <{nesterov}> : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
  %p3, %b3 = autodiff.sgd_step %p, %g lr(%lr) momentum(%mu) weight_decay(%wd) grad_scale(%c) apply(%a) momentum_buffer(%buf) nesterov : tensor<16x8xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<16x8xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @lr_schedule
// CHECK-SAME: (%e: tensor<i64>, %a: tensor<f32>, %lr0: tensor<f64>, %lr1: tensor<f64>) {
func.func @lr_schedule(%e: tensor<i64>, %a: tensor<f32>, %lr0: tensor<f64>, %lr1: tensor<f64>) {
  // CHECK-NEXT: %e1, %l0 = autodiff.lr_schedule %e, %a, %lr0 kinds = "cosine" milestones = [] coefficients = [1.000000e+02, 0.000000e+00, 0.000000e+00, 0.000000e+00] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  // GENERIC: %e1, %l0 = "autodiff.lr_schedule"(%e, %a, %lr0) <{kinds = "cosine", milestones = array<i64>, coefficients = array<f64: 1.000000e+02, 0.000000e+00, 0.000000e+00, 0.000000e+00>}> : (tensor<i64>, tensor<f32>, tensor<f64>) -> (tensor<i64>, tensor<f64>)
  %e1, %l0 = autodiff.lr_schedule %e, %a, %lr0 kinds = "cosine" milestones = [] coefficients = [100.0, 0.0, 0.0, 0.0] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  // CHECK-NEXT: %e2, %l1, %l2 = autodiff.lr_schedule %e, %a, %lr0, %lr1 kinds = "linear,cosine" milestones = [10] coefficients = [0.33333333333333331, 1.000000e+00, 1.000000e+01, 0.000000e+00, 9.000000e+01, 1.000000e-05, 0.000000e+00, 0.000000e+00] : tensor<i64>, tensor<f32>, tensor<f64>, tensor<f64> -> tensor<f64>, tensor<f64>
  // GENERIC: %e2, %l1, %l2 = "autodiff.lr_schedule"(%e, %a, %lr0, %lr1) <{kinds = "linear,cosine", milestones = array<i64: 10>, coefficients = array<f64: 0.33333333333333331, 1.000000e+00, 1.000000e+01, 0.000000e+00, 9.000000e+01, 1.000000e-05, 0.000000e+00, 0.000000e+00>}> : (tensor<i64>, tensor<f32>, tensor<f64>, tensor<f64>) -> (tensor<i64>, tensor<f64>, tensor<f64>)
  %e2, %l1, %l2 = autodiff.lr_schedule %e, %a, %lr0, %lr1 kinds = "linear,cosine" milestones = [10] coefficients = [0.33333333333333331, 1.0, 10.0, 0.0, 90.0, 1.0e-5, 0.0, 0.0] : tensor<i64>, tensor<f32>, tensor<f64>, tensor<f64> -> tensor<f64>, tensor<f64>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @clip_grad_norm
// CHECK-SAME: (%g0: tensor<16x8xf32>, %g1: tensor<16xf32>) {
func.func @clip_grad_norm(%g0: tensor<16x8xf32>, %g1: tensor<16xf32>) {
  // CHECK-NEXT: %n, %c = autodiff.clip_grad_norm %g0, %g1 max_norm = 1.000000e+00 : tensor<16x8xf32>, tensor<16xf32> -> tensor<f32>
  // GENERIC: %n, %c = "autodiff.clip_grad_norm"(%g0, %g1) <{max_norm = 1.000000e+00 : f64}> : (tensor<16x8xf32>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>)
  %n, %c = autodiff.clip_grad_norm %g0, %g1 max_norm = 1.0 : tensor<16x8xf32>, tensor<16xf32> -> tensor<f32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @accumulation
// CHECK-SAME: (%g: tensor<16x8xf32>, %acc: tensor<16x8xf32>, %count: tensor<i64>) {
func.func @accumulation(%g: tensor<16x8xf32>, %acc: tensor<16x8xf32>, %count: tensor<i64>) {
  // CHECK-NEXT: %count1, %apply = autodiff.accumulation_step %count every = 4 : tensor<i64> -> tensor<f32>
  // GENERIC: %count1, %apply = "autodiff.accumulation_step"(%count) <{every = 4 : i64}> : (tensor<i64>) -> (tensor<i64>, tensor<f32>)
  %count1, %apply = autodiff.accumulation_step %count every = 4 : tensor<i64> -> tensor<f32>
  // CHECK-NEXT: %mean, %acc1 = autodiff.accumulate_grad %g, %acc, %apply every = 4 : tensor<16x8xf32>, tensor<f32>
  // GENERIC: %mean, %acc1 = "autodiff.accumulate_grad"(%g, %acc, %apply) <{every = 4 : i64}> : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
  %mean, %acc1 = autodiff.accumulate_grad %g, %acc, %apply every = 4 : tensor<16x8xf32>, tensor<f32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @transformer_grads
// CHECK-SAME: (%dy: tensor<2x8x16xf32>, %ids: tensor<2x8xi32>, %x: tensor<2x8x16xf32>, %m: tensor<2x8xf32>, %r: tensor<2x8xf32>, %w: tensor<16xf32>) {
func.func @transformer_grads(%dy: tensor<2x8x16xf32>, %ids: tensor<2x8xi32>, %x: tensor<2x8x16xf32>, %m: tensor<2x8xf32>, %r: tensor<2x8xf32>, %w: tensor<16xf32>) {
  // CHECK-NEXT: %dw = autodiff.embedding_grad %dy, %ids num_embeddings = 65 : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<65x16xf32>
  // GENERIC: %dw = "autodiff.embedding_grad"(%dy, %ids) <{num_embeddings = 65 : i64}> : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<65x16xf32>
  %dw = autodiff.embedding_grad %dy, %ids num_embeddings = 65 : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<65x16xf32>
  // CHECK-NEXT: %dx, %dlw, %dlb = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // GENERIC: %dx, %dlw, %dlb = "autodiff.layer_norm_grad"(%dy, %x, %m, %r, %w) <{resultSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %dx, %dlw, %dlb = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dx1, %dlw1 = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  %dx1, %dlw1 = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %dx2 = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>)
  // GENERIC: %dx2 = "autodiff.layer_norm_grad"(%dy, %x, %m, %r) <{resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x16xf32>
  %dx2 = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>)
  // CHECK-NEXT: %ax, %alw, %alb = autodiff.add_layer_norm_grad %dy, %x, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // GENERIC: %ax, %alw, %alb = "autodiff.add_layer_norm_grad"(%dy, %x, %x, %m, %r, %w) <{resultSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %ax, %alw, %alb = autodiff.add_layer_norm_grad %dy, %x, %x, %m, %r weight %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %ax1 = autodiff.add_layer_norm_grad %dy, %x, %x, %m, %r : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>)
  %ax1 = autodiff.add_layer_norm_grad %dy, %x, %x, %m, %r : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>)
  // CHECK-NEXT: %dz, %db = autodiff.epilogue_grad %dy, %x act = relu : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  %dz, %db = autodiff.epilogue_grad %dy, %x act = relu : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @attention_grad
// CHECK-SAME: (%do: tensor<1x2x8x16xf32>, %q: tensor<1x2x8x16xf32>, %k: tensor<1x2x6x16xf32>, %o: tensor<1x2x8x16xf32>, %lse: tensor<1x2x8xf32>, %off: tensor<i64>) {
func.func @attention_grad(%do: tensor<1x2x8x16xf32>, %q: tensor<1x2x8x16xf32>, %k: tensor<1x2x6x16xf32>, %o: tensor<1x2x8x16xf32>, %lse: tensor<1x2x8xf32>, %off: tensor<i64>) {
  // CHECK-NEXT: %dq, %dk, %dv = autodiff.scaled_dot_product_attention_grad %do, %q, %k, %k, %o, %lse causal scale = 2.500000e-01 : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  // GENERIC: %dq, %dk, %dv = "autodiff.scaled_dot_product_attention_grad"(%do, %q, %k, %k, %o, %lse) <{causal, scale = 2.500000e-01 : f64}> : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  %dq, %dk, %dv = autodiff.scaled_dot_product_attention_grad %do, %q, %k, %k, %o, %lse causal scale = 0.25 : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  // CHECK-NEXT: %dq2, %dk2, %dv2 = autodiff.scaled_dot_product_attention_grad %do, %q, %k, %k, %o, %lse offset %off scale = 2.500000e-01 dropout_p = 2.000000e-01 seed = 5 : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>, tensor<i64>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  // GENERIC: %dq2, %dk2, %dv2 = "autodiff.scaled_dot_product_attention_grad"(%do, %q, %k, %k, %o, %lse, %off) <{scale = 2.500000e-01 : f64, dropout_p = 2.000000e-01 : f64, seed = 5 : i64}> : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>, tensor<i64>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  %dq2, %dk2, %dv2 = autodiff.scaled_dot_product_attention_grad %do, %q, %k, %k, %o, %lse offset %off scale = 0.25 dropout_p = 0.2 seed = 5 : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>, tensor<i64>) -> (tensor<1x2x8x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @packed_qkv_attention_grad
// CHECK-SAME: (%do: tensor<2x8x32xf32>, %qkv: tensor<2x8x96xf32>, %y: tensor<2x8x32xf32>, %lse: tensor<2x2x8xf32>, %off: tensor<i64>) {
func.func @packed_qkv_attention_grad(%do: tensor<2x8x32xf32>, %qkv: tensor<2x8x96xf32>, %y: tensor<2x8x32xf32>, %lse: tensor<2x2x8xf32>, %off: tensor<i64>) {
  // CHECK-NEXT: %dqkv = autodiff.packed_qkv_attention_grad %do, %qkv, %y, %lse heads = 2 causal scale = 2.500000e-01 : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>) -> tensor<2x8x96xf32>
  // GENERIC: %dqkv = "autodiff.packed_qkv_attention_grad"(%do, %qkv, %y, %lse) <{num_heads = 2 : i64, causal, scale = 2.500000e-01 : f64}> : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>) -> tensor<2x8x96xf32>
  %dqkv = autodiff.packed_qkv_attention_grad %do, %qkv, %y, %lse heads = 2 causal scale = 0.25 : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>) -> tensor<2x8x96xf32>
  // CHECK-NEXT: %dqkv2 = autodiff.packed_qkv_attention_grad %do, %qkv, %y, %lse offset %off heads = 2 causal scale = 2.500000e-01 dropout_p = 2.000000e-01 seed = 5 : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>, tensor<i64>) -> tensor<2x8x96xf32>
  // GENERIC: %dqkv2 = "autodiff.packed_qkv_attention_grad"(%do, %qkv, %y, %lse, %off) <{num_heads = 2 : i64, causal, scale = 2.500000e-01 : f64, dropout_p = 2.000000e-01 : f64, seed = 5 : i64}> : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>, tensor<i64>) -> tensor<2x8x96xf32>
  %dqkv2 = autodiff.packed_qkv_attention_grad %do, %qkv, %y, %lse offset %off heads = 2 causal scale = 0.25 dropout_p = 0.2 seed = 5 : (tensor<2x8x32xf32>, tensor<2x8x96xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>, tensor<i64>) -> tensor<2x8x96xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @class_loss_grads
// CHECK-SAME: (%x: tensor<2x8x65xf32>, %y: tensor<2x8xi32>, %dl: tensor<f32>) {
func.func @class_loss_grads(%x: tensor<2x8x65xf32>, %y: tensor<2x8xi32>, %dl: tensor<f32>) {
  // CHECK-NEXT: %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x65xf32>
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x65xf32>
  // CHECK-NEXT: %l, %g, %gb = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x8x65xf32>, tensor<65xf32>)
  %l, %g, %gb = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<2x8x65xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x8x65xf32>, tensor<65xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}


// CHECK-LABEL: func.func @loss_scaling
func.func @loss_scaling(%g: tensor<16x8xf32>, %w: tensor<16x8xf32>, %s: tensor<f32>, %t: tensor<f32>) {
  // CHECK-NEXT: %gu, %inf = autodiff.unscale_grad %g, %s : tensor<16x8xf32>
  %gu, %inf = autodiff.unscale_grad %g, %s : tensor<16x8xf32>
  // CHECK-NEXT: %w1 = autodiff.amp_select %inf, %gu, %w : tensor<16x8xf32>
  %w1 = autodiff.amp_select %inf, %gu, %w : tensor<16x8xf32>
  // CHECK-NEXT: %s1, %t1 = autodiff.update_scale %s, %t, %inf
  // GENERIC: %s1, %t1 = "autodiff.update_scale"(%s, %t, %inf) <{growth_factor = 2.000000e+00 : f64, backoff_factor = 5.000000e-01 : f64, growth_interval = 2000 : i64}> : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %s1, %t1 = autodiff.update_scale %s, %t, %inf
  // CHECK-NEXT: %s2, %t2 = autodiff.update_scale %s, %t, %inf growth_factor = 4.000000e+00 backoff_factor = 2.500000e-01 growth_interval = 10
  %s2, %t2 = autodiff.update_scale %s, %t, %inf growth_factor = 4.0 backoff_factor = 0.25 growth_interval = 10
  func.return
}

// CHECK-LABEL: func.func @mlp_train_step
func.func @mlp_train_step(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<5x6xf32>, %b: tensor<5xf32>, %s: tensor<f32>, %w2: tensor<3x5xf32>) {
  // CHECK-NEXT: %l, %w1, %m1, %v1, %s1, %c1, %cm1, %cv1, %cs1, %w21, %m21, %v21, %s21 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s, %b, %b, %b, %s, %w2, %w2, %w2, %s acts = "relu,none" bias = [1, 0] decoupled : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>) -> (tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>)
  // GENERIC: %l, %w1, %m1, %v1, %s1, %c1, %cm1, %cv1, %cs1, %w21, %m21, %v21, %s21 = "autodiff.mlp_train_step"(%x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s, %b, %b, %b, %s, %w2, %w2, %w2, %s) <{acts = "relu,none", bias = array<i64: 1, 0>, decoupled_weight_decay}> : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>) -> (tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>)
  %l, %w1, %m1, %v1, %s1, %c1, %cm1, %cv1, %cs1, %w21, %m21, %v21, %s21 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s, %b, %b, %b, %s, %w2, %w2, %w2, %s acts = "relu,none" bias = [1, 0] decoupled : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>) -> (tensor<f32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}
