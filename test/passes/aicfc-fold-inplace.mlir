// RUN: aicfc-opt %s -p aicfc-fold-inplace | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-fold-inplace{enable=false}' | filecheck %s --check-prefix=OFF
// RUN: aicfc-opt %s -p 'aicfc-fold-inplace{enable=false}' > %t.off && aicfc-opt %s > %t.in && diff %t.off %t.in
// RUN: aicfc-opt %s -p 'aicfc-fold-inplace{remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Adam's triplet policy: param, exp_avg, exp_avg_sq and step are updated in
// place; the copy-backs of their next values disappear and so do the tmp allocs.
// The grad (input 1) is never a destination.

// CHECK-LABEL: exec.program @adam_triplet_folded {
// CHECK-NEXT:    %w = exec.buffer "w" : !exec.buffer<4x3xf32, param>
// CHECK-NEXT:    %m = exec.buffer "w.exp_avg" : !exec.buffer<4x3xf32, state>
// CHECK-NEXT:    %v = exec.buffer "w.exp_avg_sq" : !exec.buffer<4x3xf32, state>
// CHECK-NEXT:    %s = exec.buffer "w.step" : !exec.buffer<f32, state>
// CHECK-NEXT:    %g = exec.buffer "g" : !exec.buffer<4x3xf32, input>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.adam_step"(%w, %g, %m, %v, %s) outs(%w, %m, %v, %s) params {lr = 1.000000e-03 : f64} alias = "adam_triplet"
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// OFF-LABEL:   exec.program @adam_triplet_folded {
// OFF:           %w1 = exec.alloc : !exec.buffer<4x3xf32, tmp>
// OFF:             exec.launch "numpy.adam_step"(%w, %g, %m, %v, %s) outs(%w1, %m1, %v1, %s1)
// OFF-NEXT:        exec.copy %w1 -> %w
// OFF-NEXT:        exec.copy %m1 -> %m
// OFF-NEXT:        exec.copy %v1 -> %v
// OFF-NEXT:        exec.copy %s1 -> %s
exec.program @adam_triplet_folded {
  %w = exec.buffer "w" : !exec.buffer<4x3xf32, param>
  %m = exec.buffer "w.exp_avg" : !exec.buffer<4x3xf32, state>
  %v = exec.buffer "w.exp_avg_sq" : !exec.buffer<4x3xf32, state>
  %s = exec.buffer "w.step" : !exec.buffer<f32, state>
  %g = exec.buffer "g" : !exec.buffer<4x3xf32, input>
  %w1 = exec.alloc : !exec.buffer<4x3xf32, tmp>
  %m1 = exec.alloc : !exec.buffer<4x3xf32, tmp>
  %v1 = exec.alloc : !exec.buffer<4x3xf32, tmp>
  %s1 = exec.alloc : !exec.buffer<f32, tmp>
  exec.graph {
    exec.launch "numpy.adam_step"(%w, %g, %m, %v, %s) outs(%w1, %m1, %v1, %s1) params {lr = 1.0e-3 : f64} alias = "adam_triplet" : (!exec.buffer<4x3xf32, param>, !exec.buffer<4x3xf32, input>, !exec.buffer<4x3xf32, state>, !exec.buffer<4x3xf32, state>, !exec.buffer<f32, state>) -> (!exec.buffer<4x3xf32, tmp>, !exec.buffer<4x3xf32, tmp>, !exec.buffer<4x3xf32, tmp>, !exec.buffer<f32, tmp>)
    exec.copy %w1 -> %w : !exec.buffer<4x3xf32, tmp> -> !exec.buffer<4x3xf32, param>
    exec.copy %m1 -> %m : !exec.buffer<4x3xf32, tmp> -> !exec.buffer<4x3xf32, state>
    exec.copy %v1 -> %v : !exec.buffer<4x3xf32, tmp> -> !exec.buffer<4x3xf32, state>
    exec.copy %s1 -> %s : !exec.buffer<f32, tmp> -> !exec.buffer<f32, state>
  }
}

