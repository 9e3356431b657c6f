// Layer normalisation over the last dim (Ba, Kiros and Hinton 2016, "Layer
// normalization"), with torch.nn.functional.layer_norm's semantics: biased variance,
// eps inside the square root, optional elementwise weight and bias.
//
// Operands: x [N, D] row-major float32 (N = the product of the leading dims), w [D]
// and b [D] or null (null: w = 1, b = 0), mean [N] and rstd [N] float32. Math:
//   mean = sum(x) / D, var = sum((x - mean)^2) / D (two passes over registers),
//   rstd = 1 / sqrt(var + eps), xhat = (x - mean) rstd, y = xhat w + b.
// Backward, with g = dy w:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  dw = sum_n dy xhat,  db = sum_n dy.
//
// aicfc_layer_norm_f32: y, mean, rstd from x.
//   ABI: (x, w|null, b|null, y [N, D], mean [N], rstd [N], int32 N, int32 D, float eps).
// aicfc_add_layer_norm_f32: the residual add fused in front (the add + layer_norm
//   fusion): s = x + r, y = LN(s); s, y, mean and rstd are all written.
//   ABI: (x, r [N, D], w|null, b|null, s [N, D], y, mean, rstd, int32 N, int32 D,
//         float eps).
// aicfc_[add_]layer_norm_f32_{bf16,f16}: the same with y stored in bf16/f16 (a narrow
//   result, aicfc-fold-narrowing-casts): the float32 math above, each y value rounded to
//   nearest even as it is stored (lowp.cuh aicfc::store), which is bit for bit the cast
//   of the f32 kernel's y; x, r, w, b, s, mean and rstd stay float32. Same ABIs.
// aicfc_layer_norm_grad_f32: dx (plus dres when given: the gradient that reaches the
//   normalised input along the residual path, so the add of the two gradients is
//   fused: autodiff.add_layer_norm_grad), and when the workspace is not null each
//   block's column partials of dw and db. x is the normalised input (s for the fused
//   forward).
//   ABI: (dy [N, D], x [N, D], mean, rstd, w|null, dres [N, D]|null, dx [N, D],
//         workspace|null, int32 N, int32 D).
//   Workspace: float partials [2][gridDim.x][D] (dw's, then db's); every entry is
//   written before it is read, so it needs no zeroing.
// aicfc_layer_norm_param_grad_f32: dw[c] and db[c] (each optional) from the partials,
//   in a fixed order.
//   ABI: (dw [D]|null, db [D]|null, workspace, int32 blocks, int32 D).
//   Grid: (ceil(D / 32), 2), block (32, 32): y = 0 sums dw, y = 1 db; thread row ty adds
//   partials ty, ty + 32, ... in order, then row 0 adds the 32 row sums in order.
//
// Row kernels (rows.cuh): a team of blockDim.x threads per row, blockDim.y rows per
// block, grid-stride over rows. Each thread holds 16 elements of its row in registers,
// so the team is team(D) = max(32, next power of two >= ceil(D / 16)), at most 512
// (D <= 8192): a warp per row up to D = 512, a block per row from D = 4096. Block:
// (team, max(1, 256 / team)); the
// forward grid is ceil(N / rows per block) blocks; the backward's is min(that,
// 2 x multiprocessors), which fixes the number of partials (each team then
// accumulates several rows' dw, db in registers). Thread t of a team holds columns
// (k team + t) 4 + [0, 4) (16-byte accesses, when D is a multiple of 4 and every
// buffer is 16-byte aligned) or k team + t (otherwise), k < 16 / width; the choice
// is made in the kernel, uniformly, from D and the pointers. The backward adds the
// teams of a block in team order through 16 KB of shared memory.
//
// Deterministic: every sum has a fixed order for given N, D and grid, and no atomics
// are used; repeated launches are bit-identical.
#include "common.cuh"
#include "lowp.cuh"
#include "rows.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kPer = 16;          // row elements a thread holds in registers
constexpr int kRowThreads = 256;  // team x rows per block, when a team is narrower
constexpr int kMaxThreads = 512;  // the widest team (D <= 16 x 512)

// Shared memory of the row kernels, declared once per entry point (a __shared__ array
// inside a template would be one array per instance).
struct Shared {
  float scratch[32];                // team_reduce
  float part[kRowThreads * kPer];  // the backward's block column sums (16 KB)
};

template <int VEC>
__device__ __forceinline__ void load(const float* __restrict__ p, float* v) {
  if constexpr (VEC == 4) {
    float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
    v[0] = __ldg(p);
  }
}

template <int VEC>
__device__ __forceinline__ void store(float* p, const float* v) {
  if constexpr (VEC == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    p[0] = v[0];
  }
}

// A bf16/f16 destination: each value rounded to nearest even (an f32 one takes the
// overload above).
template <int VEC, class T>
__device__ __forceinline__ void store(T* p, const float* v) {
#pragma unroll
  for (int u = 0; u < VEC; ++u) p[u] = aicfc::store<T>(v[u]);
}

