// Regressions: a function declaration crashed the located parser ("Function
// declarations don't have BlockArguments!"), and generic IR whose arg_attrs or
// res_attrs hold fewer dictionaries than the function has arguments or results
// ended in an internal IndexError in aicfc-lower-exec, aicfc-analyze and
// aicfc-fold-linear. Both are now a declaration that parses, and a located error.
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: aicfc-opt %s --split-input-file --verify-diagnostics -p aicfc-lower-exec | filecheck %s --check-prefix=LOWER

// CHECK: func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
// LOWER: {{.*}}func-signature-attributes.mlir:[[# @LINE + 1]]:1: error: 'func.func' only a function with exactly one block can be lowered to exec
func.func private @declared(tensor<4xf32>) -> tensor<4xf32>

// -----

// CHECK: {{.*}}func-signature-attributes.mlir:[[# @LINE + 2]]:1: error: 'func.func' @too_few_arg_attrs has 1 argument attribute dictionaries for 2 arguments; expected one per argument
// LOWER: {{.*}}func-signature-attributes.mlir:[[# @LINE + 1]]:1: error: 'func.func' @too_few_arg_attrs has 1 argument attribute dictionaries for 2 arguments; expected one per argument
"func.func"() <{sym_name = "too_few_arg_attrs", function_type = (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>, arg_attrs = [{aicfc.role = "input", aicfc.name = "x"}]}> ({
^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
  "func.return"(%x) : (tensor<4xf32>) -> ()
}) : () -> ()

// -----

// CHECK: {{.*}}func-signature-attributes.mlir:[[# @LINE + 2]]:1: error: 'func.func' @too_many_res_attrs has 2 result attribute dictionaries for 1 results; expected one per result
// LOWER: {{.*}}func-signature-attributes.mlir:[[# @LINE + 1]]:1: error: 'func.func' @too_many_res_attrs has 2 result attribute dictionaries for 1 results; expected one per result
"func.func"() <{sym_name = "too_many_res_attrs", function_type = (tensor<4xf32>) -> tensor<4xf32>, res_attrs = [{aicfc.name = "y"}, {aicfc.name = "z"}]}> ({
^bb0(%x: tensor<4xf32>):
  "func.return"(%x) : (tensor<4xf32>) -> ()
}) : () -> ()
