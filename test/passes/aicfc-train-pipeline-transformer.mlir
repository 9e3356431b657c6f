// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{backend=numpy}' | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-train-pipeline{backend=cuda}' | filecheck %s --check-prefix=CUDA

// A one-block GPT train step (B = 1, T = 4, 2 heads of 2, V = 5; causal attention with
// dropout; pre-LN; a tied head; SGD as graph ops), written as a model emits it, through
// the whole pipeline on the NumPy backend: the attention chain becomes one
// scaled_dot_product_attention and, with the heads' split, reshapes and transposes
// around it, one packed_qkv_attention reading c_attn's output in place, whose backward
// reads its out and lse and writes the packed gradient (no concat); the residual adds
// before ln_2 and ln_f become add_layer_norm (their sums, means and rstds read by the
// backward), the MLP's Linear + GELU on [B, T, D] a gemm_epilogue, the loss fuses with its
// gradient, and each layer norm's gradient but ln_f's adds the residual stream's gradient
// to its dx (add_layer_norm_grad: no add launch left in the backward before the
// embeddings' gradients); the i32 ids are an input buffer; the multi-result ops write one buffer per
// result. The CUDA kernel family has a kernel for each of them (head dim 2: the packed
// row attention kernels of attention_rows.cu; V = 5: the loss fused with its gradient).

// CHECK-LABEL: exec.program @train_step
// CHECK:       %x = exec.buffer "x" : !exec.buffer<1x4xi32, input>
// CHECK:       exec.launch "numpy.embedding_out"(%x, %transformer_wte_weight) outs(%{{.*}}) : (!exec.buffer<1x4xi32, input>, !exec.buffer<5x4xf32, param>) -> (!exec.buffer<1x4x4xf32, tmp>)
// CHECK-NOT:   numpy.split_out
// CHECK:       exec.launch "numpy.gemm_epilogue_out"(%{{.*}}, %transformer_h_0_attn_c_attn_weight, %transformer_h_0_attn_c_attn_bias) outs(%[[QKV:.*]]) params
// CHECK-NEXT:  exec.launch "numpy.packed_qkv_attention_out"(%[[QKV]], %rng_offset) outs(%[[O:.*]], %[[LSE:.*]]) params {causal = true, scale = 0.70710678118654746 : f64, dropout_p = 1.000000e-01 : f64, seed = 2 : i64, num_heads = 2 : i64} : (!exec.buffer<1x4x12xf32, tmp>, !exec.buffer<i64, state>) -> (!exec.buffer<1x4x4xf32, tmp>, !exec.buffer<1x2x4xf32, tmp>)
// CHECK-NEXT:  exec.launch "numpy.gemm_epilogue_out"(%[[O]], %transformer_h_0_attn_c_proj_weight, %transformer_h_0_attn_c_proj_bias)
// CHECK-NOT:   numpy.softmax
// CHECK:       exec.launch "numpy.add_layer_norm_out"(%{{.*}}, %{{.*}}, %transformer_h_0_ln_2_weight, %transformer_h_0_ln_2_bias) outs(%[[S:.*]], %[[Y:.*]], %[[M:.*]], %[[R:.*]]) params {eps = 1.000000e-05 : f64}
// CHECK:       exec.launch "numpy.gemm_epilogue_out"(%[[Y]], %transformer_h_0_mlp_c_fc_weight, %transformer_h_0_mlp_c_fc_bias) outs(%{{.*}}, %{{.*}}) params {act = "gelu", transpose_b = true} : (!exec.buffer<1x4x4xf32, tmp>
// CHECK:       exec.launch "numpy.add_layer_norm_out"(%[[S]], %{{.*}}, %transformer_ln_f_weight, %transformer_ln_f_bias)
// CHECK:       exec.launch "numpy.cross_entropy_with_grad_out"
// CHECK:       exec.launch "numpy.layer_norm_grad_out"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %transformer_ln_f_weight) outs(%[[DLNF:.*]], %dtransformer_ln_f_weight,
// CHECK-NOT:   numpy.add_out
// CHECK:       exec.launch "numpy.add_layer_norm_grad_out"(%{{.*}}, %[[DLNF]], %[[S]], %[[M]], %[[R]], %transformer_h_0_ln_2_weight) outs(%{{.*}}, %dtransformer_h_0_ln_2_weight, %dtransformer_h_0_ln_2_bias)
// CHECK-NOT:   numpy.transpose_out
// CHECK-NOT:   numpy.add_out
// CHECK:       exec.launch "numpy.packed_qkv_attention_grad_out"(%{{.*}}, %[[QKV]], %[[O]], %[[LSE]], %rng_offset) outs(%[[DQKV:.*]]) params {causal = true, scale = 0.70710678118654746 : f64, dropout_p = 1.000000e-01 : f64, seed = 2 : i64, num_heads = 2 : i64}
// CHECK-NEXT:  exec.launch "numpy.matmul_out"(%[[DQKV]], %transformer_h_0_attn_c_attn_weight)
// CHECK-NOT:   numpy.concat_out
// CHECK-NOT:   numpy.add_out
// CHECK:       exec.launch "numpy.add_layer_norm_grad_out"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %transformer_h_0_ln_1_weight)
// CHECK-NOT:   numpy.add_out
// CHECK:       exec.launch "numpy.embedding_grad_out"(%{{.*}}, %x) outs(%{{.*}}) params {num_embeddings = 5 : i64}
// CHECK:       exec.output "loss"

