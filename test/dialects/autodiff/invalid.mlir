// One case per verifier message of the autodiff dialect: each checks the
// message (which names the op and what mismatches) and where it points. Every
// `raise VerifyException` in dialects/autodiff.py must be exercised by a case
// here (test/python/test_registry.py says which one is missing).
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @backward_loss_not_scalar(%l: tensor<2xf32>, %w: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.backward: loss must have one element, got shape [2]
  %g = autodiff.backward %l wrt %w : tensor<2xf32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return
}

// -----

func.func @backward_result_count(%l: tensor<f32>, %w: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.backward: 1 values in wrt but 2 results
  %g:2 = "autodiff.backward"(%l, %w) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  func.return
}

// -----

func.func @backward_result_type(%l: tensor<f32>, %w: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.backward: result #0 has type tensor<8xf32>, expected tensor<4xf32> (the type of wrt #0)
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<4xf32>) -> (tensor<8xf32>)
  func.return
}

// -----

func.func @softmax_grad_axis(%dy: tensor<8x10xf32>, %y: tensor<8x10xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.softmax_grad: axis -3 is out of range for rank 2
  %dx = autodiff.softmax_grad %dy, %y axis = -3 : tensor<8x10xf32>
  func.return
}

// -----

func.func @cross_entropy_grad_labels(%x: tensor<8x10xf32>, %y: tensor<8xf32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_grad: labels must be i32 or i64, got f32
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8x10xf32>
  func.return
}

// -----

func.func @cross_entropy_grad_label_shape(%x: tensor<8x10xf32>, %y: tensor<4xi32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_grad: labels must have shape [8] (the leading dims of logits [8, 10]), got [4]
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<8x10xf32>
  func.return
}

// -----

func.func @cross_entropy_grad_dloss(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_grad: grad must be tensor<f32>, got tensor<8xf32>
  %dx = autodiff.cross_entropy_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x10xf32>
  func.return
}

// -----

func.func @mse_loss_grad_target(%p: tensor<8x4xf32>, %t: tensor<8x2xf32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mse_loss_grad: pred tensor<8x4xf32> and target tensor<8x2xf32> must have one type
  %dp = autodiff.mse_loss_grad %p, %t, %dl : (tensor<8x4xf32>, tensor<8x2xf32>, tensor<f32>) -> tensor<8x4xf32>
  func.return
}

// -----

func.func @mse_loss_grad_dloss(%p: tensor<8x4xf32>, %t: tensor<8x4xf32>, %dl: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mse_loss_grad: grad must be tensor<f32>, got tensor<f64>
  %dp = autodiff.mse_loss_grad %p, %t, %dl : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f64>) -> tensor<8x4xf32>
  func.return
}

// -----

func.func @dropout_grad_p(%dy: tensor<8xf32>, %off: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.dropout_grad: p must be in [0, 1), got -0.5
  %dx = autodiff.dropout_grad %dy, %off p = -0.5 seed = 7 : tensor<8xf32>, tensor<i64>
  func.return
}

// -----

func.func @epilogue_grad_rank(%dy: tensor<8xf32>, %y: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.epilogue_grad: grad must have rank >= 2 [..., M, N], got [8]
  %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  func.return
}

// -----

