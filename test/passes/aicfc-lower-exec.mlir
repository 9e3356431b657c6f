// RUN: aicfc-opt %s -p aicfc-lower-exec --split-input-file --verify-diagnostics | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-lower-exec{backend=cuda}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=CUDA

// Arguments become named external buffers with their roles; an argument with
// no role is an input named arg<i>; a state's aicfc.init is the buffer's init. The
// func.func is gone afterwards.

// CHECK-LABEL: exec.program @buffers_and_roles {
// CHECK-NEXT:    %x = exec.buffer "x" : !exec.buffer<4x3xf32, input>
// CHECK-NEXT:    %w = exec.buffer "fc.weight" : !exec.buffer<5x3xf32, param>
// CHECK-NEXT:    %s = exec.buffer "fc.weight.step" : !exec.buffer<f32, state>
// CHECK-NEXT:    %u = exec.buffer "arg3" : !exec.buffer<4x5xf32, input>
// CHECK-NEXT:    %lr = exec.buffer "optim.0.lr" init = dense<1.000000e-03> : tensor<f64> : !exec.buffer<f64, state>
// CHECK-NOT:     func.func
func.func @buffers_and_roles(%x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "x"},
                             %w: tensor<5x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
                             %s: tensor<f32> {aicfc.role = "state", aicfc.name = "fc.weight.step"},
                             %u: tensor<4x5xf32>,
                             %lr: tensor<f64> {aicfc.role = "state", aicfc.name = "optim.0.lr", aicfc.init = dense<1.0e-3> : tensor<f64>})
    -> (tensor<4x5xf32> {aicfc.name = "y"}, tensor<f64> {aicfc.name = "optim.0.lr"}) {
  %y = graph.matmul %x, %w transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  func.return %y, %lr : tensor<4x5xf32>, tensor<f64>
}

// -----

// Each op is one launch of the numpy kernel, writing fresh tmp allocs, with the
// op's properties as params; ops with an alias policy carry it (numpy kernels
// are all inplace_ok), ops without one (matmul, gemm_epilogue) do not.

// CHECK-LABEL: exec.program @kernels_params_alias {
// CHECK:         %h = exec.alloc : !exec.buffer<4x5xf32, tmp>
// CHECK-NEXT:    %r = exec.alloc : !exec.buffer<4x5xf32, tmp>
// CHECK-NEXT:    %s = exec.alloc : !exec.buffer<5xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.gemm_epilogue_out"(%x, %w, %b) outs(%h) params {act = "gelu", transpose_b = true} : (!exec.buffer<4x3xf32, input>, !exec.buffer<5x3xf32, param>, !exec.buffer<5xf32, param>) -> (!exec.buffer<4x5xf32, tmp>){{$}}
// CHECK-NEXT:      exec.launch "numpy.relu_out"(%h) outs(%r) alias = "out0_in0" : (!exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<4x5xf32, tmp>)
// CHECK-NEXT:      exec.launch "numpy.reduce_sum_out"(%r) outs(%s) params {axes = array<i64: 0>} : (!exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<5xf32, tmp>){{$}}
// CHECK-NEXT:    }
// CHECK-NEXT:    exec.output "sum" %s : !exec.buffer<5xf32, tmp>
func.func @kernels_params_alias(%x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "x"},
                                %w: tensor<5x3xf32> {aicfc.role = "param", aicfc.name = "w"},
                                %b: tensor<5xf32> {aicfc.role = "param", aicfc.name = "b"})
    -> (tensor<5xf32> {aicfc.name = "sum"}) {
  %h = graph.gemm_epilogue %x, %w bias %b act = gelu transpose_b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %r = graph.relu %h : tensor<4x5xf32>
  %s = graph.reduce_sum %r axes = [0] : tensor<4x5xf32> -> tensor<5xf32>
  func.return %s : tensor<5xf32>
}

// -----

// A result named after a param or state argument is its next value: a copy
// back at the end of exec.graph. A param returned as itself needs no copy. An
// output of w's current value reads a snapshot taken before w's copy-back.
// graph.constant becomes exec.constant; unnamed results are result<i>.

