// RUN: aicfc-opt %s --split-input-file -p 'aicfc-data-parallel{world_size=4}' | filecheck %s
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-data-parallel{world_size=2 bucket_mb=0.0002}' | filecheck %s --check-prefix=SMALL
// RUN: aicfc-opt %s --split-input-file -p 'aicfc-data-parallel{world_size=2},aicfc-fold-inplace,aicfc-plan-memory' | filecheck %s --check-prefix=PLANNED
// RUN: not aicfc-opt %s -p 'aicfc-data-parallel{world_size=0}' 2>&1 | filecheck %s --check-prefix=WORLD
// RUN: not aicfc-opt %s -p 'aicfc-data-parallel{bucket_mb=-1.0}' 2>&1 | filecheck %s --check-prefix=BUCKET
// RUN: not aicfc-opt %s -p 'aicfc-data-parallel{world_size=two}' 2>&1 | filecheck %s --check-prefix=TYPE

// Three parameters (w1 [32x16]: 2048 bytes, b1 [32]: 128 bytes, w2 [8x32]: 1024 bytes)
// updated by SGD. The gradients go into buckets in reverse parameter order (w2 first,
// the last layer's, which the backward produces first). With the default 25 MiB they
// share one bucket, reduced after the last launch that writes one of them and before
// the first optimizer launch.

// CHECK-LABEL: exec.program @sgd_three_params {
// CHECK:         %world = exec.communicator "world" world_size = 4 : !exec.communicator
// CHECK-NEXT:    %bucket0 = exec.alloc : !exec.buffer<800xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.matmul"(%x, %w2) outs(%dw2)
// CHECK-NEXT:      exec.launch "numpy.matmul"(%x, %w1) outs(%db1)
// CHECK-NEXT:      exec.launch "numpy.matmul"(%x, %w1) outs(%dw1)
// CHECK-NEXT:      exec.all_reduce "mean" %world tensors(%dw2, %db1, %dw1) bucket(%bucket0) : (!exec.buffer<8x32xf32, tmp>, !exec.buffer<32xf32, tmp>, !exec.buffer<32x16xf32, tmp>) -> !exec.buffer<800xf32, tmp>
// CHECK-NEXT:      exec.launch "numpy.sgd_step"(%w1, %dw1)
// CHECK-NEXT:      exec.launch "numpy.sgd_step"(%b1, %db1)
// CHECK-NEXT:      exec.launch "numpy.sgd_step"(%w2, %dw2)
// CHECK-NEXT:      exec.copy %nw1 -> %w1

// A cap of 0.0002 MiB (209.7 bytes): a bucket closes as soon as it holds that much, so
// dw2 (1024 bytes) fills one alone, db1 (128 bytes) does not and shares the next with
// dw1. Each all-reduce follows the last launch that writes one of its gradients: the
// first runs while the backward goes on.

// SMALL-LABEL: exec.program @sgd_three_params {
// SMALL:         %bucket0 = exec.alloc : !exec.buffer<256xf32, tmp>
// SMALL-NEXT:    %bucket1 = exec.alloc : !exec.buffer<544xf32, tmp>
// SMALL-NEXT:    exec.graph {
// SMALL-NEXT:      exec.launch "numpy.matmul"(%x, %w2) outs(%dw2)
// SMALL-NEXT:      exec.all_reduce "mean" %world tensors(%dw2) bucket(%bucket0)
// SMALL-NEXT:      exec.launch "numpy.matmul"(%x, %w1) outs(%db1)
// SMALL-NEXT:      exec.launch "numpy.matmul"(%x, %w1) outs(%dw1)
// SMALL-NEXT:      exec.all_reduce "mean" %world tensors(%db1, %dw1) bucket(%bucket1)
// SMALL-NEXT:      exec.launch "numpy.sgd_step"(%w1, %dw1)

// After in-place folding and memory planning the gradients are still the buffers the
// all-reduce writes and the optimizer reads; the bucket has its own arena bytes.

// PLANNED-LABEL: exec.program @sgd_three_params arena = {{[0-9]+}} {
// PLANNED:         %bucket0 = exec.alloc offset = {{[0-9]+}} : !exec.buffer<800xf32, tmp>
// PLANNED:           exec.all_reduce "mean" %world tensors(%dw2, %db1, %dw1) bucket(%bucket0)
// PLANNED-NEXT:      exec.launch "numpy.sgd_step"(%w1, %dw1) outs(%w1)

