// Mistakes on the command line: each prints one `aicfc-opt: error: ...` (or a
// located error for the input file), exits non-zero, and shows no traceback.
// RUN: not aicfc-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not aicfc-opt %s -p 'canonicalize{bogus=true}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not aicfc-opt %s -p 'aicfc-fold-inplace{enable=3}' 2>&1 | filecheck %s --check-prefix=VALUE
// RUN: not aicfc-opt %s -p 'cse,{' 2>&1 | filecheck %s --check-prefix=PIPELINE
// RUN: not aicfc-opt %S/no-such-file.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not aicfc-opt %S 2>&1 | filecheck %s --check-prefix=DIRECTORY
// RUN: not aicfc-opt %S/Inputs/not-utf8.mlir 2>&1 | filecheck %s --check-prefix=BYTES
// RUN: not aicfc-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG

// PASS-NOT: Traceback
// PASS: aicfc-opt: error: unknown pass 'no-such-pass'; available: {{.*}}aicfc-fuse{{.*}} and xDSL's (canonicalize, cse, dce); see docs/passes.md
// PASS-NOT: Traceback

// OPTION-NOT: Traceback
// OPTION: aicfc-opt: error: bad pass options in 'canonicalize{bogus=true}': canonicalize has no option 'bogus' (it takes no options)
// OPTION-NOT: Traceback

// VALUE-NOT: Traceback
// VALUE: aicfc-opt: error: bad pass options in 'aicfc-fold-inplace{enable=3}': option 'enable' of aicfc-fold-inplace expects a boolean (true or false), got 3
// VALUE-NOT: Traceback

// PIPELINE-NOT: Traceback
// PIPELINE: aicfc-opt: error: bad pass pipeline 'cse,{':
// PIPELINE: Expected pass name here
// PIPELINE-NOT: Traceback

// MISSING-NOT: Traceback
// MISSING: aicfc-opt: error: cannot open '{{.*}}no-such-file.mlir': No such file or directory
// MISSING-NOT: Traceback

// DIRECTORY-NOT: Traceback
// DIRECTORY: aicfc-opt: error: cannot open '{{.*}}tools': Is a directory
// DIRECTORY-NOT: Traceback

// BYTES-NOT: Traceback
// BYTES: {{.*}}not-utf8.mlir: error: not UTF-8 text (invalid start byte at byte 0)
// BYTES-NOT: Traceback

// FLAG-NOT: Traceback
// FLAG: aicfc-opt: error: unrecognized arguments: --no-such-flag
// FLAG-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
