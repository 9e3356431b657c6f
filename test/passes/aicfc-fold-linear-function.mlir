// RUN: aicfc-opt %s -p 'aicfc-fold-linear{function=predict}' | filecheck %s
// RUN: not aicfc-opt %s -p 'aicfc-fold-linear{function=nope}' 2>&1 | filecheck %s --check-prefix=MISSING

// A module with a train step and its @predict (what train_digits.py --emit-mlir
// writes): the option folds @predict and leaves the train step as it is (without it
// the pass stops at the train step).

// MISSING: aicfc-opt: error: aicfc-fold-linear: no function @nope in the module (functions: @train_step, @predict)

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT:    graph.matmul %x, %w1 transpose_b
// CHECK-NEXT:    graph.matmul %{{.*}}, %w2 transpose_b
// CHECK-NEXT:    graph.mse_loss
func.func @train_step(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                      %y: tensor<3x8xf32> {aicfc.role = "input", aicfc.name = "y"},
                      %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
                      %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "1.weight"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<6x4xf32> {aicfc.name = "0.weight"}, tensor<8x6xf32> {aicfc.name = "1.weight"}) {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  %l = graph.mse_loss %1, %y : tensor<3x8xf32> -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w1, %w2 : tensor<f32>, (tensor<6x4xf32>, tensor<8x6xf32>) -> (tensor<6x4xf32>, tensor<8x6xf32>)
  %h_lr = graph.constant dense<1.000000e-01> : tensor<f64>
  %h_mu = graph.constant dense<0.0> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %n1 = autodiff.sgd_step %w1, %g#0 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<6x4xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  %n2 = autodiff.sgd_step %w2, %g#1 lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<8x6xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %n1, %n2 : tensor<f32>, tensor<6x4xf32>, tensor<8x6xf32>
}

// CHECK-LABEL: func.func @predict
// CHECK-NEXT:    %[[W:.*]] = graph.matmul %w2, %w1 : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %x, %[[W]] transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @predict(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
                   %w1: tensor<6x4xf32> {aicfc.role = "param", aicfc.name = "0.weight"},
                   %w2: tensor<8x6xf32> {aicfc.role = "param", aicfc.name = "1.weight"})
    -> (tensor<3x8xf32> {aicfc.name = "output"}) {
  %0 = graph.matmul %x, %w1 transpose_b : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %1 = graph.matmul %0, %w2 transpose_b : (tensor<3x6xf32>, tensor<8x6xf32>) -> tensor<3x8xf32>
  func.return %1 : tensor<3x8xf32>
}
