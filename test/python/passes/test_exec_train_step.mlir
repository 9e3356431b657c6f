// Data for test_exec_differential.py and test_exec_plan_memory.py (not a lit test:
// lit does not look under test/python).
// A two-layer MLP train step written by hand: forward, cross-entropy, backward
// primitives, Adam on layer 1 (with weight decay), SGD with momentum on fc2.weight,
// plain SGD on fc2.bias, dropout whose Philox offset advances every step.
func.func @train_step(
    %x: tensor<8x4xf32> {aicfc.role = "input", aicfc.name = "x"},
    %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"},
    %w1: tensor<16x4xf32> {aicfc.role = "param", aicfc.name = "fc1.weight"},
    %b1: tensor<16xf32> {aicfc.role = "param", aicfc.name = "fc1.bias"},
    %w2: tensor<3x16xf32> {aicfc.role = "param", aicfc.name = "fc2.weight"},
    %b2: tensor<3xf32> {aicfc.role = "param", aicfc.name = "fc2.bias"},
    %mw1: tensor<16x4xf32> {aicfc.role = "state", aicfc.name = "fc1.weight.exp_avg"},
    %vw1: tensor<16x4xf32> {aicfc.role = "state", aicfc.name = "fc1.weight.exp_avg_sq"},
    %sw1: tensor<f32> {aicfc.role = "state", aicfc.name = "fc1.weight.step"},
    %mb1: tensor<16xf32> {aicfc.role = "state", aicfc.name = "fc1.bias.exp_avg"},
    %vb1: tensor<16xf32> {aicfc.role = "state", aicfc.name = "fc1.bias.exp_avg_sq"},
    %sb1: tensor<f32> {aicfc.role = "state", aicfc.name = "fc1.bias.step"},
    %bw2: tensor<3x16xf32> {aicfc.role = "state", aicfc.name = "fc2.weight.momentum_buffer"},
    %off: tensor<i64> {aicfc.role = "state", aicfc.name = "rng.offset"})
    -> (tensor<f32> {aicfc.name = "loss"},
        tensor<16x4xf32> {aicfc.name = "fc1.weight"}, tensor<16xf32> {aicfc.name = "fc1.bias"},
        tensor<3x16xf32> {aicfc.name = "fc2.weight"}, tensor<3xf32> {aicfc.name = "fc2.bias"},
        tensor<16x4xf32> {aicfc.name = "fc1.weight.exp_avg"},
        tensor<16x4xf32> {aicfc.name = "fc1.weight.exp_avg_sq"},
        tensor<f32> {aicfc.name = "fc1.weight.step"},
        tensor<16xf32> {aicfc.name = "fc1.bias.exp_avg"},
        tensor<16xf32> {aicfc.name = "fc1.bias.exp_avg_sq"},
        tensor<f32> {aicfc.name = "fc1.bias.step"},
        tensor<3x16xf32> {aicfc.name = "fc2.weight.momentum_buffer"},
        tensor<i64> {aicfc.name = "rng.offset"},
        tensor<8x3xf32> {aicfc.name = "logits"}) {
  %z1 = graph.matmul %x, %w1 transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %a1 = graph.bias_add %z1, %b1 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h1 = graph.relu %a1 : tensor<8x16xf32>
  %d1 = graph.dropout %h1, %off p = 0.25 seed = 7 : tensor<8x16xf32>, tensor<i64>
  %lo = graph.gemm_epilogue %d1, %w2 bias %b2 transpose_b : (tensor<8x16xf32>, tensor<3x16xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %loss = graph.cross_entropy %lo, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %dlo = autodiff.cross_entropy_grad %lo, %y, %one : (tensor<8x3xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x3xf32>
  %dw2 = graph.matmul %dlo, %d1 transpose_a : (tensor<8x3xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
  %db2 = graph.reduce_sum %dlo axes = [0] : tensor<8x3xf32> -> tensor<3xf32>
  %dd1 = graph.matmul %dlo, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dh1 = autodiff.dropout_grad %dd1, %off p = 0.25 seed = 7 : tensor<8x16xf32>, tensor<i64>
  %da1 = autodiff.relu_grad %dh1, %h1 : tensor<8x16xf32>
  %dw1 = graph.matmul %da1, %x transpose_a : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db1 = graph.reduce_sum %da1 axes = [0] : tensor<8x16xf32> -> tensor<16xf32>
  %h_lr = graph.constant dense<1.0e-2> : tensor<f64>
  %h_beta1 = graph.constant dense<0.9> : tensor<f64>
  %h_beta2 = graph.constant dense<0.999> : tensor<f64>
  %h_eps = graph.constant dense<1.0e-8> : tensor<f64>
  %h_wd = graph.constant dense<1.0e-2> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1n, %mw1n, %vw1n, %sw1n = autodiff.adam_step %w1, %dw1, %mw1, %vw1, %sw1 lr(%h_lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<16x4xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %h_wd_1 = graph.constant dense<0.0> : tensor<f64>
  %b1n, %mb1n, %vb1n, %sb1n = autodiff.adam_step %b1, %db1, %mb1, %vb1, %sb1 lr(%h_lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd_1) grad_scale(%h_one) apply(%h_one) : tensor<16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %h_lr_1 = graph.constant dense<0.1> : tensor<f64>
  %h_mu = graph.constant dense<0.9> : tensor<f64>
  %w2n, %bw2n = autodiff.sgd_step %w2, %dw2 lr(%h_lr_1) momentum(%h_mu) weight_decay(%h_wd_1) grad_scale(%h_one) apply(%h_one) momentum_buffer(%bw2) : tensor<3x16xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<3x16xf32>
  %h_mu_1 = graph.constant dense<0.0> : tensor<f64>
  %b2n = autodiff.sgd_step %b2, %db2 lr(%h_lr_1) momentum(%h_mu_1) weight_decay(%h_wd_1) grad_scale(%h_one) apply(%h_one) : tensor<3xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %onei = graph.constant dense<1> : tensor<i64>
  %offn = graph.add %off, %onei : tensor<i64>
  func.return %loss, %w1n, %b1n, %w2n, %b2n, %mw1n, %vw1n, %sw1n, %mb1n, %vb1n, %sb1n, %bw2n, %offn, %lo
    : tensor<f32>, tensor<16x4xf32>, tensor<16xf32>, tensor<3x16xf32>, tensor<3xf32>,
      tensor<16x4xf32>, tensor<16x4xf32>, tensor<f32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>,
      tensor<3x16xf32>, tensor<i64>, tensor<8x3xf32>
}
