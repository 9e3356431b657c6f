// RUN: aicfc-run %s --steps 40 --print-every 20 --seed 1 2>&1 | filecheck %s
// RUN: not aicfc-run %s -f nope 2>&1 | filecheck %s --check-prefix=NOFUNC

// aicfc-run lowers this graph-level train step with the train pipeline, generates
// x ~ N(0, 1), labels in [0, 2) (the logits' width), torch-default params, zero
// Adam state and the learning rate state at its aicfc.init (0.1), and trains 40 Adam
// steps on that one batch (random labels: the loss falls from about ln 2 towards the
// best a linear model can do).

// CHECK:      aicfc-run: generated inputs x, y; 2 params; 7 states at their initial values (seed 1)
// CHECK-NEXT: step 1: loss 0.6{{[0-9]+}}
// CHECK-NEXT: step 20: loss 0.5{{[0-9]+}}
// CHECK-NEXT: step 40: loss 0.5{{[0-9]+}}
// CHECK-NEXT: @train_step: 40 step(s) on numpy
// CHECK-NEXT:   loss: float32[]

// NOFUNC: aicfc-run: error: no function @nope in the module (functions: train_step)

func.func @train_step(
    %x: tensor<8x3xf32> {aicfc.role = "input", aicfc.name = "x"},
    %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"},
    %w: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
    %m: tensor<2x3xf32> {aicfc.role = "state", aicfc.name = "fc.weight.exp_avg"},
    %v: tensor<2x3xf32> {aicfc.role = "state", aicfc.name = "fc.weight.exp_avg_sq"},
    %s: tensor<f32> {aicfc.role = "state", aicfc.name = "fc.weight.step"},
    %b: tensor<2xf32> {aicfc.role = "param", aicfc.name = "fc.bias"},
    %bm: tensor<2xf32> {aicfc.role = "state", aicfc.name = "fc.bias.exp_avg"},
    %bv: tensor<2xf32> {aicfc.role = "state", aicfc.name = "fc.bias.exp_avg_sq"},
    %bs: tensor<f32> {aicfc.role = "state", aicfc.name = "fc.bias.step"},
    %lr: tensor<f64> {aicfc.role = "state", aicfc.name = "optim.0.lr", aicfc.init = dense<0.1> : tensor<f64>})
    -> (tensor<f32> {aicfc.name = "loss"},
        tensor<2x3xf32> {aicfc.name = "fc.weight"}, tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avg"},
        tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avg_sq"}, tensor<f32> {aicfc.name = "fc.weight.step"},
        tensor<2xf32> {aicfc.name = "fc.bias"}, tensor<2xf32> {aicfc.name = "fc.bias.exp_avg"},
        tensor<2xf32> {aicfc.name = "fc.bias.exp_avg_sq"}, tensor<f32> {aicfc.name = "fc.bias.step"},
        tensor<f64> {aicfc.name = "optim.0.lr"}) {
  %h = graph.matmul %x, %w transpose_b : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
  %logits = graph.bias_add %h, %b : (tensor<8x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
  %loss = graph.cross_entropy %logits, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  %gw, %gb = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2xf32>)
  %h_beta1 = graph.constant dense<0.9> : tensor<f64>
  %h_beta2 = graph.constant dense<0.999> : tensor<f64>
  %h_eps = graph.constant dense<1.0e-8> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1, %m1, %v1, %s1 = autodiff.adam_step %w, %gw, %m, %v, %s lr(%lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2x3xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1, %bm1, %bv1, %bs1 = autodiff.adam_step %b, %gb, %bm, %bv, %bs lr(%lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %loss, %w1, %m1, %v1, %s1, %b1, %bm1, %bv1, %bs1, %lr : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<f64>
}
