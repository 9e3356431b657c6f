// One case per verifier message of the exec dialect: each checks the message
// (which names the op and what mismatches) and where it points. Every
// `raise VerifyException` in dialects/exec.py and in the shared helpers of
// dialects/params.py must be exercised by a case here or in another dialect's
// invalid.mlir (test/python/test_registry.py says which one is missing).
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

exec.program @dynamic_buffer {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.buffer: dims must be static, got [?, 4]
  %t = exec.alloc : !exec.buffer<?x4xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @no_graph: expected exactly one exec.graph, found 0
exec.program @no_graph {
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @buffer_name_twice: buffer name "x" is declared twice
exec.program @buffer_name_twice {
  %a = exec.buffer "x" : !exec.buffer<4xf32, input>
  %b = exec.buffer "x" : !exec.buffer<4xf32, input>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @op_at_program_level: exec.copy is not allowed at program level (only exec.buffer, exec.alloc, exec.constant, exec.communicator, exec.graph, exec.output)
exec.program @op_at_program_level {
  %a = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.copy %a -> %b : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @offset_without_arena: an exec.alloc has an offset but no arena size
exec.program @offset_without_arena {
  %a = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @offset_past_arena: exec.alloc at offset 32 ends at byte 96, past the arena of 64 bytes
exec.program @offset_past_arena arena = 64 {
  %a = exec.alloc offset = 32 : !exec.buffer<16xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

exec.program @buffer_role_tmp {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.buffer "t": role must be input, param or state, got tmp (use exec.alloc for tmp, exec.constant for const)
  %a = exec.buffer "t" : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

exec.program @buffer_init_of_a_param {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.buffer "w": only a state has an initial value (init), this is a param
  %w = exec.buffer "w" init = dense<1.0> : tensor<4xf32> : !exec.buffer<4xf32, param>
  exec.graph {
  }
}

// -----

exec.program @buffer_init_type {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.buffer "lr": init is tensor<f32>, the buffer is !exec.buffer<f64, state>
  %lr = exec.buffer "lr" init = dense<1.0> : tensor<f32> : !exec.buffer<f64, state>
  exec.graph {
  }
}

// -----

exec.program @alloc_role_param {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.alloc: role must be tmp, got !exec.buffer<4xf32, param>
  %a = exec.alloc : !exec.buffer<4xf32, param>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

exec.program @constant_type {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.constant: result !exec.buffer<2xi64, const> does not hold the value's type tensor<i64> with role const
  %c = exec.constant dense<1> : tensor<i64> -> !exec.buffer<2xi64, const>
  exec.graph {
    exec.launch "numpy.noop"() outs() : () -> ()
  }
}

// -----

exec.program @alloc_inside_graph {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.graph: exec.alloc is not allowed inside the capture region (only exec.launch, exec.copy and exec.all_reduce)
  exec.graph {
    %a = exec.alloc : !exec.buffer<4xf32, tmp>
  }
}

// -----

exec.program @launch_writes_input {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.launch "numpy.relu": output #0 is the input buffer "x"; input buffers are read-only
    exec.launch "numpy.relu"(%t) outs(%x) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, input>)
  }
}

// -----

exec.program @launch_empty_kernel {
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.launch: kernel name is empty
    exec.launch ""(%t) outs(%t) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
}

// -----

exec.program @launch_output_twice {
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  %u = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.launch "numpy.adam_step": the same buffer is written by two outputs
    exec.launch "numpy.adam_step"(%t) outs(%u, %u) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>, !exec.buffer<4xf32, tmp>)
  }
}

// -----

exec.program @launch_unknown_alias {
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.launch "numpy.relu": unknown alias policy "out1_in0" (known: accumulate_pair, adam_triplet, out0_in0, sgd_pair, train_step_state, view)
    exec.launch "numpy.relu"(%t) outs(%t) alias = "out1_in0" : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
}

// -----

exec.program @launch_param_type {
  %t = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: 'exec.launch' kernel parameter 'shape': unsupported attribute [4 : i64, 1 : i64]
    exec.launch "numpy.relu"(%t) outs(%t) params {shape = [4, 1]} : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
}

// -----

exec.program @copy_shape {
  %w = exec.buffer "w" : !exec.buffer<4xf32, param>
  %t = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.copy: source !exec.buffer<8xf32, tmp> and dest !exec.buffer<4xf32, param> differ in shape or dtype
    exec.copy %t -> %w : !exec.buffer<8xf32, tmp> -> !exec.buffer<4xf32, param>
  }
}


// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @negative_arena: arena size must be non-negative, got -16
exec.program @negative_arena arena = -16 {
  exec.graph {
  }
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @live_overlap: exec.alloc %a (bytes 0..16) and %b (bytes 8..24) share bytes but are both live at exec.graph position 1; planned buffers may overlap only when their lifetimes are disjoint
exec.program @live_overlap arena = 32 {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %a = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %b = exec.alloc offset = 8 : !exec.buffer<4xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%a) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.tanh"(%a) outs(%b) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "b" %b : !exec.buffer<4xf32, tmp>
}

// -----

// A reshape's result at its operand's offset is one view group only while nothing writes
// the group: %a rewritten at position 2, while %v still lives, breaks it.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @view_operand_rewritten: exec.alloc %a (bytes 0..16) and %v (bytes 0..16) share bytes but are both live at exec.graph position 1; planned buffers may overlap only when their lifetimes are disjoint
exec.program @view_operand_rewritten arena = 256 {
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %a = exec.alloc offset = 0 : !exec.buffer<4xf32, tmp>
  %v = exec.alloc offset = 0 : !exec.buffer<2x2xf32, tmp>
  exec.graph {
    exec.launch "numpy.relu"(%x) outs(%a) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
    exec.launch "numpy.reshape_out"(%a) outs(%v) alias = "view" : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<2x2xf32, tmp>)
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<4xf32, input>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "a" %a : !exec.buffer<4xf32, tmp>
  exec.output "v" %v : !exec.buffer<2x2xf32, tmp>
}

// -----

func.func @buffer_outside_program() {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.buffer: must be inside an exec.program, got func.func
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  func.return
}

// -----

// A program is a module-level symbol: inside a function it would verify, and
// no runtime would find it.
func.func @program_inside_func() {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.program @nested: must be at module level (directly inside a builtin.module), got inside func.func @program_inside_func
  exec.program @nested {
    exec.graph {
    }
  }
  func.return
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:1: error: exec.program @communicator_twice: communicator name "world" is declared twice
exec.program @communicator_twice {
  %a = exec.communicator "world" world_size = 2 : !exec.communicator
  %b = exec.communicator "world" world_size = 2 : !exec.communicator
  exec.graph {
  }
}

// -----

exec.program @communicator_empty {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: exec.communicator "world": world_size must be at least 1, got 0
  %a = exec.communicator "world" world_size = 0 : !exec.communicator
  exec.graph {
  }
}

// -----

exec.program @all_reduce_unknown_reduce {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %g = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: unknown reduce "max" (known: sum, mean)
    exec.all_reduce "max" %c tensors(%g) bucket(%b) : (!exec.buffer<4xf32, tmp>) -> !exec.buffer<4xf32, tmp>
  }
}

// -----

exec.program @all_reduce_nothing {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: needs at least one tensor to reduce
    exec.all_reduce "mean" %c tensors() bucket(%b) : () -> !exec.buffer<4xf32, tmp>
  }
}

// -----

exec.program @all_reduce_bucket_rank {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %g = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc : !exec.buffer<2x2xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: the bucket must be a tmp buffer of rank 1, got !exec.buffer<2x2xf32, tmp>
    exec.all_reduce "mean" %c tensors(%g) bucket(%b) : (!exec.buffer<4xf32, tmp>) -> !exec.buffer<2x2xf32, tmp>
  }
}

// -----

exec.program @all_reduce_input {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %x = exec.buffer "x" : !exec.buffer<4xf32, input>
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: tensor #0 is the input buffer "x"; input buffers are read-only
    exec.all_reduce "mean" %c tensors(%x) bucket(%b) : (!exec.buffer<4xf32, input>) -> !exec.buffer<4xf32, tmp>
  }
}

