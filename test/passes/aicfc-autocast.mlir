// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fuse,aicfc-autocast' | filecheck %s
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fuse,aicfc-autocast{dtype=fp16}' | filecheck %s --check-prefix=F16
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-fuse,aicfc-autocast,aicfc-expand-backward' | filecheck %s --check-prefix=BWD
// RUN: not aicfc-opt %s -p 'aicfc-autocast{dtype=fp8}' 2>&1 | filecheck %s --check-prefix=BAD

// BAD: aicfc-opt: error: bad pass options in 'aicfc-autocast{dtype=fp8}': aicfc-autocast: unknown value 'fp8' for option 'dtype'; expected one of: bf16, fp16

// The MLP train step: the products (gemm epilogues after aicfc-fuse) read bf16 casts of
// the input, the fp32 master weights and biases and write bf16; the loss reads an f32
// cast of the logits; autodiff.backward, the optimizer and the results keep their f32
// types. After the backward expansion, each weight's gradient is an f32 cast of a bf16
// product (the cast's VJP), so Adam updates the f32 masters.

// CHECK-LABEL: func.func @mlp_step
// CHECK-NEXT:  %[[X:.*]] = graph.cast %x : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-NEXT:  %[[W1:.*]] = graph.cast %w1 : tensor<32x16xf32> to tensor<32x16xbf16>
// CHECK-NEXT:  %[[B1:.*]] = graph.cast %b1 : tensor<32xf32> to tensor<32xbf16>
// CHECK-NEXT:  %[[H:.*]] = graph.gemm_epilogue %[[X]], %[[W1]] bias %[[B1]] act = relu transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT:  %[[W2:.*]] = graph.cast %w2 : tensor<4x32xf32> to tensor<4x32xbf16>
// CHECK-NEXT:  %[[B2:.*]] = graph.cast %b2 : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT:  %[[Z:.*]] = graph.gemm_epilogue %[[H]], %[[W2]] bias %[[B2]] transpose_b : (tensor<8x32xbf16>, tensor<4x32xbf16>, tensor<4xbf16>) -> tensor<8x4xbf16>
// CHECK-NEXT:  %[[Z32:.*]] = graph.cast %[[Z]] : tensor<8x4xbf16> to tensor<8x4xf32>
// CHECK-NEXT:  %l = graph.cross_entropy %[[Z32]], %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
// CHECK-NEXT:  %g, %g_1 = autodiff.backward %l wrt %w1, %w2 : tensor<f32>, (tensor<32x16xf32>, tensor<4x32xf32>) -> (tensor<32x16xf32>, tensor<4x32xf32>)
// CHECK:       autodiff.adam_step %w1, %g, %m1, %v1, %s1 lr(%lr) {{.*}} : tensor<32x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
// CHECK:       func.return %l,

// F16-LABEL: func.func @mlp_step
// F16:       graph.gemm_epilogue {{.*}} : (tensor<8x16xf16>, tensor<32x16xf16>, tensor<32xf16>) -> tensor<8x32xf16>
// F16:       graph.cast %{{.*}} : tensor<8x4xf16> to tensor<8x4xf32>
// F16-NEXT:  graph.cross_entropy

