// Every graph op in custom syntax: printed as checked, and unchanged by a round
// trip through the custom and the generic form (optional operands, results and
// properties present and absent; float properties such as p = 0.1 exact).
// RUN: aicfc-opt %s | filecheck %s
// RUN: aicfc-opt %s | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @constant
// CHECK-SAME: () -> (tensor<i64>, tensor<2x2xf32>) {
func.func @constant() -> (tensor<i64>, tensor<2x2xf32>) {
  // CHECK-NEXT: %one = graph.constant dense<1> : tensor<i64>
  %one = graph.constant dense<1> : tensor<i64>
  // CHECK-NEXT: %m = graph.constant dense<{{\[\[}}1.500000e+00, -2.000000e+00], [2.500000e-01, 3.000000e-04]]> : tensor<2x2xf32>
  // GENERIC: %m = "graph.constant"() <{value = dense<{{\[\[}}1.500000e+00, -2.000000e+00], [2.500000e-01, 3.000000e-04]]> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
  %m = graph.constant dense<[[1.5, -2.0], [0.25, 3.0e-4]]> : tensor<2x2xf32>
  // CHECK-NEXT: func.return %one, %m : tensor<i64>, tensor<2x2xf32>
  func.return %one, %m : tensor<i64>, tensor<2x2xf32>
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %bt: tensor<5x3xf32>, %at: tensor<3x4xf32>) {
func.func @matmul(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %bt: tensor<5x3xf32>, %at: tensor<3x4xf32>) {
  // CHECK-NEXT: %c = graph.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %c = graph.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: %d = graph.matmul %a, %bt transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %d = graph.matmul %a, %bt transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: %e = graph.matmul %at, %b transpose_a : (tensor<3x4xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %e = graph.matmul %at, %b transpose_a : (tensor<3x4xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: %f = graph.matmul %at, %bt transpose_a transpose_b : (tensor<3x4xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // GENERIC: %f = "graph.matmul"(%at, %bt) <{transpose_a, transpose_b}> : (tensor<3x4xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %f = graph.matmul %at, %bt transpose_a transpose_b : (tensor<3x4xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @gemm_epilogue
// CHECK-SAME: (%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %xt: tensor<4x8xf32>, %w2: tensor<4x16xf32>) {
func.func @gemm_epilogue(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>, %xt: tensor<4x8xf32>, %w2: tensor<4x16xf32>) {
  // CHECK-NEXT: %y0 = graph.gemm_epilogue %x, %w2 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  // GENERIC: %y0 = "graph.gemm_epilogue"(%x, %w2) : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %y0 = graph.gemm_epilogue %x, %w2 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %y1 = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y1 = graph.gemm_epilogue %x, %w bias %b act = relu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %y2, %z2 = graph.gemm_epilogue %xt, %w2 bias %b act = gelu transpose_a : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // GENERIC: %y2, %z2 = "graph.gemm_epilogue"(%xt, %w2, %b) <{act = #graph<activation gelu>, transpose_a}> : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %y2, %z2 = graph.gemm_epilogue %xt, %w2 bias %b act = gelu transpose_a : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: %y3 = graph.gemm_epilogue %xt, %w act = relu transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %y3 = graph.gemm_epilogue %xt, %w act = relu transpose_a transpose_b : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %y4, %z4 = graph.gemm_epilogue %x, %w bias %b act = silu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // GENERIC: %y4, %z4 = "graph.gemm_epilogue"(%x, %w, %b) <{act = #graph<activation silu>, transpose_b}> : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  %y4, %z4 = graph.gemm_epilogue %x, %w bias %b act = silu transpose_b : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%x: tensor<8x16xf32>, %b: tensor<16xf32>, %i: tensor<4xi32>, %off: tensor<i64>) {
func.func @elementwise(%x: tensor<8x16xf32>, %b: tensor<16xf32>, %i: tensor<4xi32>, %off: tensor<i64>) {
  // CHECK-NEXT: %0 = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %0 = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %1 = graph.add %x, %x : tensor<8x16xf32>
  %1 = graph.add %x, %x : tensor<8x16xf32>
  // CHECK-NEXT: %2 = graph.sub %x, %x : tensor<8x16xf32>
  %2 = graph.sub %x, %x : tensor<8x16xf32>
  // CHECK-NEXT: %3 = graph.mul %x, %x : tensor<8x16xf32>
  %3 = graph.mul %x, %x : tensor<8x16xf32>
  // CHECK-NEXT: %4 = graph.add %i, %i : tensor<4xi32>
  %4 = graph.add %i, %i : tensor<4xi32>
  // CHECK-NEXT: %5 = graph.add %off, %off : tensor<i64>
  %5 = graph.add %off, %off : tensor<i64>
  // CHECK-NEXT: %6 = graph.relu %x : tensor<8x16xf32>
  %6 = graph.relu %x : tensor<8x16xf32>
  // CHECK-NEXT: %7 = graph.gelu %x : tensor<8x16xf32>
  %7 = graph.gelu %x : tensor<8x16xf32>
  // CHECK-NEXT: %8 = graph.tanh %x : tensor<8x16xf32>
  %8 = graph.tanh %x : tensor<8x16xf32>
  // CHECK-NEXT: %9 = graph.dropout %x, %off p = 1.000000e-01 seed = 7 : tensor<8x16xf32>, tensor<i64>
  // GENERIC: %9 = "graph.dropout"(%x, %off) <{p = 1.000000e-01 : f64, seed = 7 : i64}> : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
  %9 = graph.dropout %x, %off p = 0.1 seed = 7 : tensor<8x16xf32>, tensor<i64>
  // CHECK-NEXT: %10 = graph.dropout %x, %off p = 0.123456789012345 seed = -3 : tensor<8x16xf32>, tensor<i64>
  // GENERIC: %10 = "graph.dropout"(%x, %off) <{p = 0.123456789012345 : f64, seed = -3 : i64}> : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x16xf32>
  %10 = graph.dropout %x, %off p = 0.123456789012345 seed = -3 : tensor<8x16xf32>, tensor<i64>
  // CHECK-NEXT: %11 = graph.silu %x : tensor<8x16xf32>
  // GENERIC: %11 = "graph.silu"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %11 = graph.silu %x : tensor<8x16xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @layout
// CHECK-SAME: (%x: tensor<8x16xf32>, %b: tensor<16xf32>, %s: tensor<f32>) {
func.func @layout(%x: tensor<8x16xf32>, %b: tensor<16xf32>, %s: tensor<f32>) {
  // CHECK-NEXT: %0 = graph.reshape %x : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %0 = graph.reshape %x : tensor<8x16xf32> -> tensor<2x4x16xf32>
  // CHECK-NEXT: %1 = graph.reshape %s : tensor<f32> -> tensor<1x1xf32>
  %1 = graph.reshape %s : tensor<f32> -> tensor<1x1xf32>
  // CHECK-NEXT: %2 = graph.transpose %x perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %2 = graph.transpose %x perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  // CHECK-NEXT: %3 = graph.transpose %0 perm = [2, 0, 1] : tensor<2x4x16xf32> -> tensor<16x2x4xf32>
  // GENERIC: %3 = "graph.transpose"(%0) <{perm = array<i64: 2, 0, 1>}> : (tensor<2x4x16xf32>) -> tensor<16x2x4xf32>
  %3 = graph.transpose %0 perm = [2, 0, 1] : tensor<2x4x16xf32> -> tensor<16x2x4xf32>
  // CHECK-NEXT: %4 = graph.broadcast_to %b : tensor<16xf32> -> tensor<8x16xf32>
  %4 = graph.broadcast_to %b : tensor<16xf32> -> tensor<8x16xf32>
  // CHECK-NEXT: %5 = graph.broadcast_to %s : tensor<f32> -> tensor<8x16xf32>
  %5 = graph.broadcast_to %s : tensor<f32> -> tensor<8x16xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%x: tensor<8x10xf32>) {
func.func @reductions(%x: tensor<8x10xf32>) {
  // CHECK-NEXT: %0 = graph.softmax %x axis = 1 : tensor<8x10xf32>
  %0 = graph.softmax %x axis = 1 : tensor<8x10xf32>
  // CHECK-NEXT: %1 = graph.softmax %x axis = -1 : tensor<8x10xf32>
  // GENERIC: %1 = "graph.softmax"(%x) <{axis = -1 : i64}> : (tensor<8x10xf32>) -> tensor<8x10xf32>
  %1 = graph.softmax %x axis = -1 : tensor<8x10xf32>
  // CHECK-NEXT: %2 = graph.reduce_sum %x axes = [0] : tensor<8x10xf32> -> tensor<10xf32>
  %2 = graph.reduce_sum %x axes = [0] : tensor<8x10xf32> -> tensor<10xf32>
  // CHECK-NEXT: %3 = graph.reduce_sum %x axes = [0, 1] keepdims : tensor<8x10xf32> -> tensor<1x1xf32>
  // GENERIC: %3 = "graph.reduce_sum"(%x) <{axes = array<i64: 0, 1>, keepdims}> : (tensor<8x10xf32>) -> tensor<1x1xf32>
  %3 = graph.reduce_sum %x axes = [0, 1] keepdims : tensor<8x10xf32> -> tensor<1x1xf32>
  // CHECK-NEXT: %4 = graph.reduce_sum %x axes = [-1, 0] : tensor<8x10xf32> -> tensor<f32>
  %4 = graph.reduce_sum %x axes = [-1, 0] : tensor<8x10xf32> -> tensor<f32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @losses
// CHECK-SAME: (%x: tensor<8x10xf32>, %y: tensor<8xi32>, %y64: tensor<8xi64>, %t: tensor<8x10xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
func.func @losses(%x: tensor<8x10xf32>, %y: tensor<8xi32>, %y64: tensor<8xi64>, %t: tensor<8x10xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  // CHECK-NEXT: %0 = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %0 = graph.cross_entropy %x, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  // CHECK-NEXT: %1 = graph.cross_entropy %x, %y64 : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  %1 = graph.cross_entropy %x, %y64 : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  // CHECK-NEXT: %2 = graph.mse_loss %x, %t : tensor<8x10xf32> -> tensor<f32>
  %2 = graph.mse_loss %x, %t : tensor<8x10xf32> -> tensor<f32>
  // CHECK-NEXT: func.return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
  func.return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @batched_matmul
// CHECK-SAME: (%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %p: tensor<2x4x8x6xf32>, %h: tensor<4x6x16xf32>, %b: tensor<32xf32>) {
func.func @batched_matmul(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %p: tensor<2x4x8x6xf32>, %h: tensor<4x6x16xf32>, %b: tensor<32xf32>) {
  // CHECK-NEXT: %lin = graph.matmul %x, %w transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %lin = graph.matmul %x, %w transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  // CHECK-NEXT: %s = graph.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  // GENERIC: %s = "graph.matmul"(%q, %k) <{transpose_b}> : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  %s = graph.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  // CHECK-NEXT: %o = graph.matmul %p, %h : (tensor<2x4x8x6xf32>, tensor<4x6x16xf32>) -> tensor<2x4x8x16xf32>
  %o = graph.matmul %p, %h : (tensor<2x4x8x6xf32>, tensor<4x6x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK-NEXT: %y = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %y = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK-NEXT: %z = graph.bias_add %lin, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %z = graph.bias_add %lin, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @transformer_layout
// CHECK-SAME: (%qkv: tensor<2x8x48xf32>, %x: tensor<2x8x16xf32>, %i: tensor<2x8xi32>) {
func.func @transformer_layout(%qkv: tensor<2x8x48xf32>, %x: tensor<2x8x16xf32>, %i: tensor<2x8xi32>) {
  // CHECK-NEXT: %q, %k, %v = graph.split %qkv axis = 2 sizes = [16, 16, 16] : tensor<2x8x48xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // GENERIC: %q, %k, %v = "graph.split"(%qkv) <{axis = 2 : i64, sizes = array<i64: 16, 16, 16>}> : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q, %k, %v = graph.split %qkv axis = 2 sizes = [16, 16, 16] : tensor<2x8x48xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK-NEXT: %a, %b = graph.split %i axis = -1 sizes = [3, 5] : tensor<2x8xi32> -> (tensor<2x3xi32>, tensor<2x5xi32>)
  %a, %b = graph.split %i axis = -1 sizes = [3, 5] : tensor<2x8xi32> -> (tensor<2x3xi32>, tensor<2x5xi32>)
  // CHECK-NEXT: %c = graph.concat %q, %k, %v axis = 2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
  // GENERIC: %c = "graph.concat"(%q, %k, %v) <{axis = 2 : i64}> : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
  %c = graph.concat %q, %k, %v axis = 2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
  // CHECK-NEXT: %one = graph.concat %x axis = 0 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %one = graph.concat %x axis = 0 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK-NEXT: %heads = graph.reshape %q : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %heads = graph.reshape %q : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  // CHECK-NEXT: %bhtd = graph.transpose %heads perm = [0, 2, 1, 3] : tensor<2x8x4x4xf32> -> tensor<2x4x8x4xf32>
  %bhtd = graph.transpose %heads perm = [0, 2, 1, 3] : tensor<2x8x4x4xf32> -> tensor<2x4x8x4xf32>
  // CHECK-NEXT: %sm = graph.softmax %bhtd axis = -1 : tensor<2x4x8x4xf32>
  %sm = graph.softmax %bhtd axis = -1 : tensor<2x4x8x4xf32>
  // CHECK-NEXT: %sc = graph.scale %x factor = 1.250000e-01 : tensor<2x8x16xf32>
  // GENERIC: %sc = "graph.scale"(%x) <{factor = 1.250000e-01 : f64}> : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %sc = graph.scale %x factor = 0.125 : tensor<2x8x16xf32>
  // CHECK-NEXT: %lo = graph.cast %x : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  // GENERIC: %lo = "graph.cast"(%x) : (tensor<2x8x16xf32>) -> tensor<2x8x16xbf16>
  %lo = graph.cast %x : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  // CHECK-NEXT: %hi = graph.cast %lo : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %hi = graph.cast %lo : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  // CHECK-NEXT: %h16 = graph.cast %x : tensor<2x8x16xf32> to tensor<2x8x16xf16>
  %h16 = graph.cast %x : tensor<2x8x16xf32> to tensor<2x8x16xf16>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%ids: tensor<2x8xi32>, %ids64: tensor<8xi64>, %wte: tensor<65x16xf32>) {
func.func @embedding(%ids: tensor<2x8xi32>, %ids64: tensor<8xi64>, %wte: tensor<65x16xf32>) {
  // CHECK-NEXT: %e = graph.embedding %ids, %wte : (tensor<2x8xi32>, tensor<65x16xf32>) -> tensor<2x8x16xf32>
  // GENERIC: %e = "graph.embedding"(%ids, %wte) : (tensor<2x8xi32>, tensor<65x16xf32>) -> tensor<2x8x16xf32>
  %e = graph.embedding %ids, %wte : (tensor<2x8xi32>, tensor<65x16xf32>) -> tensor<2x8x16xf32>
  // CHECK-NEXT: %e64 = graph.embedding %ids64, %wte : (tensor<8xi64>, tensor<65x16xf32>) -> tensor<8x16xf32>
  %e64 = graph.embedding %ids64, %wte : (tensor<8xi64>, tensor<65x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%x: tensor<2x8x16xf32>, %r: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
func.func @layer_norm(%x: tensor<2x8x16xf32>, %r: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // CHECK-NEXT: %y, %m, %rs = graph.layer_norm %x weight %w bias %b eps = 1.000000e-05 : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // GENERIC: %y, %m, %rs = "graph.layer_norm"(%x, %w, %b) <{eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %y, %m, %rs = graph.layer_norm %x weight %w bias %b eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK-NEXT: %y1, %m1, %rs1 = graph.layer_norm %x weight %w eps = 1.000000e-06 : tensor<2x8x16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %y1, %m1, %rs1 = graph.layer_norm %x weight %w eps = 1.0e-06 : tensor<2x8x16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK-NEXT: %y2, %m2, %rs2 = graph.layer_norm %x eps = 0.000000e+00 : tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // GENERIC: %y2, %m2, %rs2 = "graph.layer_norm"(%x) <{eps = 0.000000e+00 : f64, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %y2, %m2, %rs2 = graph.layer_norm %x eps = 0.0 : tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK-NEXT: %s, %y3, %m3, %rs3 = graph.add_layer_norm %x, %r weight %w bias %b eps = 1.000000e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // GENERIC: %s, %y3, %m3, %rs3 = "graph.add_layer_norm"(%x, %r, %w, %b) <{eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1>}> : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %s, %y3, %m3, %rs3 = graph.add_layer_norm %x, %r weight %w bias %b eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK-NEXT: %s4, %y4, %m4, %rs4 = graph.add_layer_norm %x, %r eps = 1.000000e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %s4, %y4, %m4, %rs4 = graph.add_layer_norm %x, %r eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // a narrow y (bf16 over f32, aicfc-fold-narrowing-casts)
  // CHECK-NEXT: %s5, %y5, %m5, %rs5 = graph.add_layer_norm %x, %r eps = 1.000000e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<2x8xf32>, tensor<2x8xf32>)
  %s5, %y5, %m5, %rs5 = graph.add_layer_norm %x, %r eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %s: tensor<2x4x8x6xf32>, %off: tensor<i64>) {
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %s: tensor<2x4x8x6xf32>, %off: tensor<i64>) {
  // CHECK-NEXT: %m = graph.causal_mask %s : tensor<2x4x8x6xf32>
  // GENERIC: %m = "graph.causal_mask"(%s) : (tensor<2x4x8x6xf32>) -> tensor<2x4x8x6xf32>
  %m = graph.causal_mask %s : tensor<2x4x8x6xf32>
  // CHECK-NEXT: %m0 = graph.causal_mask %s fill = 0.000000e+00 : tensor<2x4x8x6xf32>
  // GENERIC: %m0 = "graph.causal_mask"(%s) <{fill = 0.000000e+00 : f64}> : (tensor<2x4x8x6xf32>) -> tensor<2x4x8x6xf32>
  %m0 = graph.causal_mask %s fill = 0.0 : tensor<2x4x8x6xf32>
  // CHECK-NEXT: %o, %lse = graph.scaled_dot_product_attention %q, %k, %k causal scale = 2.500000e-01 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // GENERIC: %o, %lse = "graph.scaled_dot_product_attention"(%q, %k, %k) <{causal, scale = 2.500000e-01 : f64}> : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %o, %lse = graph.scaled_dot_product_attention %q, %k, %k causal scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK-NEXT: %o2, %lse2 = graph.scaled_dot_product_attention %q, %k, %k scale = 1.000000e-01 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %o2, %lse2 = graph.scaled_dot_product_attention %q, %k, %k scale = 0.1 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK-NEXT: %o3, %lse3 = graph.scaled_dot_product_attention %q, %k, %k offset %off causal scale = 2.500000e-01 dropout_p = 1.000000e-01 seed = 7 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // GENERIC: %o3, %lse3 = "graph.scaled_dot_product_attention"(%q, %k, %k, %off) <{causal, scale = 2.500000e-01 : f64, dropout_p = 1.000000e-01 : f64, seed = 7 : i64}> : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %o3, %lse3 = graph.scaled_dot_product_attention %q, %k, %k offset %off causal scale = 0.25 dropout_p = 0.1 seed = 7 : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @packed_qkv_attention
// CHECK-SAME: (%qkv: tensor<2x8x96xf32>, %off: tensor<i64>, %qb: tensor<2x8x96xbf16>) {
func.func @packed_qkv_attention(%qkv: tensor<2x8x96xf32>, %off: tensor<i64>, %qb: tensor<2x8x96xbf16>) {
  // CHECK-NEXT: %y, %lse = graph.packed_qkv_attention %qkv heads = 2 causal scale = 2.500000e-01 : (tensor<2x8x96xf32>) -> (tensor<2x8x32xf32>, tensor<2x2x8xf32>)
  // GENERIC: %y, %lse = "graph.packed_qkv_attention"(%qkv) <{num_heads = 2 : i64, causal, scale = 2.500000e-01 : f64}> : (tensor<2x8x96xf32>) -> (tensor<2x8x32xf32>, tensor<2x2x8xf32>)
  %y, %lse = graph.packed_qkv_attention %qkv heads = 2 causal scale = 0.25 : (tensor<2x8x96xf32>) -> (tensor<2x8x32xf32>, tensor<2x2x8xf32>)
  // CHECK-NEXT: %y2, %lse2 = graph.packed_qkv_attention %qkv offset %off heads = 4 scale = 1.250000e-01 dropout_p = 1.000000e-01 seed = 7 : (tensor<2x8x96xf32>, tensor<i64>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  // GENERIC: %y2, %lse2 = "graph.packed_qkv_attention"(%qkv, %off) <{num_heads = 4 : i64, scale = 1.250000e-01 : f64, dropout_p = 1.000000e-01 : f64, seed = 7 : i64}> : (tensor<2x8x96xf32>, tensor<i64>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  %y2, %lse2 = graph.packed_qkv_attention %qkv offset %off heads = 4 scale = 0.125 dropout_p = 0.1 seed = 7 : (tensor<2x8x96xf32>, tensor<i64>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  // CHECK-NEXT: %y3, %lse3 = graph.packed_qkv_attention %qb heads = 2 causal scale = 2.500000e-01 : (tensor<2x8x96xbf16>) -> (tensor<2x8x32xbf16>, tensor<2x2x8xf32>)
  // GENERIC: %y3, %lse3 = "graph.packed_qkv_attention"(%qb) <{num_heads = 2 : i64, causal, scale = 2.500000e-01 : f64}> : (tensor<2x8x96xbf16>) -> (tensor<2x8x32xbf16>, tensor<2x2x8xf32>)
  %y3, %lse3 = graph.packed_qkv_attention %qb heads = 2 causal scale = 0.25 : (tensor<2x8x96xbf16>) -> (tensor<2x8x32xbf16>, tensor<2x2x8xf32>)
  // CHECK-NEXT: func.return
  func.return
// CHECK-NEXT: }
}

// CHECK-LABEL: func.func @class_losses
// CHECK-SAME: (%x: tensor<2x8x65xf32>, %y: tensor<2x8xi32>) -> tensor<f32> {
func.func @class_losses(%x: tensor<2x8x65xf32>, %y: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK-NEXT: %l = graph.cross_entropy %x, %y : (tensor<2x8x65xf32>, tensor<2x8xi32>) -> tensor<f32>
  %l = graph.cross_entropy %x, %y : (tensor<2x8x65xf32>, tensor<2x8xi32>) -> tensor<f32>
  // CHECK-NEXT: func.return %l : tensor<f32>
  func.return %l : tensor<f32>
// CHECK-NEXT: }
}


// Wide results (dialects/wide_results.py): a product, its epilogue (an f32 bias) and a
// reduction of bf16/f16 operands written in f32.
// CHECK-LABEL: func.func @wide_results
func.func @wide_results(%a: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xf32>, %h: tensor<4x8xf16>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %m = graph.matmul %a, %w transpose_b : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xf32>
  %m = graph.matmul %a, %w transpose_b : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xf32>
  // CHECK-NEXT: %y = graph.gemm_epilogue %a, %w bias %b act = relu transpose_b : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = graph.gemm_epilogue %a, %w bias %b act = relu transpose_b : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %s = graph.reduce_sum %h axes = [0] : tensor<4x8xf16> -> tensor<8xf32>
  %s = graph.reduce_sum %h axes = [0] : tensor<4x8xf16> -> tensor<8xf32>
  func.return %m, %y, %s : tensor<4x16xf32>, tensor<4x16xf32>, tensor<8xf32>
}
