// RUN: aicfc-opt %s -p 'aicfc-data-parallel{world_size=2}' --split-input-file --verify-diagnostics | filecheck %s
// RUN: not aicfc-opt %s -p 'aicfc-data-parallel{world_size=2}' 2>&1 | filecheck %s --check-prefix=STDERR

// A gradient that is an external buffer (a hand-written program feeding it as an input):
// the all-reduce writes the gradient in place, and inputs are read-only.
// CHECK: aicfc-data-parallel-invalid.mlir:[[# @LINE + 7]]:5: error: 'exec.launch' the gradient "g" is not a tmp buffer; cannot all-reduce it
// STDERR: {{^}}{{.*}}aicfc-data-parallel-invalid.mlir:[[# @LINE + 6]]:5: error: 'exec.launch' the gradient "g" is not a tmp buffer
// STDERR-NOT: Traceback
exec.program @dont_reduce_an_input {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %g = exec.buffer "g" : !exec.buffer<4xf32, input>
  exec.graph {
    exec.launch "numpy.sgd_step"(%w, %g) outs(%w) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<4xf32, param>, !exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, param>)
  }
}

// -----

// A gradient read again after an optimizer launch read it: the all-reduce would have to
// go before the optimizer, so the later reader would see the reduced value.
// CHECK: aicfc-data-parallel-invalid.mlir:[[# @LINE + 9]]:5: error: 'exec.launch' uses the gradient %g after the optimizer launch at position 1 read it; the all-reduced value would change what it computes
exec.program @dont_reduce_a_gradient_used_later {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %g = exec.alloc : !exec.buffer<4xf32, tmp>
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%g) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.sgd_step"(%w, %g) outs(%w) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<4xf32, param>, !exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, param>)
    exec.launch "numpy.relu"(%g) outs(%t) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "t" %t : !exec.buffer<4xf32, tmp>
}

// -----

// The pass applied twice: the program already has the communicator it would declare.
// CHECK: aicfc-data-parallel-invalid.mlir:[[# @LINE + 4]]:3: error: 'exec.communicator' the program already has a communicator "world" (was aicfc-data-parallel applied twice?)
exec.program @dont_apply_twice {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %g = exec.alloc : !exec.buffer<4xf32, tmp>
  %world = exec.communicator "world" world_size = 2 : !exec.communicator
  exec.graph {
    exec.launch "numpy.tanh"(%w) outs(%g) : (!exec.buffer<4xf32, param>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.sgd_step"(%w, %g) outs(%w) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<4xf32, param>, !exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, param>)
  }
}

// -----

// An optimizer launch without its gradient input (a hand-written launch that lists only
// the parameter): the pass names the launch instead of failing inside Python.
// CHECK: aicfc-data-parallel-invalid.mlir:[[# @LINE + 4]]:5: error: 'exec.launch' numpy.sgd_step has 1 input(s); its gradient is input 1 (operand grad of autodiff.sgd_step)
exec.program @dont_read_a_missing_gradient {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  exec.graph {
    exec.launch "numpy.sgd_step"(%w) outs(%w) params {lr = 1.0e-1 : f64} alias = "out0_in0" : (!exec.buffer<4xf32, param>) -> (!exec.buffer<4xf32, param>)
  }
}
