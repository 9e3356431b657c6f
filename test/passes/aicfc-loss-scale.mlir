// RUN: aicfc-opt %s -p aicfc-loss-scale | filecheck %s
// RUN: not aicfc-opt %s -p 'aicfc-loss-scale,aicfc-loss-scale' 2>&1 | filecheck %s --check-prefix=TWICE

// Dynamic loss scaling: the step gains the state amp.scale and amp.growth_tracker (and
// their next values as results), the backward is seeded with the scale, its gradient is
// unscaled with a found-inf flag, every param and optimizer state the gradient reaches
// keeps its old value on an overflow (amp_select), the RNG offset advances as before,
// and update_scale gives the next scale and tracker.

// CHECK-LABEL: func.func @step
// CHECK-SAME:  %amp_scale: tensor<f32> {aicfc.role = "state", aicfc.name = "amp.scale"}, %amp_growth_tracker: tensor<f32> {aicfc.role = "state", aicfc.name = "amp.growth_tracker"}
// CHECK-SAME:  tensor<f32> {aicfc.name = "amp.scale"}, tensor<f32> {aicfc.name = "amp.growth_tracker"})
// CHECK:       %g = autodiff.backward %l wrt %w1 seed %amp_scale
// CHECK-NEXT:  %g_1, %found_inf = autodiff.unscale_grad %g, %amp_scale : tensor<4x16xf32>
// CHECK-NEXT:  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g_1, %m1, %v1, %s1
// CHECK:       %offn = graph.add %off, %one : tensor<i64>
// CHECK-NEXT:  %[[W:.*]] = autodiff.amp_select %found_inf, %w1n, %w1 : tensor<4x16xf32>
// CHECK-NEXT:  %[[M:.*]] = autodiff.amp_select %found_inf, %m1n, %m1 : tensor<4x16xf32>
// CHECK-NEXT:  %[[V:.*]] = autodiff.amp_select %found_inf, %v1n, %v1 : tensor<4x16xf32>
// CHECK-NEXT:  %[[S:.*]] = autodiff.amp_select %found_inf, %s1n, %s1 : tensor<f32>
// CHECK-NEXT:  %[[SC:.*]], %[[T:.*]] = autodiff.update_scale %amp_scale, %amp_growth_tracker, %found_inf
// CHECK-NEXT:  func.return %l, %[[W]], %[[M]], %[[V]], %[[S]], %offn, %[[SC]], %[[T]]

// TWICE: error: 'autodiff.backward' the step already has the loss-scaling state amp.scale
func.func @step(%x: tensor<8x16xf32> {aicfc.role = "input", aicfc.name = "x"}, %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"}, %w1: tensor<4x16xf32> {aicfc.role = "param", aicfc.name = "0.weight"}, %m1: tensor<4x16xf32> {aicfc.role = "state", aicfc.name = "0.weight.exp_avg"}, %v1: tensor<4x16xf32> {aicfc.role = "state", aicfc.name = "0.weight.exp_avg_sq"}, %s1: tensor<f32> {aicfc.role = "state", aicfc.name = "0.weight.step"}, %off: tensor<i64> {aicfc.role = "state", aicfc.name = "rng.offset"}) -> (tensor<f32> {aicfc.name = "loss"}, tensor<4x16xf32> {aicfc.name = "0.weight"}, tensor<4x16xf32> {aicfc.name = "0.weight.exp_avg"}, tensor<4x16xf32> {aicfc.name = "0.weight.exp_avg_sq"}, tensor<f32> {aicfc.name = "0.weight.step"}, tensor<i64> {aicfc.name = "rng.offset"}) {
  %z = graph.matmul %x, %w1 transpose_b : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %l = graph.cross_entropy %z, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %lr = graph.constant dense<1.0e-3> : tensor<f64>
  %beta1 = graph.constant dense<0.9> : tensor<f64>
  %beta2 = graph.constant dense<0.999> : tensor<f64>
  %eps = graph.constant dense<1.0e-8> : tensor<f64>
  %wd = graph.constant dense<0.0> : tensor<f64>
  %gs = graph.constant dense<1.0> : tensor<f32>
  %ap = graph.constant dense<1.0> : tensor<f32>
  %g = autodiff.backward %l wrt %w1 : tensor<f32>, (tensor<4x16xf32>) -> (tensor<4x16xf32>)
  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g, %m1, %v1, %s1 lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%gs) apply(%ap) : tensor<4x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %one = graph.constant dense<1> : tensor<i64>
  %offn = graph.add %off, %one : tensor<i64>
  func.return %l, %w1n, %m1n, %v1n, %s1n, %offn : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<i64>
}