// relu's input is dead after the launch: out0 is folded into in0, later
// readers of %r read %h, and the alloc of %r is dropped.

// CHECK-LABEL: exec.program @relu_folded_dead_input {
// CHECK:         %h = exec.alloc : !exec.buffer<4x5xf32, tmp>
// CHECK-NEXT:    %t = exec.alloc : !exec.buffer<5xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.tanh"(%x) outs(%h)
// CHECK-NEXT:      exec.launch "numpy.relu"(%h) outs(%h) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.reduce_sum"(%h) outs(%t)
// CHECK:         exec.output "r" %h
exec.program @relu_folded_dead_input {
  %x = exec.buffer "x" : !exec.buffer<4x5xf32, input>
  %h = exec.alloc : !exec.buffer<4x5xf32, tmp>
  %r = exec.alloc : !exec.buffer<4x5xf32, tmp>
  %t = exec.alloc : !exec.buffer<5xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%h) alias = "out0_in0" : (!exec.buffer<4x5xf32, input>) -> (!exec.buffer<4x5xf32, tmp>)
    exec.launch "numpy.relu"(%h) outs(%r) alias = "out0_in0" : (!exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<4x5xf32, tmp>)
    exec.launch "numpy.reduce_sum"(%r) outs(%t) params {axes = array<i64: 0>} : (!exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<5xf32, tmp>)
  }
  exec.output "r" %r : !exec.buffer<4x5xf32, tmp>
}

// gelu's input %h is an activation the backward still reads (gelu_grad saves
// the input): writing gelu's output into it would clobber it.

// CHECK-LABEL: exec.program @dont_fold_input_read_later {
// CHECK:           exec.launch "numpy.gelu"(%h) outs(%y) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.sub"(%y, %x) outs(%y) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.gelu_grad"(%y, %h) outs(%y) alias = "out0_in0"
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %h is read later by exec.launch "numpy.gelu_grad"
exec.program @dont_fold_input_read_later {
  %x = exec.buffer "x" : !exec.buffer<4x5xf32, input>
  %h = exec.alloc : !exec.buffer<4x5xf32, tmp>
  %y = exec.alloc : !exec.buffer<4x5xf32, tmp>
  %dy = exec.alloc : !exec.buffer<4x5xf32, tmp>
  %dx = exec.alloc : !exec.buffer<4x5xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%h) alias = "out0_in0" : (!exec.buffer<4x5xf32, input>) -> (!exec.buffer<4x5xf32, tmp>)
    exec.launch "numpy.gelu"(%h) outs(%y) alias = "out0_in0" : (!exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<4x5xf32, tmp>)
    exec.launch "numpy.sub"(%y, %x) outs(%dy) alias = "out0_in0" : (!exec.buffer<4x5xf32, tmp>, !exec.buffer<4x5xf32, input>) -> (!exec.buffer<4x5xf32, tmp>)
    exec.launch "numpy.gelu_grad"(%dy, %h) outs(%dx) alias = "out0_in0" : (!exec.buffer<4x5xf32, tmp>, !exec.buffer<4x5xf32, tmp>) -> (!exec.buffer<4x5xf32, tmp>)
  }
  exec.output "dx" %dx : !exec.buffer<4x5xf32, tmp>
}

// The same buffer fed twice (a * a): writing a while the kernel still reads it
// through the other operand is not safe.

// CHECK-LABEL: exec.program @dont_fold_same_value_twice {
// CHECK:           exec.launch "numpy.mul"(%a, %a) outs(%sq) alias = "out0_in0"
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %a is passed to the launch 2 times
exec.program @dont_fold_same_value_twice {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %a = exec.alloc : !exec.buffer<8xf32, tmp>
  %sq = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) alias = "out0_in0" : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.mul"(%a, %a) outs(%sq) alias = "out0_in0" : (!exec.buffer<8xf32, tmp>, !exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "sq" %sq : !exec.buffer<8xf32, tmp>
}

