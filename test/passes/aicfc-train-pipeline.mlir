// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{backend=numpy inplace=true}' | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{inplace=false}' | filecheck %s --check-prefix=NOINPLACE
// RUN: not aicfc-opt %s -p 'aicfc-train-pipeline{backend=tpu}' 2>&1 | filecheck %s --check-prefix=BADBACKEND

// One linear layer + softmax cross-entropy + Adam: the whole pipeline turns the
// graph-level step into one exec.program whose Adam updates run in place.

// CHECK-LABEL: exec.program @train_step
// CHECK-SAME: arena
// CHECK-DAG:  %x = exec.buffer "x" : !exec.buffer<4x3xf32, input>
// CHECK-DAG:  %y = exec.buffer "y" : !exec.buffer<4xi32, input>
// CHECK-DAG:  %w = exec.buffer "fc.weight" : !exec.buffer<2x3xf32, param>
// CHECK-DAG:  %m = exec.buffer "fc.weight.exp_avg" : !exec.buffer<2x3xf32, state>
// CHECK:      exec.graph {
// The forward matmul + bias_add became one fused launch.
// CHECK:      exec.launch "numpy.gemm_epilogue_out"(%x, %w, %b)
// The loss, its gradient and the bias gradient (a column sum of dZ) are one fused launch.
// CHECK:      exec.launch "numpy.cross_entropy_with_grad_out"(%logits, %y, %dloss) outs(%loss, %dlogits, %db)
// Each Adam update right after its gradient (aicfc-hoist-updates; dW = dZ^T X), writing
// param, exp_avg, exp_avg_sq and step in place: outputs are the input buffers (then the
// hyperparameters, the grad_scale and apply scalars).
// CHECK:      exec.launch "numpy.adam_step_out"(%b, %db, %bm, %bv, %bs, {{.*}}) outs(%b, %bm, %bv, %bs)
// CHECK-SAME: alias = "adam_triplet"
// CHECK:      exec.launch "numpy.matmul_out"(%dlogits, %x) outs(%dw) params {transpose_a = true}
// CHECK:      exec.launch "numpy.adam_step_out"(%w, %dw, %m, %v, %s, {{.*}}) outs(%w, %m, %v, %s)
// In place, nothing is copied back.
// CHECK-NOT:  exec.copy
// CHECK:      exec.output "loss" %loss
// CHECK-NOT:  func.func
// CHECK-NOT:  autodiff.backward

// With inplace=false the updates write fresh buffers that are copied back.
// NOINPLACE-LABEL: exec.program @train_step
// NOINPLACE:       exec.launch "numpy.adam_step_out"(%w, %dw, %m, %v, %s, {{.*}}) outs(%w1, %m1, %v1, %s1)
// NOINPLACE:       exec.copy %w1 -> %w
// NOINPLACE-NEXT:  exec.copy %m1 -> %m
// NOINPLACE-NEXT:  exec.copy %v1 -> %v
// NOINPLACE-NEXT:  exec.copy %s1 -> %s

// BADBACKEND: unknown backend 'tpu'

func.func @train_step(
    %x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "x"},
    %y: tensor<4xi32> {aicfc.role = "input", aicfc.name = "y"},
    %w: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
    %m: tensor<2x3xf32> {aicfc.role = "state", aicfc.name = "fc.weight.exp_avg"},
    %v: tensor<2x3xf32> {aicfc.role = "state", aicfc.name = "fc.weight.exp_avg_sq"},
    %s: tensor<f32> {aicfc.role = "state", aicfc.name = "fc.weight.step"},
    %b: tensor<2xf32> {aicfc.role = "param", aicfc.name = "fc.bias"},
    %bm: tensor<2xf32> {aicfc.role = "state", aicfc.name = "fc.bias.exp_avg"},
    %bv: tensor<2xf32> {aicfc.role = "state", aicfc.name = "fc.bias.exp_avg_sq"},
    %bs: tensor<f32> {aicfc.role = "state", aicfc.name = "fc.bias.step"})
    -> (tensor<f32> {aicfc.name = "loss"},
        tensor<2x3xf32> {aicfc.name = "fc.weight"}, tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avg"},
        tensor<2x3xf32> {aicfc.name = "fc.weight.exp_avg_sq"}, tensor<f32> {aicfc.name = "fc.weight.step"},
        tensor<2xf32> {aicfc.name = "fc.bias"}, tensor<2xf32> {aicfc.name = "fc.bias.exp_avg"},
        tensor<2xf32> {aicfc.name = "fc.bias.exp_avg_sq"}, tensor<f32> {aicfc.name = "fc.bias.step"}) {
  %h = graph.matmul %x, %w transpose_b : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %logits = graph.bias_add %h, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %loss = graph.cross_entropy %logits, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  %gw, %gb = autodiff.backward %loss wrt %w, %b : tensor<f32>, (tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2xf32>)
  %h_lr = graph.constant dense<1.000000e-03> : tensor<f64>
  %h_beta1 = graph.constant dense<0.9> : tensor<f64>
  %h_beta2 = graph.constant dense<0.999> : tensor<f64>
  %h_eps = graph.constant dense<1.0e-8> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1, %m1, %v1, %s1 = autodiff.adam_step %w, %gw, %m, %v, %s lr(%h_lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2x3xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1, %bm1, %bv1, %bs1 = autodiff.adam_step %b, %gb, %bm, %bv, %bs lr(%h_lr) betas(%h_beta1, %h_beta2) eps(%h_eps) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %loss, %w1, %m1, %v1, %s1, %b1, %bm1, %bv1, %bs1 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>
}
