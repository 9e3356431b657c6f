// Losses and row-wise softmax (float32, rows of the last axis).
//
// aicfc_cross_entropy_f32_{i32,i64}: loss = mean_n(logsumexp(x_n) - x_n[y_n])
//   (reference.cross_entropy: log-sum-exp, never log(softmax)).
//   ABI: (logits [N, C], labels [N], loss [], workspace, int32 N, int32 C).
// aicfc_cross_entropy_grad_f32_{i32,i64}: dx = (softmax(x) - onehot(y)) * dloss / N.
//   ABI: (logits, labels, dloss [], dx [N, C], int32 N, int32 C).
// aicfc_cross_entropy_with_grad_f32_{i32,i64}: both of the above and, when dbias is not
//   null, dbias = column sums of dx (the logits layer's bias gradient), in one launch
//   (autodiff.cross_entropy_with_grad): each warp reads its row of logits once for the
//   loss and the gradient; each block sums its rows of dx per column, and the last block
//   adds the blocks' partial losses and columns in block order (deterministic).
//   ABI: (logits, labels, dloss [], loss [], dx [N, C], dbias [C]|null, workspace,
//         int32 N, int32 C).
//   Workspace: the counter at byte 0, loss partials from byte 256, column partials
//   [blocks][C] from byte 256 + 256 * ceil(4 * blocks / 256).
// A label outside [0, C) (only possible for labels already on the device, which the API
// does not read back) makes that row's loss NaN and its gradient row zero, instead of
// reading outside the row.
// aicfc_softmax_f32: y = softmax(x) along the last axis.  ABI: (x, y, int32 rows, int32 C).
// aicfc_softmax_grad_f32: dx = y * (dy - sum(dy * y)).  ABI: (dy, y, dx, int32 rows, int32 C).
// aicfc_mse_loss_f32: mean((p - t)^2).  ABI: (p, t, loss [], workspace, int64 n).
// aicfc_mse_loss_grad_f32: 2 (p - t) dloss / n.  ABI: (p, t, dloss [], dp, int64 n).
//
// One warp per row (8 rows per 256-thread block). The scalar losses reduce
// deterministically: each block writes its partial sum to the workspace, and the
// last block to finish adds the partials in block order (common.cuh). Workspace
// layout: uint32 counter at byte 0, float partials from byte 256 (one per block).
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kRowsPerBlock = 8;

__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ float row_max(const float* x, int C, int lane) {
  float m = __int_as_float(0xff800000);  // -inf (NVRTC has no math.h)
  for (int c = lane; c < C; c += 32) m = fmaxf(m, __ldg(x + c));
  return aicfc::warp_max(m);
}

__device__ __forceinline__ float row_sum_exp(const float* x, int C, float mx, int lane) {
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += expf(__ldg(x + c) - mx);
  return aicfc::warp_sum(s);
}

// Adds each block's `partial` (valid in thread 0) in block order into *out; the last
// block writes out[0] = scale * sum.
__device__ __forceinline__ void finish_mean(float partial, void* workspace, float* out,
                                            float scale) {
  uint32_t* counter = reinterpret_cast<uint32_t*>(workspace);
  float* partials = reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + 256);
  if (threadIdx.x == 0) partials[blockIdx.x] = partial;
  if (aicfc::last_block_done(counter)) {
    __shared__ float scratch[32];
    float s = 0.0f;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(partials + b);
    s = aicfc::block_sum(s, scratch);
    if (threadIdx.x == 0) out[0] = s * scale;
  }
}

template <typename L>
__device__ void cross_entropy(const float* __restrict__ logits, const L* __restrict__ labels,
                              float* __restrict__ loss, void* workspace, int N, int C) {
  __shared__ float rows[kRowsPerBlock];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * kRowsPerBlock + warp;
  float l = 0.0f;
  if (n < N) {
    const float* x = logits + (size_t)n * C;
    float mx = row_max(x, C, lane);
    float lse = logf(row_sum_exp(x, C, mx, lane));
    int y = (int)labels[n];
    l = (y >= 0 && y < C) ? lse - (__ldg(x + y) - mx) : quiet_nan();
  }
  if (lane == 0) rows[warp] = l;
  __syncthreads();
  float partial = 0.0f;
  if (threadIdx.x == 0)
    for (int r = 0; r < kRowsPerBlock; ++r) partial += rows[r];
  finish_mean(partial, workspace, loss, 1.0f / (float)N);
}

template <typename L>
__device__ void cross_entropy_grad(const float* __restrict__ logits, const L* __restrict__ labels,
                                   const float* __restrict__ dloss, float* __restrict__ dx, int N,
                                   int C) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * kRowsPerBlock + warp;
  if (n >= N) return;
  const float* x = logits + (size_t)n * C;
  float* d = dx + (size_t)n * C;
  float mx = row_max(x, C, lane);
  float inv = 1.0f / row_sum_exp(x, C, mx, lane);
  float scale = dloss[0] / (float)N;
  int y = (int)labels[n];
  bool valid = y >= 0 && y < C;
  for (int c = lane; c < C; c += 32) {
    float g = expf(__ldg(x + c) - mx) * inv - (c == y ? 1.0f : 0.0f);
    d[c] = valid ? g * scale : 0.0f;
  }
}

__device__ __forceinline__ size_t column_partials_offset(unsigned blocks) {
  return 256 + ((size_t)blocks * 4 + 255) / 256 * 256;
}