// An external input keeps its identity (and is read-only): relu(x) gets its own buffer.

// CHECK-LABEL: exec.program @dont_fold_external_input {
// CHECK:         %y = exec.alloc
// CHECK:           exec.launch "numpy.relu"(%x) outs(%y) alias = "out0_in0"
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input "x" is an external input (read-only; externals keep their identity)
exec.program @dont_fold_external_input {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %y = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%y) alias = "out0_in0" : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "y" %y : !exec.buffer<8xf32, tmp>
}

// A param is overwritten only by its own next value: relu(w) is not w's next
// value, so it is not written into w.

// CHECK-LABEL: exec.program @dont_fold_param_into_other_value {
// CHECK:           exec.launch "numpy.relu"(%w) outs(%y) alias = "out0_in0"
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input "w" is the param buffer and output %y is not its next value (externals keep their identity)
exec.program @dont_fold_param_into_other_value {
  %w = exec.buffer "w" : !exec.buffer<8xf32, param>
  %y = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%w) outs(%y) alias = "out0_in0" : (!exec.buffer<8xf32, param>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "y" %y : !exec.buffer<8xf32, tmp>
}

// The grad and the param are one buffer (a step computed with g = w): the
// param update would overwrite the grad it reads, so out0 -> in0 is refused;
// the moments, which are distinct buffers, are still folded.

// CHECK-LABEL: exec.program @dont_fold_grad {
// CHECK:         %w1 = exec.alloc : !exec.buffer<4xf32, tmp>
// CHECK-NEXT:    exec.graph {
// CHECK-NEXT:      exec.launch "numpy.adam_step"(%w, %w, %m, %v, %s) outs(%w1, %m, %v, %s) params {lr = 1.000000e-03 : f64} alias = "adam_triplet"
// CHECK-NEXT:      exec.copy %w1 -> %w
// CHECK-NEXT:    }
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias adam_triplet out0 -> in0 refused: input "w" is passed to the launch 2 times
exec.program @dont_fold_grad {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %m = exec.buffer "m" : !exec.buffer<4xf32, state>
  %v = exec.buffer "v" : !exec.buffer<4xf32, state>
  %s = exec.buffer "s" : !exec.buffer<f32, state>
  %w1 = exec.alloc : !exec.buffer<4xf32, tmp>
  %m1 = exec.alloc : !exec.buffer<4xf32, tmp>
  %v1 = exec.alloc : !exec.buffer<4xf32, tmp>
  %s1 = exec.alloc : !exec.buffer<f32, tmp>
  exec.graph {
    exec.launch "numpy.adam_step"(%w, %w, %m, %v, %s) outs(%w1, %m1, %v1, %s1) params {lr = 1.0e-3 : f64} alias = "adam_triplet" : (!exec.buffer<4xf32, param>, !exec.buffer<4xf32, param>, !exec.buffer<4xf32, state>, !exec.buffer<4xf32, state>, !exec.buffer<f32, state>) -> (!exec.buffer<4xf32, tmp>, !exec.buffer<4xf32, tmp>, !exec.buffer<4xf32, tmp>, !exec.buffer<f32, tmp>)
    exec.copy %w1 -> %w : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, param>
    exec.copy %m1 -> %m : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, state>
    exec.copy %v1 -> %v : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, state>
    exec.copy %s1 -> %s : !exec.buffer<f32, tmp> -> !exec.buffer<f32, state>
  }
}

// A gradient that is still read later is never clobbered: relu_grad's dy is
// also summed for the bias gradient afterwards.