func.func @epilogue_grad_saved(%dy: tensor<8x16xf32>, %y: tensor<16x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.epilogue_grad: grad tensor<8x16xf32> and saved tensor<16x8xf32> must have one type
  %dz, %db = autodiff.epilogue_grad %dy, %y act = relu : (tensor<8x16xf32>, tensor<16x8xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_grad_saved(%a: tensor<8x10xf32>, %b: tensor<10x16xf32>, %y: tensor<16x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.gemm_epilogue_grad: saved must have the product's shape [8, 16], got [16, 8]
  %dz, %db = autodiff.gemm_epilogue_grad %a, %b, %y act = relu : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<16x8xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_grad_act_none(%a: tensor<8x10xf32>, %b: tensor<10x16xf32>, %y: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.gemm_epilogue_grad: act must be relu, gelu or silu (for none, the product is dZ: use graph.matmul and graph.reduce_sum)
  %dz, %db = autodiff.gemm_epilogue_grad %a, %b, %y act = none : (tensor<8x10xf32>, tensor<10x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_grad_k(%a: tensor<8x10xf32>, %b: tensor<12x16xf32>, %y: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.gemm_epilogue_grad: contraction dimensions differ: lhs [8, 10] has K=10, rhs [12, 16] has K=12
  %dz, %db = autodiff.gemm_epilogue_grad %a, %b, %y act = relu : (tensor<8x10xf32>, tensor<12x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @epilogue_grad_act_none(%dy: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.epilogue_grad: act must be relu, gelu or silu (for none, dZ = dY: use graph.reduce_sum)
  %dz, %db = autodiff.epilogue_grad %dy, %y act = none : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @adam_step_counter(%p: tensor<4xf32>, %s: tensor<i64>, %h: tensor<f64>, %one: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: step must be a scalar tensor<f32>, got tensor<i64>
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<i64>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_low_copy_result(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>, %w: tensor<4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: 1 low_copy operand(s) but 0 new low copy result(s); the updated copy must be returned exactly when one is passed
  %p1, %m1, %v1, %s1 = "autodiff.adam_step"(%p, %p, %p, %p, %s, %h, %h, %h, %h, %h, %one, %one, %w) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  func.return
}

// -----

func.func @adam_step_low_copy_dtype(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>, %w: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: low_copy must be a bf16 or f16 copy of an f32 param, got tensor<4xf32> for tensor<4xf32>
  %p1, %m1, %v1, %s1, %w1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) low_copy(%w : tensor<4xf32>) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  func.return
}

// -----

func.func @adam_step_low_copy_shape(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>, %w: tensor<2x2xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: low_copy must have the param's shape, got tensor<2x2xbf16> for tensor<4xf32>
  %p1, %m1, %v1, %s1, %w1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) low_copy(%w : tensor<2x2xbf16>) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<2x2xbf16>
  func.return
}

// -----

func.func @adam_step_low_copy_next(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>, %w: tensor<4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: new low copy must have low_copy's type tensor<4xbf16>, got tensor<4xf16>
  %p1, %m1, %v1, %s1, %w1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) low_copy(%w : tensor<4xbf16>) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xf16>
  func.return
}

// -----

func.func @adam_step_beta(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %b2 = graph.constant dense<1.0> : tensor<f64>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: beta2 must be in [0, 1), got 1.0
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %b2) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_negative_lr(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %lr = graph.constant dense<-1.0e-3> : tensor<f64>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: lr must be non-negative, got -0.001
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%lr) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_nan_lr(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %lr = graph.constant dense<0x7FF8000000000000> : tensor<f64>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: lr must be finite, got nan
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%lr) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_hyperparameter_not_scalar(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<2xf64>, %h: tensor<f64>, %one: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: lr must be a scalar (0-d) tensor, got tensor<2xf64>
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%lr) betas(%lr, %lr) eps(%lr) weight_decay(%lr) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<2xf64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_integer_hyperparameter(%p: tensor<4xf32>, %s: tensor<f32>, %i: tensor<i64>, %h: tensor<f64>, %one: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: lr must have a float element type (f16, bf16, f32, f64), got i64
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%i) betas(%i, %i) eps(%i) weight_decay(%i) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @adam_step_apply_not_a_flag(%p: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f64>, %one: tensor<f32>) {
  %half = graph.constant dense<0.5> : tensor<f32>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.adam_step: apply must be 0 or 1, got 0.5
  %p1, %m1, %v1, %s1 = autodiff.adam_step %p, %p, %p, %p, %s lr(%h) betas(%h, %h) eps(%h) weight_decay(%h) grad_scale(%one) apply(%half) : tensor<4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_momentum_without_buffer(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  %mu = graph.constant dense<0.9> : tensor<f64>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: momentum = 0.9 needs a momentum buffer operand (momentum_buffer(...))
  %p1 = autodiff.sgd_step %p, %g lr(%h) momentum(%mu) weight_decay(%h) grad_scale(%one) apply(%one) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_nesterov_without_momentum(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: nesterov needs momentum
  %p1 = autodiff.sgd_step %p, %g lr(%h) momentum(%h) weight_decay(%h) grad_scale(%one) apply(%one) nesterov : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return
}

// -----

func.func @sgd_step_buffer_not_returned(%p: tensor<4xf32>, %g: tensor<4xf32>, %buf: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: 1 momentum buffer operand(s) but 0 new momentum buffer result(s); the updated buffer must be returned exactly when one is passed
  %p1 = "autodiff.sgd_step"(%p, %g, %h, %h, %h, %one, %one, %buf) : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @sgd_step_negative_momentum(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f64>, %one: tensor<f32>) {
  %mu = graph.constant dense<-0.9> : tensor<f64>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.sgd_step: momentum must be non-negative, got -0.9
  %p1, %b1 = autodiff.sgd_step %p, %g lr(%h) momentum(%mu) weight_decay(%h) grad_scale(%one) apply(%one) momentum_buffer(%g) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  func.return
}

// -----

func.func @lr_schedule_unknown_kind(%e: tensor<i64>, %a: tensor<f32>, %lr: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: unknown kind 'onecycle' (known: constant, linear, step, exponential, cosine)
  %e1, %l = autodiff.lr_schedule %e, %a, %lr kinds = "onecycle" milestones = [] coefficients = [1.0, 0.0, 0.0, 0.0] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  func.return
}

// -----

func.func @lr_schedule_milestones(%e: tensor<i64>, %a: tensor<f32>, %lr: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: 2 segments need 1 milestones, got 0
  %e1, %l = autodiff.lr_schedule %e, %a, %lr kinds = "linear,cosine" milestones = [] coefficients = [0.1, 1.0, 5.0, 0.0, 10.0, 0.0, 0.0, 0.0] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  func.return
}

// -----

func.func @lr_schedule_negative_t_max(%e: tensor<i64>, %a: tensor<f32>, %lr: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: segment 0 (cosine): T_max must be a whole number >= 1, got -5
  %e1, %l = autodiff.lr_schedule %e, %a, %lr kinds = "cosine" milestones = [] coefficients = [-5.0, 0.0, 0.0, 0.0] : tensor<i64>, tensor<f32>, tensor<f64> -> tensor<f64>
  func.return
}

// -----

func.func @lr_schedule_counter(%e: tensor<f32>, %a: tensor<f32>, %lr: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: last_epoch must be a scalar tensor<i64>, got tensor<f32>
  %e1, %l = autodiff.lr_schedule %e, %a, %lr kinds = "cosine" milestones = [] coefficients = [5.0, 0.0, 0.0, 0.0] : tensor<f32>, tensor<f32>, tensor<f64> -> tensor<f64>
  func.return
}

// -----

func.func @lr_schedule_no_group(%e: tensor<i64>, %a: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: needs at least one initial_lr (a param group)
  %e1 = "autodiff.lr_schedule"(%e, %a) <{kinds = "cosine", milestones = array<i64>, coefficients = array<f64: 5.0, 0.0, 0.0, 0.0>}> : (tensor<i64>, tensor<f32>) -> tensor<i64>
  func.return
}

// -----

func.func @lr_schedule_results(%e: tensor<i64>, %a: tensor<f32>, %lr: tensor<f64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.lr_schedule: 1 initial_lr operands but 2 lr results; one learning rate per param group
  %e1, %l:2 = "autodiff.lr_schedule"(%e, %a, %lr) <{kinds = "cosine", milestones = array<i64>, coefficients = array<f64: 5.0, 0.0, 0.0, 0.0>}> : (tensor<i64>, tensor<f32>, tensor<f64>) -> (tensor<i64>, tensor<f64>, tensor<f64>)
  func.return
}

// -----

func.func @clip_grad_norm_max_norm(%g: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.clip_grad_norm: max_norm must be positive and finite, got 0.0
  %n, %c = autodiff.clip_grad_norm %g max_norm = 0.0 : tensor<4xf32> -> tensor<f32>
  func.return
}

// -----

func.func @clip_grad_norm_dtypes(%g: tensor<4xf32>, %h: tensor<4xf64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.clip_grad_norm: every gradient must have one dtype, got f32 (gradient #0) and f64 (gradient #1)
  %n, %c = autodiff.clip_grad_norm %g, %h max_norm = 1.0 : tensor<4xf32>, tensor<4xf64> -> tensor<f32>
  func.return
}

// -----

func.func @clip_grad_norm_result_type(%g: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.clip_grad_norm: total_norm and clip_coef must be tensor<f32>, got tensor<f64>
  %n, %c = autodiff.clip_grad_norm %g max_norm = 1.0 : tensor<4xf32> -> tensor<f64>
  func.return
}

// -----

func.func @clip_grad_norm_no_gradient() {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.clip_grad_norm: needs at least one gradient
  %n, %c = "autodiff.clip_grad_norm"() <{max_norm = 1.0 : f64}> : () -> (tensor<f32>, tensor<f32>)
  func.return
}

// -----

func.func @clip_grad_norm_integer(%g: tensor<4xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.clip_grad_norm: gradient #0 must have a float element type (f16, bf16, f32, f64), got i32
  %n, %c = autodiff.clip_grad_norm %g max_norm = 1.0 : tensor<4xi32> -> tensor<i32>
  func.return
}

// -----

func.func @accumulation_step_every(%c: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulation_step: every must be >= 1, got 0
  %c1, %a = autodiff.accumulation_step %c every = 0 : tensor<i64> -> tensor<f32>
  func.return
}

// -----

func.func @accumulation_step_flag(%c: tensor<i64>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulation_step: apply must be a tensor<f32>, got tensor<f64>
  %c1, %a = autodiff.accumulation_step %c every = 2 : tensor<i64> -> tensor<f64>
  func.return
}

// -----

func.func @accumulation_step_counter(%c: tensor<i32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulation_step: count must be a scalar tensor<i64>, got tensor<i32>
  %c1, %a = autodiff.accumulation_step %c every = 2 : tensor<i32> -> tensor<f32>
  func.return
}

// -----

func.func @accumulate_grad_every(%g: tensor<4xf32>, %r: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulate_grad: every must be >= 1, got 0
  %m, %a = autodiff.accumulate_grad %g, %g, %r every = 0 : tensor<4xf32>, tensor<f32>
  func.return
}

// -----

func.func @accumulate_grad_reset(%g: tensor<4xf32>) {
  %r = graph.constant dense<2.0> : tensor<f32>
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulate_grad: reset must be 0 or 1, got 2.0
  %m, %a = autodiff.accumulate_grad %g, %g, %r every = 2 : tensor<4xf32>, tensor<f32>
  func.return
}

// -----

func.func @accumulate_grad_integer(%g: tensor<4xi32>, %r: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.accumulate_grad: grad must have a float element type (f16, bf16, f32, f64), got i32
  %m, %a = autodiff.accumulate_grad %g, %g, %r every = 2 : tensor<4xi32>, tensor<f32>
  func.return
}

// -----

func.func @mse_loss_grad_empty(%p: tensor<0x3xf32>, %d: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mse_loss_grad: pred must have at least one element (a mean over none is undefined), got [0, 3]
  %g = autodiff.mse_loss_grad %p, %p, %d : (tensor<0x3xf32>, tensor<0x3xf32>, tensor<f32>) -> tensor<0x3xf32>
  func.return
}

// -----

func.func @cross_entropy_with_grad_labels(%x: tensor<8x10xf32>, %y: tensor<8xf32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_with_grad: labels must be i32 or i64, got f32
  %l, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  func.return
}

// -----

func.func @cross_entropy_with_grad_label_shape(%x: tensor<8x10xf32>, %y: tensor<4xi32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_with_grad: labels must have shape [8] (the leading dims of logits [8, 10]), got [4]
  %l, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  func.return
}

// -----

func.func @cross_entropy_with_grad_dloss(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_with_grad: grad must be tensor<f32>, got tensor<8xf32>
  %l, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> (tensor<f32>, tensor<8x10xf32>)
  func.return
}

// -----

// Was accepted: the fused loss-and-gradient op skipped the check its parts make.
func.func @cross_entropy_with_grad_empty(%x: tensor<0x10xf32>, %y: tensor<0xi32>, %dl: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.cross_entropy_with_grad: logits must have at least one element (a mean over none is undefined), got [0, 10]
  %l, %dx = autodiff.cross_entropy_with_grad %x, %y, %dl : (tensor<0x10xf32>, tensor<0xi32>, tensor<f32>) -> (tensor<f32>, tensor<0x10xf32>)
  func.return
}

// -----

func.func @embedding_grad_shape(%dy: tensor<2x8x16xf32>, %ids: tensor<2x4xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.embedding_grad: grad must be [..., D] with the ids' shape [2, 4] in front, got [2, 8, 16]
  %dw = autodiff.embedding_grad %dy, %ids num_embeddings = 65 : (tensor<2x8x16xf32>, tensor<2x4xi32>) -> tensor<65x16xf32>
  func.return
}

// -----

func.func @embedding_grad_rows(%dy: tensor<2x8x16xf32>, %ids: tensor<2x8xi32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.embedding_grad: num_embeddings must be positive, got 0
  %dw = "autodiff.embedding_grad"(%dy, %ids) <{num_embeddings = 0 : i64}> : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<0x16xf32>
  func.return
}

// -----

func.func @layer_norm_grad_dy(%dy: tensor<4x16xf32>, %x: tensor<8x16xf32>, %m: tensor<8xf32>, %r: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.layer_norm_grad: grad tensor<4x16xf32> and input tensor<8x16xf32> must have one type
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x16xf32>)
  func.return
}

// -----

func.func @layer_norm_grad_stats(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>, %m: tensor<16xf32>, %r: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.layer_norm_grad: mean must be tensor<8xf32> (the leading dims of input tensor<8x16xf32>), got tensor<16xf32>
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<8xf32>) -> (tensor<8x16xf32>)
  func.return
}

// -----

func.func @layer_norm_grad_weight_result(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>, %m: tensor<8xf32>, %r: tensor<8xf32>, %w: tensor<16xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.layer_norm_grad: the grad_weight result is present exactly when the weight operand is
  %dx = autodiff.layer_norm_grad %dy, %x, %m, %r weight %w : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>) -> (tensor<8x16xf32>)
  func.return
}

// -----

func.func @add_layer_norm_grad_residual(%dy: tensor<8x16xf32>, %dr: tensor<8x8xf32>, %x: tensor<8x16xf32>, %m: tensor<8xf32>, %r: tensor<8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.add_layer_norm_grad: residual_grad tensor<8x8xf32> and grad tensor<8x16xf32> must have one type
  %dx = autodiff.add_layer_norm_grad %dy, %dr, %x, %m, %r : (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x16xf32>)
  func.return
}

// -----

func.func @attention_grad_out(%q: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x2xf32>, %l: tensor<1x2x8xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.scaled_dot_product_attention_grad: out must have q's type tensor<1x2x8x4xf32>, got tensor<1x2x8x2xf32>
  %dq, %dk, %dv = autodiff.scaled_dot_product_attention_grad %q, %q, %q, %q, %o, %l causal scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  func.return
}

// -----

func.func @packed_attention_grad_out(%qkv: tensor<1x4x24xf32>, %o: tensor<1x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.packed_qkv_attention_grad: grad must be tensor<1x4x8xf32>, got tensor<1x4x24xf32>
  %d = autodiff.packed_qkv_attention_grad %qkv, %qkv, %o, %l heads = 2 causal scale = 0.5 : (tensor<1x4x24xf32>, tensor<1x4x24xf32>, tensor<1x4x8xf32>, tensor<1x2x4xf32>) -> tensor<1x4x24xf32>
  func.return
}

// -----

func.func @packed_attention_grad_lse(%qkv: tensor<1x4x24xf32>, %o: tensor<1x4x8xf32>, %l: tensor<1x4x2xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.packed_qkv_attention_grad: lse must be tensor<1x2x4xf32>, got tensor<1x4x2xf32>
  %d = autodiff.packed_qkv_attention_grad %o, %qkv, %o, %l heads = 2 causal scale = 0.5 : (tensor<1x4x8xf32>, tensor<1x4x24xf32>, tensor<1x4x8xf32>, tensor<1x4x2xf32>) -> tensor<1x4x24xf32>
  func.return
}

// -----

func.func @packed_attention_grad_lse_dtype(%qkv: tensor<1x4x24xbf16>, %o: tensor<1x4x8xbf16>, %l: tensor<1x2x4xf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.packed_qkv_attention_grad: lse must be tensor<1x2x4xbf16> or tensor<1x2x4xf32>, got tensor<1x2x4xf16>
  %d = autodiff.packed_qkv_attention_grad %o, %qkv, %o, %l heads = 2 causal scale = 0.5 : (tensor<1x4x8xbf16>, tensor<1x4x24xbf16>, tensor<1x4x8xbf16>, tensor<1x2x4xf16>) -> tensor<1x4x24xbf16>
  func.return
}

// -----

func.func @attention_grad_lse(%q: tensor<1x2x8x4xf32>, %l: tensor<1x2x4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.scaled_dot_product_attention_grad: lse must be tensor<1x2x8xf32>, got tensor<1x2x4xf32>
  %dq, %dk, %dv = autodiff.scaled_dot_product_attention_grad %q, %q, %q, %q, %q, %l causal scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  func.return
}

// -----

func.func @update_scale_growth(%s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.update_scale: growth_factor must be finite and > 1, got 1.0
  %s1, %t1 = autodiff.update_scale %s, %s, %s growth_factor = 1.0
  func.return
}

// -----

func.func @update_scale_backoff(%s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.update_scale: backoff_factor must be in (0, 1), got 1.5
  %s1, %t1 = autodiff.update_scale %s, %s, %s backoff_factor = 1.5
  func.return
}

// -----

func.func @update_scale_interval(%s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.update_scale: growth_interval must be >= 1, got 0
  %s1, %t1 = autodiff.update_scale %s, %s, %s growth_interval = 0
  func.return
}

// -----

func.func @mlp_train_step_acts_bias(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: acts (2 layers) and bias (1) must name the same layers, at least one
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "relu,none" bias = [0] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_unknown_act(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: unknown activation 'swish' in acts
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "swish" bias = [0] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_last_act(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: the last layer gives logits: its act must be none
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "relu" bias = [0] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_counts(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: 1 layers (bias [1]) take 18 operands and give 9 results, got 14 and 5
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "none" bias = [1] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_x_rank(%x: tensor<24xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: x must be a matrix [M, K], got [24]
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "none" bias = [0] : (tensor<24xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_weight(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>, %v: tensor<3x5xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: layer 0 weight must be [N, 6] (its input width), got [3, 5]
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %v, %v, %v, %s acts = "none" bias = [0] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_bias(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>, %b: tensor<4xf32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: layer 0 bias must be [3]
  %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s, %b, %b, %b, %s acts = "none" bias = [1] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  func.return
}

// -----

func.func @mlp_train_step_result_type(%x: tensor<4x6xf32>, %y: tensor<4xi32>, %one: tensor<f32>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %w: tensor<3x6xf32>, %s: tensor<f32>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.mlp_train_step: result #2 must have the type of operand #11 (tensor<3x6xf32>), got tensor<3x5xf32>
  %r0, %r1, %r2, %r3, %r4 = autodiff.mlp_train_step %x, %y, %one, %lr, %b1, %b2, %eps, %wd, %one, %one, %w, %w, %w, %s acts = "none" bias = [0] : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x5xf32>, tensor<3x6xf32>, tensor<f32>)
  func.return
}

// -----

func.func @epilogue_grad_wide_dz(%a: tensor<4x4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.epilogue_grad: result type is tensor<4x4xf32>, expected tensor<4x4xbf16>
  %dz, %db = autodiff.epilogue_grad %a, %a act = relu : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> (tensor<4x4xf32>, tensor<4xf32>)
  func.return
}

// -----

func.func @gemm_epilogue_grad_wide_f64(%a: tensor<4x4xbf16>) {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: autodiff.gemm_epilogue_grad: result #1 has element type f64; expected bf16 (the operands' dtype), or f32 when the operands are bf16/f16 (the fp32 accumulation written unrounded)
  %dz, %db = autodiff.gemm_epilogue_grad %a, %a, %a act = relu : (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4x4xbf16>) -> (tensor<4x4xbf16>, tensor<4xf64>)
  func.return
}
