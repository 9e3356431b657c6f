// Regression: a memory plan whose live buffers share bytes verified, and the
// NumPy runtime then let one buffer silently overwrite the other. Planned tmp
// buffers may share bytes only when their closed lifetimes [first use, last
// use] are disjoint (an exec.output keeps its buffer live to the end).
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The boundary launch reads %a and writes %b: both are live there, so they may not share.
// CHECK: {{.*}}exec-planned-overlap.mlir:[[# @LINE + 1]]:1: error: exec.program @read_and_write_in_one_launch_may_not_share: exec.alloc %a (bytes 0..16) and %b (bytes 0..16) share bytes but are both live at exec.graph position 1; planned buffers may overlap only when their lifetimes are disjoint
exec.program @read_and_write_in_one_launch_may_not_share arena = 16 {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %a = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %b = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%a) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.tanh"(%a) outs(%b) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "b" %b : !exec.buffer<4xf32, tmp>
}

// -----

// A program output lives to the end of the step: a later buffer may not reuse its bytes.
// CHECK: {{.*}}exec-planned-overlap.mlir:[[# @LINE + 1]]:1: error: exec.program @an_output_lives_to_the_end: exec.alloc %out (bytes 0..16) and %late (bytes 0..16) share bytes but are both live at exec.graph position 1;
exec.program @an_output_lives_to_the_end arena = 16 {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %out = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %late = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%out) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.tanh"(%x) outs(%late) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "out" %out : !exec.buffer<4xf32, tmp>
}

// -----

// Disjoint lifetimes may share bytes (what aicfc-plan-memory does); an unused
// alloc and an empty one overlap nothing.
// CHECK-LABEL: exec.program @disjoint_lifetimes_may_share arena = 16
// CHECK-NOT: error
exec.program @disjoint_lifetimes_may_share arena = 16 {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %a = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %y = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %unused = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %empty = exec.alloc offset = 8 : !exec.buffer<0xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%a) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.tanh"(%a) outs(%y) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.relu"(%x) outs(%b) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.relu"(%x) outs(%empty) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<0xf32, tmp>)
  }
  exec.output "y" %y : !exec.buffer<4xf32, tmp>
  exec.output "b" %b : !exec.buffer<4xf32, tmp>
}
