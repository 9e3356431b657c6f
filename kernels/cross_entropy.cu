// Softmax cross-entropy with its gradient over many classes (a language model's head:
// V from 65 to 50,257 and more), fused: the loss and dlogits from one read of each row
// for the statistics and one more for the gradient. (loss.cu's kernels target a few
// classes with a warp per row and three passes; these take a team per row.)
//
// aicfc_softmax_cross_entropy_f32_{i32,i64}:
//   loss   = mean_n(lse_n - x_n[y_n]),  lse_n = m_n + log(sum_c exp(x_nc - m_n)),
//   dlogits = (softmax(x_n) - onehot(y_n)) * dloss / N
//   (reference.cross_entropy_with_grad without the column sum; the log-sum-exp form,
//   never log(softmax)). logits [N, V] float32 row-major, labels [N] int32 or int64
//   (graph.cross_entropy's label types), dloss [] float32, loss [] float32.
//   ABI: (logits [N, V], labels [N], dloss [], loss [], dlogits [N, V], workspace,
//         int32 N, int32 V).
//   A label outside [0, V) (only possible for labels already on the device: the sync
//   path checks host labels) makes that row's loss NaN, so the mean is NaN, and its
//   gradient row zero; nothing is read outside the row.
//
// Geometry (rows.cuh): a team of blockDim.x threads per row, team(V) = max(32, next
// power of two >= ceil(V / 32)), at most 1024 (a warp per row up to V = 1024, 1024
// threads for V = 50,257: 50 classes each); block (team, max(1, 256 / team)); grid
// ceil(N / rows per block), one row per team. Pass 1: each thread keeps a running
// (max, sum of exp) over its classes c = t, t + team, ... (four loads in flight), then
// the team combines the pairs (max first, then the rescaled sums, in warp order).
// Pass 2 rereads the row (from L2 for a 200 KB row) and writes dlogits.
// Loss: each block adds its rows' losses in row order into a partial; the last block
// to finish (common.cuh's last_block_done) adds the partials in a fixed order (thread
// i of its 256 takes partials i, i + 256, ...; then warps, then the warps' sums).
// Workspace: uint32 ticket at byte 0 (zeroed at load, reset by the last block), float
// partials from byte 256, one per block. Deterministic: fixed orders throughout, and
// the only atomic is the integer ticket.
#include "common.cuh"
#include "rows.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

using aicfc::neg_inf;

// The running (m, s) of one thread over x[c] for c = t, t + team, ... < V.
__device__ __forceinline__ void row_stats(const float* __restrict__ x, int V, int t, int team,
                                          float& m, float& s) {
  m = neg_inf();
  s = 0.0f;
  for (int c = t; c < V; c += 4 * team) {
    float a[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int cc = c + u * team;
      a[u] = cc < V ? __ldg(x + cc) : neg_inf();
    }
    float mx = fmaxf(fmaxf(m, a[0]), fmaxf(fmaxf(a[1], a[2]), a[3]));
    if (mx == neg_inf()) continue;  // nothing finite yet (exp(-inf - -inf) would be NaN)
    float e = expf(a[0] - mx) + expf(a[1] - mx) + expf(a[2] - mx) + expf(a[3] - mx);
    s = s * expf(m - mx) + e;
    m = mx;
  }
}

template <typename L>
__device__ void softmax_cross_entropy(const float* __restrict__ logits,
                                      const L* __restrict__ labels,
                                      const float* __restrict__ dloss, float* __restrict__ loss,
                                      float* __restrict__ dx, void* workspace, int N, int V) {
  __shared__ float scratch[32];
  __shared__ float rows[32];
  const int team = (int)blockDim.x, t = (int)threadIdx.x;
  int n = (int)(blockIdx.x * blockDim.y + threadIdx.y);
  bool valid = n < N;
  const float* x = logits + (size_t)(valid ? n : 0) * V;
  float m = neg_inf(), s = 0.0f;
  if (valid) row_stats(x, V, t, team, m, s);
  float mx = aicfc::team_max(m, scratch);
  float scaled = m == neg_inf() ? 0.0f : s * expf(m - mx);
  float sum = aicfc::team_sum(scaled, scratch);
  float l = 0.0f;
  if (valid) {
    int y = (int)labels[n];
    bool ok = y >= 0 && y < V;
    l = ok ? logf(sum) - (__ldg(x + (ok ? y : 0)) - mx) : aicfc::quiet_nan();
    float inv = 1.0f / sum, scale = __ldg(dloss) / (float)N;
    float* d = dx + (size_t)n * V;
    for (int c = t; c < V; c += 4 * team) {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        int cc = c + u * team;
        if (cc < V) {
          float g = expf(__ldg(x + cc) - mx) * inv - (cc == y ? 1.0f : 0.0f);
          d[cc] = ok ? g * scale : 0.0f;
        }
      }
    }
  }
  if (t == 0) rows[threadIdx.y] = l;
  __syncthreads();
  uint32_t* counter = reinterpret_cast<uint32_t*>(workspace);
  float* partials = reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + 256);
  if ((threadIdx.x | threadIdx.y) == 0) {
    float p = 0.0f;
    for (int r = 0; r < (int)blockDim.y; ++r) p += rows[r];
    partials[blockIdx.x] = p;
  }
  if (aicfc::last_block_done(counter)) {
    // Thread i of the block adds partials i, i + threads, ... (eight loads in flight),
    // each warp's sums meet in warp_sum's fixed butterfly, and thread 0 adds the warps'
    // sums in warp order.
    const int threads = (int)(blockDim.x * blockDim.y);
    const int lin = (int)(threadIdx.y * blockDim.x) + t;
    float a = 0.0f;
#pragma unroll 8
    for (int b = lin; b < (int)gridDim.x; b += threads) a += __ldcg(partials + b);
    a = aicfc::warp_sum(a);
    if ((lin & 31) == 0) rows[lin >> 5] = a;  // rows[] is free again: its readers synced
    __syncthreads();
    if (lin == 0) {
      float total = 0.0f;
      for (int w = 0; w < threads / 32; ++w) total += rows[w];
      loss[0] = total * (1.0f / (float)N);
    }
  }
}

}  // namespace

// Grid: ceil(N / blockDim.y) blocks; block (team(V), max(1, 256 / team)).
#define AICFC_SOFTMAX_CE(LT, CT)                                                          \
  extern "C" __global__ void __launch_bounds__(1024) aicfc_softmax_cross_entropy_f32_##LT( \
      const float* logits, const CT* labels, const float* dloss, float* loss, float* dlogits, \
      void* workspace, int32_t N, int32_t V) {                                            \
    softmax_cross_entropy<CT>(logits, labels, dloss, loss, dlogits, workspace, N, V);     \
  }

AICFC_SOFTMAX_CE(i32, int32_t)
AICFC_SOFTMAX_CE(i64, int64_t)