// CUDA-LABEL: exec.program @train_step
// CUDA:       exec.launch "cuda.embedding_f32_i32"(%x, %transformer_wte_weight)
// CUDA-NOT:   cuda.split
// CUDA:       exec.launch "cuda.packed_qkv_attention_rows_f32"(%[[QKV:.*]], %rng_offset) outs(%[[O:.*]], %[[LSE:.*]]) params {causal = true, scale = 0.70710678118654746 : f64, dropout_p = 1.000000e-01 : f64, seed = 2 : i64, num_heads = 2 : i64}
// CUDA:       exec.launch "cuda.add_layer_norm_f32"(%{{.*}}, %{{.*}}, %transformer_h_0_ln_2_weight, %transformer_h_0_ln_2_bias) outs(%[[S:.*]], %{{.*}}, %[[M:.*]], %[[R:.*]]) params {eps = 1.000000e-05 : f64}
// CUDA:       exec.launch "cuda.add_layer_norm_f32"(%[[S]], %{{.*}}, %transformer_ln_f_weight, %transformer_ln_f_bias)
// CUDA:       exec.launch "cuda.cross_entropy_with_grad_f32_i32"
// CUDA:       exec.launch "cuda.layer_norm_grad_f32"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %transformer_ln_f_weight) outs(%[[DLNF:.*]], %dtransformer_ln_f_weight,
// CUDA-NOT:   cuda.add_f32
// CUDA:       exec.launch "cuda.add_layer_norm_grad_f32"(%{{.*}}, %[[DLNF]], %[[S]], %[[M]], %[[R]], %transformer_h_0_ln_2_weight) outs(%{{.*}}, %dtransformer_h_0_ln_2_weight, %dtransformer_h_0_ln_2_bias)
// CUDA-NOT:   cuda.permute
// CUDA-NOT:   cuda.transpose
// CUDA:       exec.launch "cuda.packed_qkv_attention_grad_rows_f32"(%{{.*}}, %[[QKV]], %[[O]], %[[LSE]], %rng_offset)
// CUDA-NOT:   cuda.concat
// CUDA-NOT:   cuda.add_f32
// CUDA:       exec.launch "cuda.add_layer_norm_grad_f32"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %transformer_h_0_ln_1_weight)
// CUDA-NOT:   cuda.add_f32
// CUDA:       exec.launch "cuda.embedding_grad_f32_i32"(%{{.*}}, %x) outs(%{{.*}}) params {num_embeddings = 5 : i64}
// CUDA:       exec.output "loss"


