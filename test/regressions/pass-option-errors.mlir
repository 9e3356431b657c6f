// Regression: bad options of aicfc-plan-memory and aicfc-lower-exec were found
// only when the pass ran, and printed without the driver's "aicfc-opt: error:"
// prefix; they are now command-line errors, like every other pass option.
// RUN: not aicfc-opt %s -p 'aicfc-plan-memory{alignment=48}' 2>&1 | filecheck %s --check-prefix=ALIGN
// RUN: not aicfc-opt %s -p 'aicfc-lower-exec{backend=tpu}' 2>&1 | filecheck %s --check-prefix=BACKEND

// ALIGN: aicfc-opt: error: bad pass options in 'aicfc-plan-memory{alignment=48}': aicfc-plan-memory: alignment must be a power of two, got 48
// ALIGN-NOT: Traceback
// BACKEND: aicfc-opt: error: bad pass options in 'aicfc-lower-exec{backend=tpu}': aicfc-lower-exec: unknown backend 'tpu'; expected one of numpy, cupy, cuda (cuda, the kernel family of cupy, selects cupy)
// BACKEND-NOT: Traceback
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
