// RUN: aicfc-opt %s -p aicfc-plan-memory | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-plan-memory{alignment=64}' | filecheck %s --check-prefix=A64
// RUN: aicfc-opt %s -p 'aicfc-plan-memory{enable=false}' | filecheck %s --check-prefix=OFF
// RUN: aicfc-opt %s -p 'aicfc-plan-memory{branches=false}' | filecheck %s --check-prefix=SEQ

// OFF-NOT: arena
// OFF-NOT: offset

// A chain t1 -> t2 -> t3: t1 is dead once t2 is written, so t3 reuses its bytes.
// Lifetimes (launch positions): t1 [0, 1], t2 [1, 2], t3 [2, end].

// CHECK-LABEL: exec.program @share_disjoint_lifetimes arena = 512 {
// CHECK:         %t1 = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %t2 = exec.alloc offset = 256 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %t3 = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// A64-LABEL:   exec.program @share_disjoint_lifetimes arena = 512 {
exec.program @share_disjoint_lifetimes {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %t1 = exec.alloc : !exec.buffer<64xf32, tmp>
  %t2 = exec.alloc : !exec.buffer<64xf32, tmp>
  %t3 = exec.alloc : !exec.buffer<64xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%t1) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%t1) outs(%t2) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.tanh"(%t2) outs(%t3) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
  }
  exec.output "y" %t3 : !exec.buffer<64xf32, tmp>
}

// t1 is last launched-on at position 0 but is a program output, so it lives to
// the end of the step and nothing may share its bytes.

// CHECK-LABEL: exec.program @outputs_live_to_end arena = 768 {
// CHECK:         %t1 = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %t2 = exec.alloc offset = 256 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %t3 = exec.alloc offset = 512 : !exec.buffer<64xf32, tmp>
exec.program @outputs_live_to_end {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %t1 = exec.alloc : !exec.buffer<64xf32, tmp>
  %t2 = exec.alloc : !exec.buffer<64xf32, tmp>
  %t3 = exec.alloc : !exec.buffer<64xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%t1) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.tanh"(%x) outs(%t2) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%t2) outs(%t3) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
  }
  exec.output "a" %t1 : !exec.buffer<64xf32, tmp>
  exec.output "b" %t3 : !exec.buffer<64xf32, tmp>
}

// Mixed sizes, largest placed first; every offset is a multiple of the
// alignment and the arena is rounded up to it.

// CHECK-LABEL: exec.program @alignment arena = 768 {
// CHECK:         %a = exec.alloc offset = 0 : !exec.buffer<32xf32, tmp>
// CHECK-NEXT:    %b = exec.alloc offset = 256 : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:    %c = exec.alloc offset = 512 : !exec.buffer<4xf32, tmp>
// A64-LABEL:   exec.program @alignment arena = 256 {
// A64:           %a = exec.alloc offset = 0 : !exec.buffer<32xf32, tmp>
// A64-NEXT:      %b = exec.alloc offset = 128 : !exec.buffer<4xf32, tmp>
// A64-NEXT:      %c = exec.alloc offset = 192 : !exec.buffer<4xf32, tmp>
exec.program @alignment {
  %x = exec.buffer "x" : !exec.buffer<32xf32, input>
  %xs = exec.buffer "xs" : !exec.buffer<4xf32, input>
  %a = exec.alloc : !exec.buffer<32xf32, tmp>
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  %c = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<32xf32, input>) -> (!exec.buffer<32xf32, tmp>)
    exec.launch "numpy.tanh"(%xs) outs(%b) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.relu"(%b) outs(%c) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "a" %a : !exec.buffer<32xf32, tmp>
  exec.output "c" %c : !exec.buffer<4xf32, tmp>
}

// An in-place launch (after aicfc-fold-inplace) is one buffer over its whole
// span; a program without tmp buffers has an empty arena.

// CHECK-LABEL: exec.program @inplace_span arena = 512 {
// CHECK:         %h = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %s = exec.alloc offset = 256 : !exec.buffer<f32, tmp>
exec.program @inplace_span {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %h = exec.alloc : !exec.buffer<64xf32, tmp>
  %s = exec.alloc : !exec.buffer<f32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%h) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%h) outs(%h) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.reduce_sum"(%h) outs(%s) params {axes = array<i64: 0>} : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<f32, tmp>)
  }
  exec.output "s" %s : !exec.buffer<f32, tmp>
}

// CHECK-LABEL: exec.program @no_tmps arena = 0 {
exec.program @no_tmps {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %g = exec.buffer "g" : !exec.buffer<4xf32, input>
  exec.graph {
    exec.launch "numpy.sgd_step"(%w, %g) outs(%w) params {lr = 0.1 : f64} : (!exec.buffer<4xf32, param>, !exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, param>)
  }
}

// Two branches from %x: a -> b and c -> d. In program order a is dead before c is
// written, but c's writer does not follow a's reader (launch 1) in the data flow: c in
// a's bytes would make launch 2 wait for launch 1, an edge between the branches. So
// c gets its own bytes (and d too: it does not follow launch 1 either), unless
// branches=false asks for reuse by program order alone.

// CHECK-LABEL: exec.program @parallel_reader arena = 1024 {
// CHECK:         %a = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %b = exec.alloc offset = 256 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %c = exec.alloc offset = 512 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %d = exec.alloc offset = 768 : !exec.buffer<64xf32, tmp>
// SEQ-LABEL:   exec.program @parallel_reader arena = 768 {
// SEQ:           %a = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// SEQ-NEXT:      %b = exec.alloc offset = 256 : !exec.buffer<64xf32, tmp>
// SEQ-NEXT:      %c = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// SEQ-NEXT:      %d = exec.alloc offset = 512 : !exec.buffer<64xf32, tmp>
exec.program @parallel_reader {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %a = exec.alloc : !exec.buffer<64xf32, tmp>
  %b = exec.alloc : !exec.buffer<64xf32, tmp>
  %c = exec.alloc : !exec.buffer<64xf32, tmp>
  %d = exec.alloc : !exec.buffer<64xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%a) outs(%b) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.tanh"(%x) outs(%c) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%c) outs(%d) : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<64xf32, tmp>)
  }
  exec.output "b" %b : !exec.buffer<64xf32, tmp>
  exec.output "d" %d : !exec.buffer<64xf32, tmp>
}
