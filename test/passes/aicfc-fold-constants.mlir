// RUN: aicfc-opt %s -p aicfc-fold-constants | filecheck %s
// RUN: aicfc-opt %s -p canonicalize,aicfc-fold-constants,cse | filecheck %s

// Ops whose operands are all graph.constant become constants computed with the
// NumPy reference; dead constants disappear. Expected values are worked out by
// hand in each comment.

// [[1, 2], [3, 4]] @ 0.5 (splat) = [[1.5, 1.5], [3.5, 3.5]]; then relu(c - 2) = [[0, 0], [1.5, 1.5]].
// CHECK-LABEL: func.func @constant_fold_chain
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<{{\[}}[0.000000e+00, 0.000000e+00], [1.500000e+00, 1.500000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @constant_fold_chain() -> tensor<2x2xf32> {
  %a = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = graph.constant dense<0.5> : tensor<2x2xf32>
  %two = graph.constant dense<2.0> : tensor<2x2xf32>
  %m = graph.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %s = graph.sub %m, %two : tensor<2x2xf32>
  %r = graph.relu %s : tensor<2x2xf32>
  func.return %r : tensor<2x2xf32>
}

// Layout ops on constants fold too: transpose of [[1, 2, 3]] is [[1], [2], [3]].
// CHECK-LABEL: func.func @constant_fold_transpose
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<{{\[}}[1.000000e+00], [2.000000e+00], [3.000000e+00]]> : tensor<3x1xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @constant_fold_transpose() -> tensor<3x1xf32> {
  %a = graph.constant dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf32>
  %t = graph.transpose %a perm = [1, 0] : tensor<1x3xf32> -> tensor<3x1xf32>
  func.return %t : tensor<3x1xf32>
}

// Integer constants: the Philox offset advanced by one.
// CHECK-LABEL: func.func @constant_fold_integer_add
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<8> : tensor<i64>
// CHECK-NEXT:    func.return %[[C]]
func.func @constant_fold_integer_add() -> tensor<i64> {
  %a = graph.constant dense<7> : tensor<i64>
  %one = graph.constant dense<1> : tensor<i64>
  %s = graph.add %a, %one : tensor<i64>
  func.return %s : tensor<i64>
}

// A splat broadcast folds to a splat constant however large it is.
// CHECK-LABEL: func.func @constant_fold_splat_broadcast
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<2.500000e+00> : tensor<64x300xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @constant_fold_splat_broadcast() -> tensor<64x300xf32> {
  %a = graph.constant dense<2.5> : tensor<300xf32>
  %b = graph.broadcast_to %a : tensor<300xf32> -> tensor<64x300xf32>
  func.return %b : tensor<64x300xf32>
}

// Folding would turn 4 stored values into 400 (more than 256): the broadcast stays.
// CHECK-LABEL: func.func @dont_fold_growing_broadcast
// CHECK-NEXT:    %[[A:.*]] = graph.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.broadcast_to %[[A]] : tensor<2x2xf32> -> tensor<100x2x2xf32>
// CHECK-NEXT:    func.return %[[B]]
func.func @dont_fold_growing_broadcast() -> tensor<100x2x2xf32> {
  %a = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = graph.broadcast_to %a : tensor<2x2xf32> -> tensor<100x2x2xf32>
  func.return %b : tensor<100x2x2xf32>
}

// A small result folds even when it is larger than its operands (4 <= 256 elements).
// CHECK-LABEL: func.func @constant_fold_small_broadcast
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @constant_fold_small_broadcast() -> tensor<2x2xf32> {
  %a = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = graph.broadcast_to %a : tensor<2xf32> -> tensor<2x2xf32>
  func.return %b : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @dont_fold_with_argument
// CHECK-NEXT:    graph.constant
// CHECK-NEXT:    graph.add %x,
func.func @dont_fold_with_argument(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %s = graph.add %x, %c : tensor<2xf32>
  func.return %s : tensor<2xf32>
}

// A random draw stays in the program even with a constant input and offset.
// CHECK-LABEL: func.func @dont_fold_dropout
// CHECK:         graph.dropout
func.func @dont_fold_dropout() -> tensor<4xf32> {
  %x = graph.constant dense<1.0> : tensor<4xf32>
  %o = graph.constant dense<0> : tensor<i64>
  %y = graph.dropout %x, %o p = 5.000000e-01 seed = 7 : tensor<4xf32>, tensor<i64>
  func.return %y : tensor<4xf32>
}

