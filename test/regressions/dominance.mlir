// Regressions: a use that its definition does not dominate (MLIR's verifier rule,
// which xDSL does not check) is a located error naming the value; it parsed, went
// through aicfc-fuse, canonicalize and cse, and aicfc-lower-exec then died with
// `internal error: KeyError`. A numeric block label gave a bare ValueError.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @use_before_def(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: {{.*}}dominance.mlir:[[# @LINE + 1]]:3: error: 'graph.relu' operand #0 (%0) is used before its definition ('graph.tanh' at {{.*}}dominance.mlir:[[# @LINE + 2]]:3)
  %1 = graph.relu %0 : tensor<2xf32>
  %0 = graph.tanh %x : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}

// -----

func.func @named_use_before_def(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: {{.*}}dominance.mlir:[[# @LINE + 1]]:3: error: 'graph.add' operand #1 (%late) is used before its definition ('graph.tanh' at {{.*}}dominance.mlir:[[# @LINE + 2]]:3)
  %s = graph.add %x, %late : tensor<2xf32>
  %late = graph.tanh %x : tensor<2xf32>
  func.return %s : tensor<2xf32>
}

// -----

func.func @own_result(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: {{.*}}dominance.mlir:[[# @LINE + 1]]:3: error: 'graph.add' operand #1 (%s) is a result of the op that uses it ('graph.add' at {{.*}}dominance.mlir:[[# @LINE + 1]]:3)
  %s = graph.add %x, %s : tensor<2xf32>
  func.return %s : tensor<2xf32>
}

// -----

// CHECK: {{.*}}dominance.mlir:[[# @LINE + 2]]:1: error: block label '^2' is not supported: a block name must start with a letter, '_', '$', '.' or '-' (for example ^bb2)
"func.func"() <{sym_name = "numeric_block_label", function_type = () -> ()}> ({
^2:
  "func.return"() : () -> ()
}) : () -> ()