template <typename L>
__device__ void cross_entropy_with_grad(const float* __restrict__ logits,
                                        const L* __restrict__ labels,
                                        const float* __restrict__ dloss, float* __restrict__ loss,
                                        float* dx, float* __restrict__ dbias, void* workspace,
                                        int N, int C) {
  __shared__ float rows[kRowsPerBlock];
  __shared__ float scratch[32];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * kRowsPerBlock + warp;
  float l = 0.0f;
  if (n < N) {
    const float* x = logits + (size_t)n * C;
    float* d = dx + (size_t)n * C;
    float mx = row_max(x, C, lane);
    float sum = row_sum_exp(x, C, mx, lane);
    float inv = 1.0f / sum;
    float scale = __ldg(dloss) / (float)N;
    int y = (int)labels[n];
    bool valid = y >= 0 && y < C;
    l = valid ? logf(sum) - (__ldg(x + y) - mx) : quiet_nan();
    for (int c = lane; c < C; c += 32) {
      float g = expf(__ldg(x + c) - mx) * inv - (c == y ? 1.0f : 0.0f);
      d[c] = valid ? g * scale : 0.0f;
    }
  }
  if (lane == 0) rows[warp] = l;
  __syncthreads();  // this block's rows of dx are now visible to all its threads
  char* ws = reinterpret_cast<char*>(workspace);
  float* loss_partials = reinterpret_cast<float*>(ws + 256);
  float* column_partials = reinterpret_cast<float*>(ws + column_partials_offset(gridDim.x));
  if (threadIdx.x == 0) {
    float partial = 0.0f;
    for (int r = 0; r < kRowsPerBlock; ++r) partial += rows[r];
    loss_partials[blockIdx.x] = partial;
  }
  if (dbias) {
    int r0 = blockIdx.x * kRowsPerBlock, r1 = min(N, r0 + kRowsPerBlock);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float s = 0.0f;
      for (int r = r0; r < r1; ++r) s += dx[(size_t)r * C + c];
      column_partials[(size_t)blockIdx.x * C + c] = s;
    }
  }
  if (aicfc::last_block_done(reinterpret_cast<uint32_t*>(workspace))) {
    float s = 0.0f;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(loss_partials + b);
    s = aicfc::block_sum(s, scratch);
    if (threadIdx.x == 0) loss[0] = s * (1.0f / (float)N);
    if (dbias) {
      // In block order, 8 blocks' loads in flight at a time (absent ones read as 0).
      for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float t = 0.0f;
        for (unsigned b0 = 0; b0 < gridDim.x; b0 += 8) {
          float v[8];
#pragma unroll
          for (unsigned q = 0; q < 8; ++q)
            v[q] = b0 + q < gridDim.x ? __ldcg(column_partials + (size_t)(b0 + q) * C + c) : 0.0f;
#pragma unroll
          for (unsigned q = 0; q < 8; ++q) t += v[q];
        }
        dbias[c] = t;
      }
    }
  }
}

}  // namespace

// Grid: ceil(N / 8) blocks of 256 threads (the workspace holds one partial per block).
#define AICFC_CE(LT, CT)                                                                        \
  extern "C" __global__ void __launch_bounds__(256) aicfc_cross_entropy_f32_##LT(              \
      const float* logits, const CT* labels, float* loss, void* workspace, int32_t N,           \
      int32_t C) {                                                                              \
    cross_entropy<CT>(logits, labels, loss, workspace, N, C);                                   \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) aicfc_cross_entropy_grad_f32_##LT(         \
      const float* logits, const CT* labels, const float* dloss, float* dx, int32_t N,          \
      int32_t C) {                                                                              \
    cross_entropy_grad<CT>(logits, labels, dloss, dx, N, C);                                    \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) aicfc_cross_entropy_with_grad_f32_##LT(    \
      const float* logits, const CT* labels, const float* dloss, float* loss, float* dx,        \
      float* dbias, void* workspace, int32_t N, int32_t C) {                                    \
    cross_entropy_with_grad<CT>(logits, labels, dloss, loss, dx, dbias, workspace, N, C);       \
  }

AICFC_CE(i32, int32_t)
AICFC_CE(i64, int64_t)

// Grid: ceil(rows / 8) blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_softmax_f32(const float* __restrict__ x, float* __restrict__ y, int32_t rows, int32_t C) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * kRowsPerBlock + warp;
  if (n >= rows) return;
  const float* xr = x + (size_t)n * C;
  float mx = row_max(xr, C, lane);
  float inv = 1.0f / row_sum_exp(xr, C, mx, lane);
  for (int c = lane; c < C; c += 32) y[(size_t)n * C + c] = expf(__ldg(xr + c) - mx) * inv;
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_softmax_grad_f32(const float* __restrict__ dy, const float* __restrict__ y,
                           float* __restrict__ dx, int32_t rows, int32_t C) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * kRowsPerBlock + warp;
  if (n >= rows) return;
  size_t base = (size_t)n * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += __ldg(dy + base + c) * __ldg(y + base + c);
  s = aicfc::warp_sum(s);
  for (int c = lane; c < C; c += 32) dx[base + c] = __ldg(y + base + c) * (__ldg(dy + base + c) - s);
}

// Grid: up to 1024 blocks of 256 threads, grid-stride.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_mse_loss_f32(const float* __restrict__ p, const float* __restrict__ t,
                       float* __restrict__ loss, void* workspace, int64_t n) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float d = __ldg(p + i) - __ldg(t + i);
    s += d * d;
  }
  s = aicfc::block_sum(s, scratch);
  finish_mean(s, workspace, loss, 1.0f / (float)n);
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_mse_loss_grad_f32(const float* __restrict__ p, const float* __restrict__ t,
                            const float* __restrict__ dloss, float* __restrict__ dp, int64_t n) {
  float scale = dloss[0] / (float)n;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dp[i] = 2.0f * (__ldg(p + i) - __ldg(t + i)) * scale;
}
