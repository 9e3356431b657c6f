// A syntax error is reported as file:line:col: error: ..., with exit code 1 and
// no Python traceback (`not` fails the RUN line if aicfc-opt exits 0).
// RUN: not aicfc-opt %s 2>&1 | filecheck %s
// The same from standard input, located in "stdin".
// RUN: not aicfc-opt < %s 2>&1 | filecheck %s --check-prefix=STDIN

// CHECK-NOT: Traceback
// STDIN-NOT: Traceback
func.func @missing_angle(%x: tensor<4xf32>) {
  %y = graph.relu %x : tensor<4xf32
  // The parser notices the missing '>' at the next token.
  // CHECK: {{.*}}parse-error.mlir:[[# @LINE + 2]]:3: error: Expected '>' after builtin parameter list
  // STDIN: stdin:[[# @LINE + 1]]:3: error: Expected '>' after builtin parameter list
  func.return
}
// CHECK-NOT: Traceback
// STDIN-NOT: Traceback