// CHECK-LABEL: exec.program @dont_fold_grad_read_later {
// CHECK:           exec.launch "numpy.relu_grad"(%dy, %y) outs(%dz) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.reduce_sum"(%dy) outs(%db)
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %dy is read later by exec.launch "numpy.reduce_sum"
exec.program @dont_fold_grad_read_later {
  %y = exec.buffer "y" : !exec.buffer<2x4xf32, input>
  %g = exec.buffer "g" : !exec.buffer<2x4xf32, input>
  %dy = exec.alloc : !exec.buffer<2x4xf32, tmp>
  %dz = exec.alloc : !exec.buffer<2x4xf32, tmp>
  %db = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%g) outs(%dy) alias = "out0_in0" : (!exec.buffer<2x4xf32, input>) -> (!exec.buffer<2x4xf32, tmp>)
    exec.launch "numpy.relu_grad"(%dy, %y) outs(%dz) alias = "out0_in0" : (!exec.buffer<2x4xf32, tmp>, !exec.buffer<2x4xf32, input>) -> (!exec.buffer<2x4xf32, tmp>)
    exec.launch "numpy.reduce_sum"(%dy) outs(%db) params {axes = array<i64: 0>} : (!exec.buffer<2x4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "dz" %dz : !exec.buffer<2x4xf32, tmp>
  exec.output "db" %db : !exec.buffer<4xf32, tmp>
}

// An input that is a program output must keep its value: not folded.

// CHECK-LABEL: exec.program @dont_fold_output {
// CHECK:           exec.launch "numpy.relu"(%h) outs(%r) alias = "out0_in0"
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %h is read later by exec.output "h"
exec.program @dont_fold_output {
  %x = exec.buffer "x" : !exec.buffer<8xf32, input>
  %h = exec.alloc : !exec.buffer<8xf32, tmp>
  %r = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%h) alias = "out0_in0" : (!exec.buffer<8xf32, input>) -> (!exec.buffer<8xf32, tmp>)
    exec.launch "numpy.relu"(%h) outs(%r) alias = "out0_in0" : (!exec.buffer<8xf32, tmp>) -> (!exec.buffer<8xf32, tmp>)
  }
  exec.output "h" %h : !exec.buffer<8xf32, tmp>
  exec.output "r" %r : !exec.buffer<8xf32, tmp>
}

// A const buffer is never a destination; sgd without momentum has no buffer
// operand, so the policy's second pair does not apply (no remark for it).

// CHECK-LABEL: exec.program @dont_fold_const {
// CHECK:           exec.launch "numpy.add"(%c, %x) outs(%y) alias = "out0_in0"
// CHECK-NEXT:      exec.launch "numpy.sgd_step"(%w, %y) outs(%w) params {lr = 1.000000e-01 : f64} alias = "sgd_pair"
// CHECK-NEXT:    }
// REMARK: aicfc-fold-inplace.mlir:{{[0-9]+}}:5: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %c is a const buffer
// REMARK-NOT: sgd_pair
exec.program @dont_fold_const {
  %x = exec.buffer "x" : !exec.buffer<2xf32, input>
  %w = exec.buffer "w" : !exec.buffer<2xf32, param>
  %c = exec.constant dense<1.0> : tensor<2xf32> -> !exec.buffer<2xf32, const>
  %y = exec.alloc : !exec.buffer<2xf32, tmp>
  %w1 = exec.alloc : !exec.buffer<2xf32, tmp>
  exec.graph {
    exec.launch "numpy.add"(%c, %x) outs(%y) alias = "out0_in0" : (!exec.buffer<2xf32, const>, !exec.buffer<2xf32, input>) -> (!exec.buffer<2xf32, tmp>)
    exec.launch "numpy.sgd_step"(%w, %y) outs(%w1) params {lr = 0.1 : f64} alias = "sgd_pair" : (!exec.buffer<2xf32, param>, !exec.buffer<2xf32, tmp>) -> (!exec.buffer<2xf32, tmp>)
    exec.copy %w1 -> %w : !exec.buffer<2xf32, tmp> -> !exec.buffer<2xf32, param>
  }
}
