// The driver options that the lit suites rely on keep working with our dialects:
// -p with xDSL's passes (cse removes the duplicate relu and the dead tanh), a
// pipeline of two passes, --print-op-generic and --split-input-file (chunks are
// printed in order, separated by the split marker); verify-diagnostics.mlir checks
// --verify-diagnostics.
// RUN: aicfc-opt %s -p cse | filecheck %s --check-prefix=CSE
// RUN: aicfc-opt %s -p cse,dce | filecheck %s --check-prefix=CSE
// RUN: aicfc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: aicfc-opt %s --split-input-file | filecheck %s --check-prefix=SPLIT

// CSE-LABEL: func.func @duplicates
// CSE-NEXT: %a = graph.relu %x : tensor<4xf32>
// CSE-NEXT: %c = graph.add %a, %a : tensor<4xf32>
// CSE-NEXT: func.return %c : tensor<4xf32>
// GENERIC: "func.func"() <{sym_name = "duplicates", function_type = (tensor<4xf32>) -> tensor<4xf32>}> ({
// GENERIC: %a = "graph.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
// SPLIT: builtin.module {
// SPLIT-NEXT: func.func @duplicates
func.func @duplicates(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.relu %x : tensor<4xf32>
  %b = graph.relu %x : tensor<4xf32>
  %c = graph.add %a, %b : tensor<4xf32>
  %dead = graph.tanh %x : tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// -----

// CSE-LABEL: func.func @second
// SPLIT: {{//}} -----
// SPLIT-NEXT: builtin.module {
// SPLIT-NEXT: func.func @second
// CSE-NEXT: %y = graph.softmax %x axis = 0 : tensor<4xf32>
// CSE-NEXT: func.return %y : tensor<4xf32>
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.softmax %x axis = 0 : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
