// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{backend=numpy}' | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{backend=cuda}' | filecheck %s --check-prefix=CUDA

// Linear + SiLU + Linear + cross-entropy + SGD through the whole pipeline. SiLU is one row
// of the activation table: its Linear fuses into gemm_epilogue act = silu, which keeps the
// pre-activation Z (silu_grad reads the input), and its backward into epilogue_grad
// act = silu, which the next layer's dX product then absorbs (gemm_epilogue_grad), on
// both kernel families; on CUDA that product (K = 10) runs on the skinny kernel, then
// the epilogue in place, as the unfused pair would. cuBLASLt has no SiLU epilogue: at
// 1024 x 1024 x 512, where cuBLASLt runs a Linear + ReLU in one launch, the SiLU layer
// runs as the split entry (cuBLASLt's product + bias into Z, then our SiLU kernel: 512M
// multiply-adds, above the selector's SPLIT_EPILOGUE_MIN_MACS).

// CHECK-LABEL: exec.program @train_step
// CHECK:       exec.launch "numpy.gemm_epilogue_out"(%x, %w1, %b1) outs(%h, %z) params {act = "silu", transpose_b = true}
// CHECK-NOT:   numpy.silu
// CHECK:       exec.launch "numpy.gemm_epilogue_grad_out"(%dlogits, %w2, %z) outs(%{{.*}}, %db1) params {act = "silu"}
// CHECK-NOT:   numpy.silu_grad
// CHECK:       exec.output "loss" %loss

// CUDA-LABEL: exec.program @train_step
// CUDA:       exec.launch "cuda.gemm_epilogue_cublaslt_then_act_f32"(%x, %w1, %b1) outs(%h, %z) params {act = "silu", transpose_b = true}
// CUDA-NOT:   cublaslt{{.*}}act = "silu"
// CUDA:       exec.launch "cuda.gemm_epilogue_grad_skinny_nn"(%dlogits, %w2, %z) outs(%{{.*}}, %db1) params {act = "silu"}
// CUDA-NOT:   cuda.silu
// CUDA:       exec.output "loss" %loss

func.func @train_step(
    %x: tensor<1024x512xf32> {aicfc.role = "input", aicfc.name = "x"},
    %y: tensor<1024xi32> {aicfc.role = "input", aicfc.name = "y"},
    %w1: tensor<1024x512xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
    %b1: tensor<1024xf32> {aicfc.role = "param", aicfc.name = "0.bias"},
    %w2: tensor<10x1024xf32> {aicfc.role = "param", aicfc.name = "2.weight"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<1024x512xf32> {aicfc.name = "0.weight"},
        tensor<1024xf32> {aicfc.name = "0.bias"}, tensor<10x1024xf32> {aicfc.name = "2.weight"}) {
  %m = graph.matmul %x, %w1 transpose_b : (tensor<1024x512xf32>, tensor<1024x512xf32>) -> tensor<1024x1024xf32>
  %z = graph.bias_add %m, %b1 : (tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<1024x1024xf32>
  %h = graph.silu %z : tensor<1024x1024xf32>
  %logits = graph.matmul %h, %w2 transpose_b : (tensor<1024x1024xf32>, tensor<10x1024xf32>) -> tensor<1024x10xf32>
  %loss = graph.cross_entropy %logits, %y : (tensor<1024x10xf32>, tensor<1024xi32>) -> tensor<f32>
  %g1, %gb, %g2 = autodiff.backward %loss wrt %w1, %b1, %w2 : tensor<f32>, (tensor<1024x512xf32>, tensor<1024xf32>, tensor<10x1024xf32>) -> (tensor<1024x512xf32>, tensor<1024xf32>, tensor<10x1024xf32>)
  %h_lr = graph.constant dense<1.000000e-02> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1n = autodiff.sgd_step %w1, %g1 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<1024x512xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %b1n = autodiff.sgd_step %b1, %gb lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<1024xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %w2n = autodiff.sgd_step %w2, %g2 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<10x1024xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %loss, %w1n, %b1n, %w2n : tensor<f32>, tensor<1024x512xf32>, tensor<1024xf32>, tensor<10x1024xf32>
}