template <int VEC, bool RESIDUAL, class TY>
__device__ void layer_norm_rows(const float* __restrict__ x, const float* __restrict__ r,
                                const float* __restrict__ w, const float* __restrict__ b,
                                float* __restrict__ s, TY* __restrict__ y,
                                float* __restrict__ mean, float* __restrict__ rstd, int N, int D,
                                float eps, float* scratch) {
  constexpr int K = kPer / VEC;
  const int team = (int)blockDim.x, t = (int)threadIdx.x;
  for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < N;
       base += (int64_t)gridDim.x * blockDim.y) {
    int64_t row = base + threadIdx.y;
    bool valid = row < N;
    size_t off = valid ? (size_t)row * D : 0;
    float v[kPer];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      float* e = v + k * VEC;
      if (valid && col < D) {
        load<VEC>(x + off + col, e);
        if constexpr (RESIDUAL) {
          float q[VEC];
          load<VEC>(r + off + col, q);
#pragma unroll
          for (int u = 0; u < VEC; ++u) e[u] += q[u];
          store<VEC>(s + off + col, e);
        }
      } else {
#pragma unroll
        for (int u = 0; u < VEC; ++u) e[u] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < VEC; ++u) sum += e[u];
    }
    float mu = aicfc::team_sum(sum, scratch) / (float)D;
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      if (valid && col < D) {
#pragma unroll
        for (int u = 0; u < VEC; ++u) {
          float d = v[k * VEC + u] - mu;
          sq += d * d;
        }
      }
    }
    float rs = 1.0f / sqrtf(aicfc::team_sum(sq, scratch) / (float)D + eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      if (valid && col < D) {
        float o[VEC], wv[VEC], bv[VEC];
        if (w) load<VEC>(w + col, wv);
        if (b) load<VEC>(b + col, bv);
#pragma unroll
        for (int u = 0; u < VEC; ++u) {
          float h = (v[k * VEC + u] - mu) * rs;
          if (w) h *= wv[u];
          if (b) h += bv[u];
          o[u] = h;
        }
        store<VEC>(y + off + col, o);
      }
    }
    if (valid && t == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// Writes this block's column sums of acc (one vector per thread of every team) to
// dst[0, D), adding the block's teams in team order.
template <int VEC>
__device__ __forceinline__ void block_column_sums(const float* acc, float* part, float* dst,
                                                  int D) {
  constexpr int K = kPer / VEC;
  const int team = (int)blockDim.x, t = (int)threadIdx.x;
  if (blockDim.y == 1) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      if (col < D) store<VEC>(dst + col, acc + k * VEC);
    }
    return;
  }
  const int cap = team * kPer;  // one team's stretch of `part`
  __syncthreads();              // the previous call's readers are done with part
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int col = (k * team + t) * VEC;
    if (col < D) store<VEC>(part + threadIdx.y * cap + col, acc + k * VEC);
  }
  __syncthreads();
  for (int c = (int)(threadIdx.y * team) + t; c < D; c += team * (int)blockDim.y) {
    float a = 0.0f;
    for (int ty = 0; ty < (int)blockDim.y; ++ty) a += part[ty * cap + c];
    dst[c] = a;
  }
}

template <int VEC>
__device__ void layer_norm_grad_rows(const float* __restrict__ dy, const float* __restrict__ x,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ rstd, const float* __restrict__ w,
                                     const float* __restrict__ dres, float* __restrict__ dx,
                                     float* __restrict__ partials, int N, int D, Shared& sh) {
  float* scratch = sh.scratch;
  constexpr int K = kPer / VEC;
  const int team = (int)blockDim.x, t = (int)threadIdx.x;
  float dw[kPer], db[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) dw[e] = db[e] = 0.0f;
  for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < N;
       base += (int64_t)gridDim.x * blockDim.y) {
    int64_t row = base + threadIdx.y;
    bool valid = row < N;
    size_t off = valid ? (size_t)row * D : 0;
    float mu = valid ? __ldg(mean + row) : 0.0f;
    float rs = valid ? __ldg(rstd + row) : 0.0f;
    float xh[kPer], g[kPer];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      bool in = valid && col < D;
      float d[VEC], xv[VEC], wv[VEC];
      if (in) {
        load<VEC>(dy + off + col, d);
        load<VEC>(x + off + col, xv);
        if (w) load<VEC>(w + col, wv);
      } else {
#pragma unroll
        for (int u = 0; u < VEC; ++u) d[u] = xv[u] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < VEC; ++u) {
        int e = k * VEC + u;
        float h = in ? (xv[u] - mu) * rs : 0.0f;
        float gw = w && in ? d[u] * wv[u] : d[u];
        xh[e] = h;
        g[e] = gw;
        s1 += gw;
        s2 += gw * h;
        dw[e] += d[u] * h;
        db[e] += d[u];
      }
    }
    float mg = aicfc::team_sum(s1, scratch) / (float)D;
    float mgx = aicfc::team_sum(s2, scratch) / (float)D;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int col = (k * team + t) * VEC;
      if (valid && col < D) {
        float o[VEC], q[VEC];
        if (dres) load<VEC>(dres + off + col, q);
#pragma unroll
        for (int u = 0; u < VEC; ++u) {
          int e = k * VEC + u;
          o[u] = rs * (g[e] - mg - xh[e] * mgx);
          // __fadd_rn: never contracted into an fma with the product above, so dx is
          // the f32 kernel's dx plus dres rounded once, as the unfused add
          if (dres) o[u] = __fadd_rn(o[u], q[u]);
        }
        store<VEC>(dx + off + col, o);
      }
    }
  }
  if (partials) {
    block_column_sums<VEC>(dw, sh.part, partials + (size_t)blockIdx.x * D, D);
    block_column_sums<VEC>(db, sh.part, partials + (size_t)(gridDim.x + blockIdx.x) * D, D);
  }
}

