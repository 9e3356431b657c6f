// Column reductions: the GEMM backward epilogue and reduce_sum.
//
// aicfc_epilogue_grad_f32: dZ = dY * act'(saved) and the column sums of dZ over row
//   chunks, in one pass (reference.epilogue_grad; design.md#composite-backward: the bias
//   gradient reduces dZ in the forward output's layout, never a transpose). act'(.) is
//   aicfc::activate_grad (common.cuh) of the `act` code; `saved` is what the activation's
//   gradient saves: Y for relu (relu'(z) = [y > 0]) and Z for gelu.
//   ABI: (dY [M, N], saved [M, N], dZ [M, N], partial [chunks, N], int32 M, int32 N,
//   int32 act, int32 rows): block (x, c) sums rows [c rows, (c + 1) rows) of 32 columns.
//   With one chunk `partial` is dbias itself; with more, aicfc_sum_partials_f32 adds the
//   chunks' rows into dbias in chunk order (two stages: [16384, 1536] is 48 column tiles,
//   too few blocks for the H200's 132 multiprocessors without splitting the rows).
// aicfc_sum_partials_f32: out [N] = sum over c of partial [c, N], c = 0, 1, ... in order.
//   ABI: (partial [chunks, N], out [N], int32 chunks, int32 N).
// aicfc_reduce_sum_f32: x viewed as [outer, R, inner] -> out [outer, inner] (the
//   reduced axes of reduce_sum are contiguous; keepdims only changes the shape), R split
//   into chunks of `rows` where inner > 1 (a bias gradient's [16384, 384] is 12 column
//   tiles): block row y = c outer + o writes chunk c's sums to out [c, outer, inner], and
//   aicfc_sum_partials_f32 adds the chunks (N = outer inner) as for epilogue_grad.
//   ABI: (x, out, int64 outer, int64 R, int64 inner, int64 rows).
//
// All are deterministic: each sum runs in a fixed order (no atomics).
// epilogue_grad and reduce_sum come in f32, bf16 and f16 (suffix _f32, _bf16, _f16): one
// template on the storage type, fp32 math inside (kernels/lowp.cuh): loads widen, sums run
// in float, and each result rounds once on its store (dbias sums the unrounded dZ, as
// reference.epilogue_grad does in float32 before rounding). The bf16/f16 ones run as one
// chunk (their launchers: a rounded partial would round twice).
// The wide ones, _bf16_f32 and _f16_f32, read bf16/f16 and write the sums (dbias, out)
// in float32, unrounded (dialects/wide_results.py); dZ keeps the storage type. They run
// as one chunk too, as the low ones do.
// Column kernels: block 32 x 32 threads, column tile of 32 (coalesced 128-byte rows),
// 32 row groups reduced through shared memory.
#include "common.cuh"
#include "lowp.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kCols = 32, kRowGroups = 32;

}  // namespace

// Grid: (ceil(N / 32), chunks); block: (32, 32).
template <class T, class O>
__device__ __forceinline__ void epilogue_grad(const T* __restrict__ dY,
                                              const T* __restrict__ saved, T* __restrict__ dZ,
                                              O* __restrict__ partial, int32_t M, int32_t N,
                                              int32_t act, int32_t rows) {
  __shared__ float part[kRowGroups][kCols + 1];
  int n = blockIdx.x * kCols + threadIdx.x;
  int begin = blockIdx.y * rows;
  int end = min(M, begin + rows);
  float s = 0.0f;
  if (n < N) {
#pragma unroll 4
    for (int m = begin + threadIdx.y; m < end; m += kRowGroups) {
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
    partial[(size_t)blockIdx.y * N + n] = aicfc::store<O>(t);
  }
}

// Grid: ceil(N / 256); block: 256.
extern "C" __global__ void aicfc_sum_partials_f32(const float* __restrict__ partial,
                                                  float* __restrict__ out, int32_t chunks,
                                                  int32_t N) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float t = 0.0f;
  for (int c = 0; c < chunks; ++c) t += __ldg(partial + (size_t)c * N + n);
  out[n] = t;
}

// Reduce over R with a contiguous inner dimension: grid (ceil(inner / 32), chunks outer),
// block (32, 32); inner == 1 takes one chunk (rows >= R).
template <class T, class O>
__device__ __forceinline__ void reduce_sum(const T* __restrict__ x, O* __restrict__ out,
                                           int64_t outer, int64_t R, int64_t inner,
                                           int64_t rows) {
  __shared__ float part[kRowGroups][kCols + 1];
  __shared__ float scratch[32];
  int64_t o = blockIdx.y % outer, c = blockIdx.y / outer;
  int64_t begin = c * rows, end = begin + rows < R ? begin + rows : R;
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
      if (threadIdx.x == 0 && blockIdx.x == 0) out[o] = aicfc::store<O>(t);
    }
    return;
  }
  int64_t i = (int64_t)blockIdx.x * kCols + threadIdx.x;
  if (i < inner) {
    const T* base = x + o * R * inner + i;
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowGroups) {
      s += aicfc::load<T>(__ldg(base + r * inner));
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
    float t = 0.0f;
#pragma unroll 8
    for (int r = 0; r < kRowGroups; ++r) t += part[r][threadIdx.x];
    out[(c * outer + o) * inner + i] = aicfc::store<O>(t);
  }
}

#define AICFC_REDUCE_KERNELS(SUFFIX, T, O)                                                \
  extern "C" __global__ void __launch_bounds__(1024) aicfc_epilogue_grad_##SUFFIX(      \
      const T* __restrict__ dY, const T* __restrict__ saved, T* __restrict__ dZ,        \
      O* __restrict__ partial, int32_t M, int32_t N, int32_t act, int32_t rows) {       \
    epilogue_grad<T, O>(dY, saved, dZ, partial, M, N, act, rows);                        \
  }                                                                                      \
  extern "C" __global__ void __launch_bounds__(1024) aicfc_reduce_sum_##SUFFIX(         \
      const T* __restrict__ x, O* __restrict__ out, int64_t outer, int64_t R,           \
      int64_t inner, int64_t rows) {                                                     \
    reduce_sum<T, O>(x, out, outer, R, inner, rows);                                     \
  }

AICFC_REDUCE_KERNELS(f32, float, float)
AICFC_REDUCE_KERNELS(bf16, aicfc::bf16, aicfc::bf16)
AICFC_REDUCE_KERNELS(f16, aicfc::f16, aicfc::f16)
AICFC_REDUCE_KERNELS(bf16_f32, aicfc::bf16, float)
AICFC_REDUCE_KERNELS(f16_f32, aicfc::f16, float)