// BWD-LABEL: func.func @mlp_step
// BWD:       %[[DZ:.*]] = graph.cast %{{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// BWD:       %[[DW2:.*]] = graph.matmul %[[DZ]], %{{.*}} transpose_a : (tensor<8x4xbf16>, tensor<8x32xbf16>) -> tensor<4x32xbf16>
// BWD:       graph.cast %[[DW2]] : tensor<4x32xbf16> to tensor<4x32xf32>
// BWD:       autodiff.adam_step %w1, %{{.*}} : tensor<32x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
func.func @mlp_step(%x: tensor<8x16xf32> {aicfc.role = "input", aicfc.name = "x"}, %y: tensor<8xi32> {aicfc.role = "input", aicfc.name = "y"}, %w1: tensor<32x16xf32> {aicfc.role = "param", aicfc.name = "0.weight"}, %b1: tensor<32xf32> {aicfc.role = "param", aicfc.name = "0.bias"}, %w2: tensor<4x32xf32> {aicfc.role = "param", aicfc.name = "2.weight"}, %b2: tensor<4xf32> {aicfc.role = "param", aicfc.name = "2.bias"}, %m1: tensor<32x16xf32>, %v1: tensor<32x16xf32>, %s1: tensor<f32>) -> (tensor<f32>, tensor<32x16xf32>, tensor<4x32xf32>) {
  %h0 = graph.matmul %x, %w1 transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %h1 = graph.bias_add %h0, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h = graph.relu %h1 : tensor<8x32xf32>
  %z0 = graph.matmul %h, %w2 transpose_b : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
  %z = graph.bias_add %z0, %b2 : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %l = graph.cross_entropy %z, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w1, %w2 : tensor<f32>, (tensor<32x16xf32>, tensor<4x32xf32>) -> (tensor<32x16xf32>, tensor<4x32xf32>)
  %lr = graph.constant dense<1.0e-3> : tensor<f64>
  %beta1 = graph.constant dense<0.9> : tensor<f64>
  %beta2 = graph.constant dense<0.999> : tensor<f64>
  %eps = graph.constant dense<1.0e-8> : tensor<f64>
  %wd = graph.constant dense<0.0> : tensor<f64>
  %gs = graph.constant dense<1.0> : tensor<f32>
  %ap = graph.constant dense<1.0> : tensor<f32>
  %w1n, %m1n, %v1n, %s1n = autodiff.adam_step %w1, %g#0, %m1, %v1, %s1 lr(%lr) betas(%beta1, %beta2) eps(%eps) weight_decay(%wd) grad_scale(%gs) apply(%ap) : tensor<32x16xf32>, tensor<f32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %w1n, %g#1 : tensor<f32>, tensor<32x16xf32>, tensor<4x32xf32>
}

// -----

// A GPT block's forward: layer norm (statistics and all) in f32, its output cast to bf16
// for the qkv product; attention (the first aicfc-fuse made it packed_qkv_attention,
// which reads the heads in place) reads one f32 cast of the packed qkv and stays f32: its
// head dim 4 has no low-precision kernel (docs/passes.md; @packed_attention_bf16 below is
// one that lowers), its merged output cast to bf16 for the projection; the residual add and layer
// norm (fused into add_layer_norm) read an f32 cast of the projection; the tied head's product is
// bf16 and the loss reads its f32 cast. A result leaving the function keeps its type.