// The instance for the buffers' alignment (uniform over the grid).
template <bool RESIDUAL, class TY>
__device__ __forceinline__ void layer_norm(const float* x, const float* r, const float* w,
                                           const float* b, float* s, TY* y, float* mean,
                                           float* rstd, int N, int D, float eps) {
  using aicfc::aligned16;
  __shared__ float scratch[32];
  if (D % 4 == 0 && aligned16(x) && aligned16(r) && aligned16(w) && aligned16(b) &&
      aligned16(s) && aligned16(y))
    layer_norm_rows<4, RESIDUAL, TY>(x, r, w, b, s, y, mean, rstd, N, D, eps, scratch);
  else
    layer_norm_rows<1, RESIDUAL, TY>(x, r, w, b, s, y, mean, rstd, N, D, eps, scratch);
}

}  // namespace

// Grid: ceil(N / blockDim.y) blocks (or fewer: grid-stride); block (team(D), 256 / team).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    aicfc_layer_norm_f32(const float* x, const float* w, const float* b, float* y, float* mean,
                         float* rstd, int32_t N, int32_t D, float eps) {
  layer_norm<false>(x, nullptr, w, b, nullptr, y, mean, rstd, N, D, eps);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    aicfc_add_layer_norm_f32(const float* x, const float* r, const float* w, const float* b,
                             float* s, float* y, float* mean, float* rstd, int32_t N, int32_t D,
                             float eps) {
  layer_norm<true>(x, r, w, b, s, y, mean, rstd, N, D, eps);
}

// y in bf16/f16 (a narrow result); the grid and block of the f32 kernels.
#define AICFC_LAYER_NORM_NARROW(NAME, T)                                                       \
  extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)                                 \
      aicfc_layer_norm_f32_##NAME(const float* x, const float* w, const float* b, T* y,        \
                                  float* mean, float* rstd, int32_t N, int32_t D, float eps) { \
    layer_norm<false>(x, nullptr, w, b, nullptr, y, mean, rstd, N, D, eps);                    \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)                                 \
      aicfc_add_layer_norm_f32_##NAME(const float* x, const float* r, const float* w,          \
                                      const float* b, float* s, T* y, float* mean,             \
                                      float* rstd, int32_t N, int32_t D, float eps) {          \
    layer_norm<true>(x, r, w, b, s, y, mean, rstd, N, D, eps);                                 \
  }
AICFC_LAYER_NORM_NARROW(bf16, aicfc::bf16)
AICFC_LAYER_NORM_NARROW(f16, aicfc::f16)
#undef AICFC_LAYER_NORM_NARROW

// Grid: min(ceil(N / blockDim.y), 2 x multiprocessors); block (team(D), 256 / team).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    aicfc_layer_norm_grad_f32(const float* dy, const float* x, const float* mean,
                              const float* rstd, const float* w, const float* dres, float* dx,
                              float* workspace, int32_t N, int32_t D) {
  using aicfc::aligned16;
  __shared__ Shared sh;
  if (D % 4 == 0 && aligned16(dy) && aligned16(x) && aligned16(w) && aligned16(dres) &&
      aligned16(dx) && aligned16(workspace))
    layer_norm_grad_rows<4>(dy, x, mean, rstd, w, dres, dx, workspace, N, D, sh);
  else
    layer_norm_grad_rows<1>(dy, x, mean, rstd, w, dres, dx, workspace, N, D, sh);
}

extern "C" __global__ void __launch_bounds__(1024)
    aicfc_layer_norm_param_grad_f32(float* dw, float* db, const float* workspace, int32_t blocks,
                                    int32_t D) {
  __shared__ float rows[32][33];
  float* dst = blockIdx.y == 0 ? dw : db;
  if (!dst) return;  // uniform over the block
  const float* src = workspace + (size_t)blockIdx.y * blocks * D;
  int c = (int)(blockIdx.x * 32 + threadIdx.x);
  float a = 0.0f;
  if (c < D) {
#pragma unroll 4
    for (int g = (int)threadIdx.y; g < blocks; g += 32) a += __ldg(src + (size_t)g * D + c);
  }
  rows[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) {
    float t = 0.0f;
#pragma unroll 8
    for (int r = 0; r < 32; ++r) t += rows[r][threadIdx.x];
    dst[c] = t;
  }
}
