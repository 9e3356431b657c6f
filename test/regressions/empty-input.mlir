// Regression: an input without ops (this file, or the chunk after a trailing
// `// -----`) was "error: Could not parse entire input!"; as in mlir-opt it is
// an empty module.
// RUN: aicfc-opt %s | filecheck %s
// RUN: aicfc-opt %s -p aicfc-train-pipeline | filecheck %s
// RUN: aicfc-opt %S/Inputs/trailing-split-marker.mlir --split-input-file | filecheck %s --check-prefix=SPLIT

// CHECK: builtin.module {
// CHECK-NEXT: }

// SPLIT: func.func @only
// SPLIT: // -----
// SPLIT-NEXT: builtin.module {
// SPLIT-NEXT: }
