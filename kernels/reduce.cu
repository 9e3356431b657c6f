// Column reductions: the GEMM backward epilogue and reduce_sum.
//
// aicfc_epilogue_grad_f32: dZ = dY * act'(saved) and dbias = sum over rows of dZ,
//   in one pass (reference.epilogue_grad; design.md#composite-backward: the bias gradient reduces
//   dZ in the forward output's layout, never a transpose). act'(.) is aicfc::activate_grad
//   (common.cuh) of the `act` code; `saved` is what the activation's gradient saves:
//   Y for relu (relu'(z) = [y > 0]) and Z for gelu.
//   ABI: (dY [M, N], saved [M, N], dZ [M, N], dbias [N], int32 M, int32 N, int32 act).
// aicfc_reduce_sum_f32: x viewed as [outer, R, inner] -> out [outer, inner] (the
//   reduced axes of reduce_sum are contiguous; keepdims only changes the shape).
//   ABI: (x, out, int64 outer, int64 R, int64 inner).
//
// Both are deterministic: each output is summed by one block in a fixed order.
// Each comes in f32, bf16 and f16 (suffix _f32, _bf16, _f16): one template on the storage
// type, fp32 math inside (kernels/lowp.cuh): loads widen, sums run in float, and each
// result rounds once on its store (dbias sums the unrounded dZ, as reference.epilogue_grad
// does in float32 before rounding).
// Column kernels: block 32 x 32 threads, column tile of 32 (coalesced 128-byte rows),
// 32 row groups reduced through shared memory.
#include "common.cuh"
#include "lowp.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kCols = 32, kRowGroups = 32;

}  // namespace

// Grid: (ceil(N / 32), 1); block: (32, 32).
template <class T>
__device__ __forceinline__ void epilogue_grad(const T* __restrict__ dY,
                                              const T* __restrict__ saved, T* __restrict__ dZ,
                                              T* __restrict__ dbias, int32_t M, int32_t N,
                                              int32_t act) {
  __shared__ float part[kRowGroups][kCols + 1];
  int n = blockIdx.x * kCols + threadIdx.x;
  float s = 0.0f;
  if (n < N) {
#pragma unroll 4
    for (int m = threadIdx.y; m < M; m += kRowGroups) {
      size_t o = (size_t)m * N + n;
      float g = aicfc::activate_grad(aicfc::load<T>(__ldg(dY + o)),
                                     aicfc::load<T>(__ldg(saved + o)), act);
      dZ[o] = aicfc::store<T>(g);
      s += g;
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && n < N) {
    float t = 0.0f;
#pragma unroll 8
    for (int r = 0; r < kRowGroups; ++r) t += part[r][threadIdx.x];
    dbias[n] = aicfc::store<T>(t);
  }
}

// Reduce over R with a contiguous inner dimension: grid (ceil(inner / 32), outer),
// block (32, 32).
template <class T>
__device__ __forceinline__ void reduce_sum(const T* __restrict__ x, T* __restrict__ out,
                                           int64_t outer, int64_t R, int64_t inner) {
  __shared__ float part[kRowGroups][kCols + 1];
  __shared__ float scratch[32];
  int64_t o = blockIdx.y;
  float s = 0.0f;
  if (inner == 1) {
    // Row reduction: the whole block strides over R.
    const T* row = x + o * R;
    int tid = threadIdx.y * kCols + threadIdx.x;
    for (int64_t r = tid; r < R; r += kCols * kRowGroups) s += aicfc::load<T>(__ldg(row + r));
    // block_sum expects a 1-D block; reduce through shared memory instead.
    s = aicfc::warp_sum(s);
    if (threadIdx.x == 0) scratch[threadIdx.y] = s;
    __syncthreads();
    if (threadIdx.y == 0) {
      float t = aicfc::warp_sum(scratch[threadIdx.x]);
      if (threadIdx.x == 0 && blockIdx.x == 0) out[o] = aicfc::store<T>(t);
    }
    return;
  }
  int64_t i = (int64_t)blockIdx.x * kCols + threadIdx.x;
  if (i < inner) {
    const T* base = x + o * R * inner + i;
    for (int64_t r = threadIdx.y; r < R; r += kRowGroups) {
      s += aicfc::load<T>(__ldg(base + r * inner));
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
    float t = 0.0f;
#pragma unroll 8
    for (int r = 0; r < kRowGroups; ++r) t += part[r][threadIdx.x];
    out[o * inner + i] = aicfc::store<T>(t);
  }
}

#define AICFC_REDUCE_KERNELS(SUFFIX, T)                                                   \
  extern "C" __global__ void __launch_bounds__(1024) aicfc_epilogue_grad_##SUFFIX(      \
      const T* __restrict__ dY, const T* __restrict__ saved, T* __restrict__ dZ,        \
      T* __restrict__ dbias, int32_t M, int32_t N, int32_t act) {                       \
    epilogue_grad<T>(dY, saved, dZ, dbias, M, N, act);                                   \
  }                                                                                      \
  extern "C" __global__ void __launch_bounds__(1024) aicfc_reduce_sum_##SUFFIX(         \
      const T* __restrict__ x, T* __restrict__ out, int64_t outer, int64_t R,           \
      int64_t inner) {                                                                   \
    reduce_sum<T>(x, out, outer, R, inner);                                              \
  }

AICFC_REDUCE_KERNELS(f32, float)
AICFC_REDUCE_KERNELS(bf16, aicfc::bf16)
AICFC_REDUCE_KERNELS(f16, aicfc::f16)
