// Every exec op in custom syntax: printed as checked, and unchanged by a round
// trip through the custom and the generic form (optional params, alias, arena
// and offset present and absent; float kernel parameters lr = 3e-4 and eps = 1e-8
// exact; an in-place launch whose output is its input buffer).
// RUN: aicfc-opt %s | filecheck %s
// RUN: aicfc-opt %s | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | aicfc-opt | filecheck %s
// RUN: aicfc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: exec.program @train_step
// CHECK-SAME: {
// GENERIC: "exec.program"() <{sym_name = "train_step"}> ({
exec.program @train_step {
  // CHECK-NEXT: %x = exec.buffer "x" : !exec.buffer<8x4xf32, input>
  // GENERIC: %x = "exec.buffer"() <{buffer_name = "x"}> : () -> !exec.buffer<8x4xf32, input>
  %x = exec.buffer "x" : !exec.buffer<8x4xf32, input>
  // CHECK-NEXT: %w = exec.buffer "fc1.weight" : !exec.buffer<16x4xf32, param>
  %w = exec.buffer "fc1.weight" : !exec.buffer<16x4xf32, param>
  // CHECK-NEXT: %s = exec.buffer "fc1.weight.step" : !exec.buffer<f32, state>
  %s = exec.buffer "fc1.weight.step" : !exec.buffer<f32, state>
  // CHECK-NEXT: %one = exec.constant dense<1> : tensor<i64> -> !exec.buffer<i64, const>
  // GENERIC: %one = "exec.constant"() <{value = dense<1> : tensor<i64>}> : () -> !exec.buffer<i64, const>
  %one = exec.constant dense<1> : tensor<i64> -> !exec.buffer<i64, const>
  // CHECK-NEXT: %h = exec.alloc : !exec.buffer<8x16xf32, tmp>
  // GENERIC: %h = "exec.alloc"() : () -> !exec.buffer<8x16xf32, tmp>
  %h = exec.alloc : !exec.buffer<8x16xf32, tmp>
  // CHECK-NEXT: %w1 = exec.alloc : !exec.buffer<16x4xf32, tmp>
  %w1 = exec.alloc : !exec.buffer<16x4xf32, tmp>
  // CHECK-NEXT: exec.graph {
  exec.graph {
    // CHECK-NEXT: exec.launch "numpy.gemm_epilogue"(%x, %w) outs(%h) params {transpose_b = true, act = "relu", lr = 3.000000e-04 : f64, eps = 1.000000e-08 : f64, axes = array<i64: 0, 1>} : (!exec.buffer<8x4xf32, input>, !exec.buffer<16x4xf32, param>) -> (!exec.buffer<8x16xf32, tmp>)
    // GENERIC: "exec.launch"(%x, %w, %h) <{kernel = "numpy.gemm_epilogue", params = {transpose_b = true, act = "relu", lr = 3.000000e-04 : f64, eps = 1.000000e-08 : f64, axes = array<i64: 0, 1>}, operandSegmentSizes = array<i32: 2, 1>}> : (!exec.buffer<8x4xf32, input>, !exec.buffer<16x4xf32, param>, !exec.buffer<8x16xf32, tmp>) -> ()
    exec.launch "numpy.gemm_epilogue"(%x, %w) outs(%h) params {transpose_b = true, act = "relu", lr = 3.0e-4 : f64, eps = 1.0e-8 : f64, axes = array<i64: 0, 1>} : (!exec.buffer<8x4xf32, input>, !exec.buffer<16x4xf32, param>) -> (!exec.buffer<8x16xf32, tmp>)
    // CHECK-NEXT: exec.launch "numpy.relu"(%h) outs(%h) alias = "out0_in0" : (!exec.buffer<8x16xf32, tmp>) -> (!exec.buffer<8x16xf32, tmp>)
    // GENERIC: "exec.launch"(%h, %h) <{kernel = "numpy.relu", alias = "out0_in0", operandSegmentSizes = array<i32: 1, 1>}> : (!exec.buffer<8x16xf32, tmp>, !exec.buffer<8x16xf32, tmp>) -> ()
    exec.launch "numpy.relu"(%h) outs(%h) alias = "out0_in0" : (!exec.buffer<8x16xf32, tmp>) -> (!exec.buffer<8x16xf32, tmp>)
    // CHECK-NEXT: exec.launch "numpy.noop"() outs() : () -> ()
    // GENERIC: "exec.launch"() <{kernel = "numpy.noop", operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
    exec.launch "numpy.noop"() outs() : () -> ()
    // CHECK-NEXT: exec.copy %w1 -> %w : !exec.buffer<16x4xf32, tmp> -> !exec.buffer<16x4xf32, param>
    // GENERIC: "exec.copy"(%w1, %w) : (!exec.buffer<16x4xf32, tmp>, !exec.buffer<16x4xf32, param>) -> ()
    exec.copy %w1 -> %w : !exec.buffer<16x4xf32, tmp> -> !exec.buffer<16x4xf32, param>
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: exec.output "h" %h : !exec.buffer<8x16xf32, tmp>
  // GENERIC: "exec.output"(%h) <{buffer_name = "h"}> : (!exec.buffer<8x16xf32, tmp>) -> ()
  exec.output "h" %h : !exec.buffer<8x16xf32, tmp>
// CHECK-NEXT: }
}

// CHECK-LABEL: exec.program @planned
// CHECK-SAME: arena = 1024 {
// GENERIC: "exec.program"() <{sym_name = "planned", arena_size = 1024 : i64}> ({
exec.program @planned arena = 1024 {
  // CHECK-NEXT: %a = exec.alloc offset = 0 : !exec.buffer<8x16xf32, tmp>
  %a = exec.alloc offset = 0 : !exec.buffer<8x16xf32, tmp>
  // CHECK-NEXT: %b = exec.alloc offset = 512 : !exec.buffer<8x16xf32, tmp>
  // GENERIC: %b = "exec.alloc"() <{offset = 512 : i64}> : () -> !exec.buffer<8x16xf32, tmp>
  %b = exec.alloc offset = 512 : !exec.buffer<8x16xf32, tmp>
  // CHECK-NEXT: exec.graph {
  exec.graph {
    // CHECK-NEXT: exec.launch "numpy.relu"(%a) outs(%b) : (!exec.buffer<8x16xf32, tmp>) -> (!exec.buffer<8x16xf32, tmp>)
    exec.launch "numpy.relu"(%a) outs(%b) : (!exec.buffer<8x16xf32, tmp>) -> (!exec.buffer<8x16xf32, tmp>)
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: exec.output "b" %b : !exec.buffer<8x16xf32, tmp>
  exec.output "b" %b : !exec.buffer<8x16xf32, tmp>
// CHECK-NEXT: }
}

// A step with nothing to launch (a function that returns its input): the empty
// capture region survives the round trip.
// CHECK-LABEL: exec.program @empty_graph
// CHECK-NEXT: %x = exec.buffer "x" : !exec.buffer<4xf32, input>
// CHECK-NEXT: exec.graph {
// CHECK: }
// CHECK-NEXT: exec.output "y" %x : !exec.buffer<4xf32, input>
exec.program @empty_graph {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  exec.graph {
  }
  exec.output "y" %x : !exec.buffer<4xf32, input>
}

// Collectives: a communicator (a program resource) and a bucketed all-reduce.
// CHECK-LABEL: exec.program @data_parallel
// CHECK-NEXT: %world = exec.communicator "world" world_size = 2 : !exec.communicator
// GENERIC: %world = "exec.communicator"() <{comm_name = "world", world_size = 2 : i64}> : () -> !exec.communicator
// CHECK-NEXT: %dw = exec.alloc : !exec.buffer<4x3xf32, tmp>
// CHECK-NEXT: %db = exec.alloc : !exec.buffer<4xf32, tmp>
// CHECK-NEXT: %b = exec.alloc : !exec.buffer<16xf32, tmp>
// CHECK-NEXT: %b2 = exec.alloc : !exec.buffer<4xf32, tmp>
// CHECK-NEXT: exec.graph {
// CHECK-NEXT: exec.launch "numpy.noop"() outs(%dw, %db)
// CHECK-NEXT: exec.all_reduce "mean" %world tensors(%dw, %db) bucket(%b) : (!exec.buffer<4x3xf32, tmp>, !exec.buffer<4xf32, tmp>) -> !exec.buffer<16xf32, tmp>
// GENERIC: "exec.all_reduce"(%world, %dw, %db, %b) <{reduce = "mean"}>
// CHECK-NEXT: exec.all_reduce "sum" %world tensors(%db) bucket(%b2) : (!exec.buffer<4xf32, tmp>) -> !exec.buffer<4xf32, tmp>
exec.program @data_parallel {
  %world = exec.communicator "world" world_size = 2 : !exec.communicator
  %dw = exec.alloc : !exec.buffer<4x3xf32, tmp>
  %db = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc : !exec.buffer<16xf32, tmp>
  %b2 = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs(%dw, %db) : () -> (!exec.buffer<4x3xf32, tmp>, !exec.buffer<4xf32, tmp>)
    exec.all_reduce "mean" %world tensors(%dw, %db) bucket(%b) : (!exec.buffer<4x3xf32, tmp>, !exec.buffer<4xf32, tmp>) -> !exec.buffer<16xf32, tmp>
    exec.all_reduce "sum" %world tensors(%db) bucket(%b2) : (!exec.buffer<4xf32, tmp>) -> !exec.buffer<4xf32, tmp>
  }
}