// CHECK-LABEL: func.func @gpt_block
// CHECK:       %ln, %mean, %rstd = graph.layer_norm %x weight %lw bias %lb eps = {{.*}} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT:  %[[LN:.*]] = graph.cast %ln : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK:       graph.gemm_epilogue %[[LN]], %{{.*}} bias %{{.*}} transpose_b : (tensor<2x4x8xbf16>, tensor<24x8xbf16>, tensor<24xbf16>) -> tensor<2x4x24xbf16>
// CHECK-NEXT:  %[[QKV:.*]] = graph.cast %qkv : tensor<2x4x24xbf16> to tensor<2x4x24xf32>
// CHECK-NEXT:  %om, %{{.*}} = graph.packed_qkv_attention %[[QKV]] heads = 2 causal scale = {{.*}} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT:  graph.cast %om : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK:       %[[P:.*]] = graph.gemm_epilogue {{.*}} -> tensor<2x4x8xbf16>
// CHECK-NEXT:  %[[P32:.*]] = graph.cast %[[P]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK-NEXT:  %r, %ln2, %mean2, %rstd2 = graph.add_layer_norm %x, %[[P32]] weight %lw bias %lb eps = {{.*}} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:       %[[LOGITS:.*]] = graph.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT:  %[[L32:.*]] = graph.cast %[[LOGITS]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT:  %loss = graph.cross_entropy %[[L32]], %t
// CHECK-NEXT:  func.return %loss, %[[L32]] : tensor<f32>, tensor<2x4x16xf32>
func.func @gpt_block(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>, %lw: tensor<8xf32>, %lb: tensor<8xf32>, %wqkv: tensor<24x8xf32>, %bqkv: tensor<24xf32>, %wo: tensor<8x8xf32>, %bo: tensor<8xf32>, %wte: tensor<16x8xf32>) -> (tensor<f32>, tensor<2x4x16xf32>) {
  %ln, %mean, %rstd = graph.layer_norm %x weight %lw bias %lb eps = 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %qkv0 = graph.matmul %ln, %wqkv transpose_b : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %qkv = graph.bias_add %qkv0, %bqkv : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<2x4x24xf32> -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %q4 = graph.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k4 = graph.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v4 = graph.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o, %lse = graph.scaled_dot_product_attention %qh, %kh, %vh causal scale = 0.5 : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
  %ot = graph.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %om = graph.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %p0 = graph.matmul %om, %wo transpose_b : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %p = graph.bias_add %p0, %bo : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = graph.add %x, %p : tensor<2x4x8xf32>
  %ln2, %mean2, %rstd2 = graph.layer_norm %r weight %lw bias %lb eps = 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %logits = graph.matmul %ln2, %wte transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = graph.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  func.return %loss, %logits : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// Packed attention of head dim 32 without dropout (attention_mma.cu's kernels take it)
// lowers: it reads the bf16 product directly, writes a bf16 output and keeps its lse in
// f32 (the statistics its backward reads), the fp16 program likewise in f16; with dropout
// it stays f32, reading an f32 cast. The backward reads the f32 lse with the bf16 operands.

// CHECK-LABEL: func.func @packed_attention_bf16
// CHECK:       %[[QKV:.*]] = graph.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<1x4x16xbf16>, tensor<96x16xbf16>) -> tensor<1x4x96xbf16>
// CHECK-NEXT:  %o, %lse = graph.packed_qkv_attention %[[QKV]] heads = 1 causal scale = {{.*}} : (tensor<1x4x96xbf16>) -> (tensor<1x4x32xbf16>, tensor<1x1x4xf32>)
// CHECK-NEXT:  %[[QKV32:.*]] = graph.cast %[[QKV]] : tensor<1x4x96xbf16> to tensor<1x4x96xf32>
// CHECK-NEXT:  %od, %lsed = graph.packed_qkv_attention %[[QKV32]] offset %off heads = 1 causal scale = {{.*}} dropout_p = {{.*}} : (tensor<1x4x96xf32>, tensor<i64>) -> (tensor<1x4x32xf32>, tensor<1x1x4xf32>)
// F16-LABEL:   func.func @packed_attention_bf16
// F16:         graph.packed_qkv_attention %{{.*}} heads = 1 causal scale = {{.*}} : (tensor<1x4x96xf16>) -> (tensor<1x4x32xf16>, tensor<1x1x4xf32>)
// BWD-LABEL:   func.func @packed_attention_bf16
// BWD:         autodiff.packed_qkv_attention_grad %{{.*}}, %{{.*}}, %o, %lse heads = 1 causal scale = {{.*}} : (tensor<1x4x32xbf16>, tensor<1x4x96xbf16>, tensor<1x4x32xbf16>, tensor<1x1x4xf32>) -> tensor<1x4x96xbf16>
func.func @packed_attention_bf16(%x: tensor<1x4x16xf32>, %w: tensor<96x16xf32>, %off: tensor<i64>, %t: tensor<1x4xi32>) -> (tensor<f32>, tensor<96x16xf32>) {
  %qkv = graph.matmul %x, %w transpose_b : (tensor<1x4x16xf32>, tensor<96x16xf32>) -> tensor<1x4x96xf32>
  %o, %lse = graph.packed_qkv_attention %qkv heads = 1 causal scale = 0.25 : (tensor<1x4x96xf32>) -> (tensor<1x4x32xf32>, tensor<1x1x4xf32>)
  %od, %lsed = graph.packed_qkv_attention %qkv offset %off heads = 1 causal scale = 0.25 dropout_p = 0.1 : (tensor<1x4x96xf32>, tensor<i64>) -> (tensor<1x4x32xf32>, tensor<1x1x4xf32>)
  %s = graph.add %o, %od : tensor<1x4x32xf32>
  %l = graph.cross_entropy %s, %t : (tensor<1x4x32xf32>, tensor<1x4xi32>) -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<96x16xf32>) -> (tensor<96x16xf32>)
  func.return %l, %g : tensor<f32>, tensor<96x16xf32>
}

// -----

// The promote policy: an add of a bf16 product and an f32 value computes in f32 (torch's type
// promotion); a unary op after a product stays bf16; float64 products are not lowered.

// CHECK-LABEL: func.func @promote_add
// CHECK:       %[[M:.*]] = graph.matmul %{{.*}}, %{{.*}} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// CHECK-NEXT:  %t = graph.tanh %[[M]] : tensor<4x4xbf16>
// CHECK-NEXT:  %[[T32:.*]] = graph.cast %t : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK-NEXT:  %s = graph.add %[[T32]], %a : tensor<4x4xf32>
// CHECK-NEXT:  func.return %s
func.func @promote_add(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = graph.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = graph.tanh %m : tensor<4x4xf32>
  %s = graph.add %t, %a : tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @dont_lower_f64
// CHECK-NEXT:  %m = graph.matmul %a, %a : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
// CHECK-NEXT:  func.return %m
func.func @dont_lower_f64(%a: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %m = graph.matmul %a, %a : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  func.return %m : tensor<4x4xf64>
}