// WORLD: aicfc-opt: error: bad pass options in 'aicfc-data-parallel{world_size=0}': aicfc-data-parallel: world_size must be a positive integer, got 0
// BUCKET: aicfc-opt: error: bad pass options in 'aicfc-data-parallel{bucket_mb=-1.0}': aicfc-data-parallel: bucket_mb must be a positive number of MiB, got -1.0
// TYPE: aicfc-opt: error: {{.*}}world_size{{.*}}an integer
exec.program @sgd_three_params {
  %x = exec.buffer "x" : !exec.buffer<16x16xf32, input>
  %w1 = exec.buffer "0.weight" : !exec.buffer<32x16xf32, param>
  %b1 = exec.buffer "0.bias" : !exec.buffer<32xf32, param>
  %w2 = exec.buffer "2.weight" : !exec.buffer<8x32xf32, param>
  %dw2 = exec.alloc : !exec.buffer<8x32xf32, tmp>
  %db1 = exec.alloc : !exec.buffer<32xf32, tmp>
  %dw1 = exec.alloc : !exec.buffer<32x16xf32, tmp>
  %nw1 = exec.alloc : !exec.buffer<32x16xf32, tmp>
  %nb1 = exec.alloc : !exec.buffer<32xf32, tmp>
  %nw2 = exec.alloc : !exec.buffer<8x32xf32, tmp>
  exec.graph {
    exec.launch "numpy.matmul"(%x, %w2) outs(%dw2) : (!exec.buffer<16x16xf32, input>, !exec.buffer<8x32xf32, param>) -> (!exec.buffer<8x32xf32, tmp>)
    exec.launch "numpy.matmul"(%x, %w1) outs(%db1) : (!exec.buffer<16x16xf32, input>, !exec.buffer<32x16xf32, param>) -> (!exec.buffer<32xf32, tmp>)
    exec.launch "numpy.matmul"(%x, %w1) outs(%dw1) : (!exec.buffer<16x16xf32, input>, !exec.buffer<32x16xf32, param>) -> (!exec.buffer<32x16xf32, tmp>)
    exec.launch "numpy.sgd_step"(%w1, %dw1) outs(%nw1) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<32x16xf32, param>, !exec.buffer<32x16xf32, tmp>) -> (!exec.buffer<32x16xf32, tmp>)
    exec.launch "numpy.sgd_step"(%b1, %db1) outs(%nb1) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<32xf32, param>, !exec.buffer<32xf32, tmp>) -> (!exec.buffer<32xf32, tmp>)
    exec.launch "numpy.sgd_step"(%w2, %dw2) outs(%nw2) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<8x32xf32, param>, !exec.buffer<8x32xf32, tmp>) -> (!exec.buffer<8x32xf32, tmp>)
    exec.copy %nw1 -> %w1 : !exec.buffer<32x16xf32, tmp> -> !exec.buffer<32x16xf32, param>
    exec.copy %nb1 -> %b1 : !exec.buffer<32xf32, tmp> -> !exec.buffer<32xf32, param>
    exec.copy %nw2 -> %w2 : !exec.buffer<8x32xf32, tmp> -> !exec.buffer<8x32xf32, param>
  }
}

// -----

// A gradient read by a launch that also feeds another launch before the optimizer (the
// norm of a gradient, say): the all-reduce goes after that reader too, so it reads the
// rank's own gradient. f16 and f32 gradients go into separate buckets.

// CHECK-LABEL: exec.program @after_last_reader_and_per_dtype {
// CHECK:         %bucket0 = exec.alloc : !exec.buffer<4xf16, tmp>
// CHECK-NEXT:    %bucket1 = exec.alloc : !exec.buffer<8xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.relu"(%x) outs(%da)
// CHECK-NEXT:      exec.launch "numpy.relu"(%xh) outs(%dh)
// CHECK-NEXT:      exec.all_reduce "mean" %world tensors(%dh) bucket(%bucket0)
// CHECK-NEXT:      exec.launch "numpy.tanh"(%da) outs(%s)
// CHECK-NEXT:      exec.all_reduce "mean" %world tensors(%da) bucket(%bucket1)
// CHECK-NEXT:      exec.launch "numpy.sgd_step"(%a, %da)
exec.program @after_last_reader_and_per_dtype {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %xh = exec.buffer "xh" : !exec.buffer<4xf16, input>
  %a = exec.buffer "a" : !exec.buffer<8xf32, param>
  %h = exec.buffer "h" : !exec.buffer<4xf16, param>
  %da = exec.alloc : !exec.buffer<8xf32, tmp>
  %dh = exec.alloc : !exec.buffer<4xf16, tmp>
  %s = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%da) : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.relu"(%xh) outs(%dh) : (!exec.buffer<4xf16, input>) -> (!exec.buffer<4xf16, tmp>)
    exec.launch "numpy.tanh"(%da) outs(%s) : (!exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.sgd_step"(%a, %da) outs(%a) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<8xf32, param>, !exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, param>)
    exec.launch "numpy.sgd_step"(%h, %dh) outs(%h) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<4xf16, param>, !exec.buffer<4xf16, tmp>) -> (!exec.buffer<4xf16, param>)
  }
  exec.output "s" %s : !exec.buffer<8xf32, tmp>
}

// -----

// No optimizer launch (an inference program): nothing changes, no communicator.

// CHECK-LABEL: exec.program @no_optimizer {
// CHECK-NOT:     exec.communicator
// CHECK-NOT:     exec.all_reduce
// CHECK:         exec.output "y"
exec.program @no_optimizer {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %y = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%y) : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "y" %y : !exec.buffer<8xf32, tmp>
}