func.func @train_step(%x: tensor<1x4xi32> {aicfc.role = "input", aicfc.name = "x"}, %y: tensor<1x4xi32> {aicfc.role = "input", aicfc.name = "y"}, %transformer_wte_weight: tensor<5x4xf32> {aicfc.role = "param", aicfc.name = "transformer.wte.weight"}, %transformer_wpe_weight: tensor<4x4xf32> {aicfc.role = "param", aicfc.name = "transformer.wpe.weight"}, %transformer_h_0_ln_1_weight: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.ln_1.weight"}, %transformer_h_0_ln_1_bias: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.ln_1.bias"}, %transformer_h_0_attn_c_attn_weight: tensor<12x4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.attn.c_attn.weight"}, %transformer_h_0_attn_c_attn_bias: tensor<12xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.attn.c_attn.bias"}, %transformer_h_0_attn_c_proj_weight: tensor<4x4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.attn.c_proj.weight"}, %transformer_h_0_attn_c_proj_bias: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.attn.c_proj.bias"}, %transformer_h_0_ln_2_weight: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.ln_2.weight"}, %transformer_h_0_ln_2_bias: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.ln_2.bias"}, %transformer_h_0_mlp_c_fc_weight: tensor<16x4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.mlp.c_fc.weight"}, %transformer_h_0_mlp_c_fc_bias: tensor<16xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.mlp.c_fc.bias"}, %transformer_h_0_mlp_c_proj_weight: tensor<4x16xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.mlp.c_proj.weight"}, %transformer_h_0_mlp_c_proj_bias: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.h.0.mlp.c_proj.bias"}, %transformer_ln_f_weight: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.ln_f.weight"}, %transformer_ln_f_bias: tensor<4xf32> {aicfc.role = "param", aicfc.name = "transformer.ln_f.bias"}, %rng_offset: tensor<i64> {aicfc.role = "state", aicfc.name = "rng.offset"}) -> (tensor<f32> {aicfc.name = "loss"}, tensor<1x4x5xf32> {aicfc.name = "logits"}, tensor<5x4xf32> {aicfc.name = "transformer.wte.weight"}, tensor<4x4xf32> {aicfc.name = "transformer.wpe.weight"}, tensor<4xf32> {aicfc.name = "transformer.h.0.ln_1.weight"}, tensor<4xf32> {aicfc.name = "transformer.h.0.ln_1.bias"}, tensor<12x4xf32> {aicfc.name = "transformer.h.0.attn.c_attn.weight"}, tensor<12xf32> {aicfc.name = "transformer.h.0.attn.c_attn.bias"}, tensor<4x4xf32> {aicfc.name = "transformer.h.0.attn.c_proj.weight"}, tensor<4xf32> {aicfc.name = "transformer.h.0.attn.c_proj.bias"}, tensor<4xf32> {aicfc.name = "transformer.h.0.ln_2.weight"}, tensor<4xf32> {aicfc.name = "transformer.h.0.ln_2.bias"}, tensor<16x4xf32> {aicfc.name = "transformer.h.0.mlp.c_fc.weight"}, tensor<16xf32> {aicfc.name = "transformer.h.0.mlp.c_fc.bias"}, tensor<4x16xf32> {aicfc.name = "transformer.h.0.mlp.c_proj.weight"}, tensor<4xf32> {aicfc.name = "transformer.h.0.mlp.c_proj.bias"}, tensor<4xf32> {aicfc.name = "transformer.ln_f.weight"}, tensor<4xf32> {aicfc.name = "transformer.ln_f.bias"}, tensor<i64> {aicfc.name = "rng.offset"}) {
  %0 = graph.embedding %x, %transformer_wte_weight : (tensor<1x4xi32>, tensor<5x4xf32>) -> tensor<1x4x4xf32>
  %1 = graph.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %2 = graph.embedding %1, %transformer_wpe_weight : (tensor<4xi32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = graph.broadcast_to %2 : tensor<4x4xf32> -> tensor<1x4x4xf32>
  %4 = graph.add %0, %3 : tensor<1x4x4xf32>
  %5 = graph.dropout %4, %rng_offset p = 1.000000e-01 seed = 1 : tensor<1x4x4xf32>, tensor<i64>
  %6, %7, %8 = graph.layer_norm %5 weight %transformer_h_0_ln_1_weight bias %transformer_h_0_ln_1_bias eps = 1.000000e-05 : tensor<1x4x4xf32>, tensor<4xf32>, tensor<4xf32> -> (tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %9 = graph.matmul %6, %transformer_h_0_attn_c_attn_weight transpose_b : (tensor<1x4x4xf32>, tensor<12x4xf32>) -> tensor<1x4x12xf32>
  %10 = graph.bias_add %9, %transformer_h_0_attn_c_attn_bias : (tensor<1x4x12xf32>, tensor<12xf32>) -> tensor<1x4x12xf32>
  %11, %12, %13 = graph.split %10 axis = 2 sizes = [4, 4, 4] : tensor<1x4x12xf32> -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  %14 = graph.reshape %11 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %15 = graph.transpose %14 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %16 = graph.reshape %12 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %17 = graph.transpose %16 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %18 = graph.reshape %13 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %19 = graph.transpose %18 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %20 = graph.matmul %15, %17 transpose_b : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %21 = graph.scale %20 factor = 0.70710678118654746 : tensor<1x2x4x4xf32>
  %22 = graph.causal_mask %21 : tensor<1x2x4x4xf32>
  %23 = graph.softmax %22 axis = -1 : tensor<1x2x4x4xf32>
  %24 = graph.dropout %23, %rng_offset p = 1.000000e-01 seed = 2 : tensor<1x2x4x4xf32>, tensor<i64>
  %25 = graph.matmul %24, %19 : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %26 = graph.transpose %25 perm = [0, 2, 1, 3] : tensor<1x2x4x2xf32> -> tensor<1x4x2x2xf32>
  %27 = graph.reshape %26 : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  %28 = graph.matmul %27, %transformer_h_0_attn_c_proj_weight transpose_b : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
  %29 = graph.bias_add %28, %transformer_h_0_attn_c_proj_bias : (tensor<1x4x4xf32>, tensor<4xf32>) -> tensor<1x4x4xf32>
  %30 = graph.dropout %29, %rng_offset p = 1.000000e-01 seed = 3 : tensor<1x4x4xf32>, tensor<i64>
  %31 = graph.add %5, %30 : tensor<1x4x4xf32>
  %32, %33, %34 = graph.layer_norm %31 weight %transformer_h_0_ln_2_weight bias %transformer_h_0_ln_2_bias eps = 1.000000e-05 : tensor<1x4x4xf32>, tensor<4xf32>, tensor<4xf32> -> (tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %35 = graph.matmul %32, %transformer_h_0_mlp_c_fc_weight transpose_b : (tensor<1x4x4xf32>, tensor<16x4xf32>) -> tensor<1x4x16xf32>
  %36 = graph.bias_add %35, %transformer_h_0_mlp_c_fc_bias : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %37 = graph.gelu %36 : tensor<1x4x16xf32>
  %38 = graph.matmul %37, %transformer_h_0_mlp_c_proj_weight transpose_b : (tensor<1x4x16xf32>, tensor<4x16xf32>) -> tensor<1x4x4xf32>
  %39 = graph.bias_add %38, %transformer_h_0_mlp_c_proj_bias : (tensor<1x4x4xf32>, tensor<4xf32>) -> tensor<1x4x4xf32>
  %40 = graph.dropout %39, %rng_offset p = 1.000000e-01 seed = 4 : tensor<1x4x4xf32>, tensor<i64>
  %41 = graph.add %31, %40 : tensor<1x4x4xf32>
  %42, %43, %44 = graph.layer_norm %41 weight %transformer_ln_f_weight bias %transformer_ln_f_bias eps = 1.000000e-05 : tensor<1x4x4xf32>, tensor<4xf32>, tensor<4xf32> -> (tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %45 = graph.matmul %42, %transformer_wte_weight transpose_b : (tensor<1x4x4xf32>, tensor<5x4xf32>) -> tensor<1x4x5xf32>
  %46 = graph.cross_entropy %45, %y : (tensor<1x4x5xf32>, tensor<1x4xi32>) -> tensor<f32>
  %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62 = autodiff.backward %46 wrt %transformer_wte_weight, %transformer_wpe_weight, %transformer_h_0_ln_1_weight, %transformer_h_0_ln_1_bias, %transformer_h_0_attn_c_attn_weight, %transformer_h_0_attn_c_attn_bias, %transformer_h_0_attn_c_proj_weight, %transformer_h_0_attn_c_proj_bias, %transformer_h_0_ln_2_weight, %transformer_h_0_ln_2_bias, %transformer_h_0_mlp_c_fc_weight, %transformer_h_0_mlp_c_fc_bias, %transformer_h_0_mlp_c_proj_weight, %transformer_h_0_mlp_c_proj_bias, %transformer_ln_f_weight, %transformer_ln_f_bias : tensor<f32>, (tensor<5x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<5x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %63 = graph.scale %47 factor = 1.000000e-01 : tensor<5x4xf32>
  %64 = graph.sub %transformer_wte_weight, %63 : tensor<5x4xf32>
  %65 = graph.scale %48 factor = 1.000000e-01 : tensor<4x4xf32>
  %66 = graph.sub %transformer_wpe_weight, %65 : tensor<4x4xf32>
  %67 = graph.scale %49 factor = 1.000000e-01 : tensor<4xf32>
  %68 = graph.sub %transformer_h_0_ln_1_weight, %67 : tensor<4xf32>
  %69 = graph.scale %50 factor = 1.000000e-01 : tensor<4xf32>
  %70 = graph.sub %transformer_h_0_ln_1_bias, %69 : tensor<4xf32>
  %71 = graph.scale %51 factor = 1.000000e-01 : tensor<12x4xf32>
  %72 = graph.sub %transformer_h_0_attn_c_attn_weight, %71 : tensor<12x4xf32>
  %73 = graph.scale %52 factor = 1.000000e-01 : tensor<12xf32>
  %74 = graph.sub %transformer_h_0_attn_c_attn_bias, %73 : tensor<12xf32>
  %75 = graph.scale %53 factor = 1.000000e-01 : tensor<4x4xf32>
  %76 = graph.sub %transformer_h_0_attn_c_proj_weight, %75 : tensor<4x4xf32>
  %77 = graph.scale %54 factor = 1.000000e-01 : tensor<4xf32>
  %78 = graph.sub %transformer_h_0_attn_c_proj_bias, %77 : tensor<4xf32>
  %79 = graph.scale %55 factor = 1.000000e-01 : tensor<4xf32>
  %80 = graph.sub %transformer_h_0_ln_2_weight, %79 : tensor<4xf32>
  %81 = graph.scale %56 factor = 1.000000e-01 : tensor<4xf32>
  %82 = graph.sub %transformer_h_0_ln_2_bias, %81 : tensor<4xf32>
  %83 = graph.scale %57 factor = 1.000000e-01 : tensor<16x4xf32>
  %84 = graph.sub %transformer_h_0_mlp_c_fc_weight, %83 : tensor<16x4xf32>
  %85 = graph.scale %58 factor = 1.000000e-01 : tensor<16xf32>
  %86 = graph.sub %transformer_h_0_mlp_c_fc_bias, %85 : tensor<16xf32>
  %87 = graph.scale %59 factor = 1.000000e-01 : tensor<4x16xf32>
  %88 = graph.sub %transformer_h_0_mlp_c_proj_weight, %87 : tensor<4x16xf32>
  %89 = graph.scale %60 factor = 1.000000e-01 : tensor<4xf32>
  %90 = graph.sub %transformer_h_0_mlp_c_proj_bias, %89 : tensor<4xf32>
  %91 = graph.scale %61 factor = 1.000000e-01 : tensor<4xf32>
  %92 = graph.sub %transformer_ln_f_weight, %91 : tensor<4xf32>
  %93 = graph.scale %62 factor = 1.000000e-01 : tensor<4xf32>
  %94 = graph.sub %transformer_ln_f_bias, %93 : tensor<4xf32>
  %95 = graph.constant dense<1> : tensor<i64>
  %96 = graph.add %rng_offset, %95 : tensor<i64>
  func.return %46, %45, %64, %66, %68, %70, %72, %74, %76, %78, %80, %82, %84, %86, %88, %90, %92, %94, %96 : tensor<f32>, tensor<1x4x5xf32>, tensor<5x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
}