// -----

exec.program @all_reduce_twice {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %g = exec.alloc : !exec.buffer<4xf32, tmp>
  %b = exec.alloc : !exec.buffer<8xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: tensor #1 is passed twice (or is the bucket)
    exec.all_reduce "mean" %c tensors(%g, %g) bucket(%b) : (!exec.buffer<4xf32, tmp>, !exec.buffer<4xf32, tmp>) -> !exec.buffer<8xf32, tmp>
  }
}

// -----

exec.program @all_reduce_dtype {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %g = exec.alloc : !exec.buffer<4xf16, tmp>
  %b = exec.alloc : !exec.buffer<4xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: tensor #0 has element type f16, the bucket f32
    exec.all_reduce "mean" %c tensors(%g) bucket(%b) : (!exec.buffer<4xf16, tmp>) -> !exec.buffer<4xf32, tmp>
  }
}

// -----

exec.program @all_reduce_bucket_size {
  %c = exec.communicator "world" world_size = 2 : !exec.communicator
  %g = exec.alloc : !exec.buffer<2x3xf32, tmp>
  %b = exec.alloc : !exec.buffer<5xf32, tmp>
  exec.graph {
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: exec.all_reduce: the bucket holds 5 elements, the tensors 6
    exec.all_reduce "mean" %c tensors(%g) bucket(%b) : (!exec.buffer<2x3xf32, tmp>) -> !exec.buffer<5xf32, tmp>
  }
}