// CHECK-LABEL: exec.program @copy_back_and_outputs {
// CHECK:         %one = exec.constant dense<1> : tensor<i64> -> !exec.buffer<i64, const>
// CHECK-NEXT:    %o1 = exec.alloc : !exec.buffer<i64, tmp>
// CHECK-NEXT:    %w1 = exec.alloc : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:    %[[OLD_W:.*]] = exec.alloc : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.add_out"(%off, %one) outs(%o1) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.sgd_step_out"(%w, %g, %h, %h, %h, %c, %c) outs(%w1) alias = "sgd_pair"
// CHECK-NEXT:      exec.copy %w -> %[[OLD_W]] : !exec.buffer<4xf32, param> -> !exec.buffer<4xf32, tmp>
// CHECK-NEXT:      exec.copy %o1 -> %off : !exec.buffer<i64, tmp> -> !exec.buffer<i64, state>
// CHECK-NEXT:      exec.copy %w1 -> %w : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, param>
// CHECK-NEXT:    }
// CHECK-NEXT:    exec.output "result3" %w1 : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:    exec.output "w_seen" %[[OLD_W]] : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:  }
func.func @copy_back_and_outputs(%g: tensor<4xf32> {aicfc.role = "input", aicfc.name = "g"},
                                 %w: tensor<4xf32> {aicfc.role = "param", aicfc.name = "w"},
                                 %b: tensor<4xf32> {aicfc.role = "param", aicfc.name = "b"},
                                 %off: tensor<i64> {aicfc.role = "state", aicfc.name = "rng.offset"},
                                 %h: tensor<f64> {aicfc.role = "input", aicfc.name = "h"},
                                 %c: tensor<f32> {aicfc.role = "input", aicfc.name = "c"})
    -> (tensor<i64> {aicfc.name = "rng.offset"}, tensor<4xf32> {aicfc.name = "w"},
        tensor<4xf32> {aicfc.name = "b"}, tensor<4xf32>, tensor<4xf32> {aicfc.name = "w_seen"}) {
  %one = graph.constant dense<1> : tensor<i64>
  %o1 = graph.add %off, %one : tensor<i64>
  %w1 = autodiff.sgd_step %w, %g lr(%h) momentum(%h) weight_decay(%h) grad_scale(%c) apply(%c) : tensor<4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %o1, %w1, %b, %w1, %w : tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Swapping two states: each copy-back reads a buffer the other overwrites, so
// both are snapshotted before any copy-back runs.

// CHECK-LABEL: exec.program @swap_states {
// CHECK:         %[[SNAP_A:.*]] = exec.alloc : !exec.buffer<2xf32, tmp>
// CHECK-NEXT:    %[[SNAP_B:.*]] = exec.alloc : !exec.buffer<2xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.copy %b -> %[[SNAP_A]]
// CHECK-NEXT:      exec.copy %a -> %[[SNAP_B]]
// CHECK-NEXT:      exec.copy %[[SNAP_A]] -> %a
// CHECK-NEXT:      exec.copy %[[SNAP_B]] -> %b
// CHECK-NEXT:    }
func.func @swap_states(%a: tensor<2xf32> {aicfc.role = "state", aicfc.name = "a"},
                       %b: tensor<2xf32> {aicfc.role = "state", aicfc.name = "b"})
    -> (tensor<2xf32> {aicfc.name = "a"}, tensor<2xf32> {aicfc.name = "b"}) {
  func.return %b, %a : tensor<2xf32>, tensor<2xf32>
}

// -----

// The CUDA kernels have no float64: the op is refused with its dtype and kernel family
// named (every dtype the verifiers allow has a NumPy kernel, bf16 through ml_dtypes).

// CHECK: exec.program @no_kernel_for_dtype
// CUDA: aicfc-lower-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'graph.relu' has no kernel for dtype f64 in kernel family cuda (cuda.relu_bf16: dtype f64 not in bf16; cuda.relu_f16: dtype f64 not in f16; cuda.relu_f32: dtype f64 not in f32)
func.func @no_kernel_for_dtype(%x: tensor<4xf64> {aicfc.role = "input", aicfc.name = "x"}) -> tensor<4xf64> {
  %y = graph.relu %x : tensor<4xf64>
  func.return %y : tensor<4xf64>
}

// -----

// CHECK: aicfc-lower-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'autodiff.backward' cannot be executed: run aicfc-expand-backward first
func.func @backward_not_expanded(%x: tensor<4xf32> {aicfc.role = "input", aicfc.name = "x"},
                                 %w: tensor<4xf32> {aicfc.role = "param", aicfc.name = "w"}) -> tensor<4xf32> {
  %y = graph.mul %x, %w : tensor<4xf32>
  %l = graph.mse_loss %y, %x : tensor<4xf32> -> tensor<f32>
  %g = autodiff.backward %l wrt %w : tensor<f32>, (tensor<4xf32>) -> (tensor<4xf32>)
  func.return %g : tensor<4xf32>
}

// -----

// CHECK: aicfc-lower-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'func.func' argument #1 reuses the aicfc.name "w"; names must be unique
func.func @no_duplicate_names(%a: tensor<4xf32> {aicfc.role = "param", aicfc.name = "w"},
                              %b: tensor<4xf32> {aicfc.role = "param", aicfc.name = "w"}) -> tensor<4xf32> {
  %y = graph.add %a, %b : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
