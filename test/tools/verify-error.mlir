// A verification error without --verify-diagnostics: the located message on
// stderr, exit code 1, no Python traceback. With --split-input-file the line
// numbers are those of the whole file, and the first failing chunk stops the run
// (chunks before it are printed; the error in the third chunk is not reached).
// Without it, the first failing op in the file is the one reported.
// RUN: not aicfc-opt %s 2>&1 | filecheck %s
// RUN: not aicfc-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=SPLIT

// CHECK-NOT: Traceback
// SPLIT-NOT: Traceback
// SPLIT-NOT: got i1
func.func @ok(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// -----

func.func @bad_bias(%x: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<8x16xf32> {
  // CHECK: {{.*}}verify-error.mlir:[[# @LINE + 2]]:3: error: graph.bias_add: bias must have shape [16] (the last dim of input [8, 16]), got [8]
  // SPLIT: {{.*}}verify-error.mlir:[[# @LINE + 1]]:3: error: graph.bias_add: bias must have shape [16] (the last dim of input [8, 16]), got [8]
  %y = graph.bias_add %x, %b : (tensor<8x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  func.return %y : tensor<8x16xf32>
}

// -----

func.func @not_reached(%x: tensor<4xi1>) {
  %y = graph.relu %x : tensor<4xi1>
  func.return
}
// CHECK-NOT: Traceback
// SPLIT-NOT: Traceback
// SPLIT-NOT: got i1
