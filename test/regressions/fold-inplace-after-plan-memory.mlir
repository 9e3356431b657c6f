// Regression: aicfc-fold-inplace run after aicfc-plan-memory folded relu(%t)
// into %t, making %t live to the end over the bytes %g was planned into, so
// output "a" was silently overwritten by gelu. A planned input is now refused
// (with the reason), and the result still verifies (exec.program checks that
// live planned buffers never share bytes). branches=false: the reuse of %t's bytes by
// %g, on a parallel branch, is what the bug needed.
// RUN: aicfc-opt %s -p 'aicfc-lower-exec,aicfc-plan-memory{branches=false},aicfc-fold-inplace{remarks=true}' 2>&1 | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-lower-exec,aicfc-plan-memory{branches=false},aicfc-fold-inplace' | filecheck %s --check-prefix=PLAN

// CHECK: {{.*}}fold-inplace-after-plan-memory.mlir:[[# @LINE + 10]]:3: remark: 'exec.launch' alias out0_in0 out0 -> in0 refused: input %t already has an arena offset, planned for its own lifetime, which the fold would extend (run aicfc-fold-inplace before aicfc-plan-memory)
// CHECK-NOT: error
// CHECK-LABEL: exec.program @dont_fold_into_a_planned_buffer
// PLAN-LABEL: exec.program @dont_fold_into_a_planned_buffer
// PLAN: %t = exec.alloc offset = 0 :
// PLAN: %r = exec.alloc offset = 256 :
// PLAN: %g = exec.alloc offset = 0 :
// PLAN: exec.launch "numpy.relu_out"(%t) outs(%r)
func.func @dont_fold_into_a_planned_buffer(%x: tensor<64xf32> {aicfc.role = "input", aicfc.name = "x"}) -> (tensor<64xf32> {aicfc.name = "a"}, tensor<64xf32> {aicfc.name = "b"}) {
  %t = graph.tanh %x : tensor<64xf32>
  %r = graph.relu %t : tensor<64xf32>
  %g = graph.gelu %x : tensor<64xf32>
  %q = graph.relu %g : tensor<64xf32>
  func.return %r, %q : tensor<64xf32>, tensor<64xf32>
}
