// Scaled-dot-product attention, forward and backward, a warp per row: the general
// kernels for any head dim d <= 128 and any key length S (attention.cu's tiled kernels
// take d in {32, 64, 128} and S = T only). The math and the dropout rule are
// attention.cu's (torch.nn.functional.scaled_dot_product_attention semantics):
//   S_ij = scale q_i . k_j, masked to -inf where causal != 0 and j > i (top-left
//   aligned, as torch.tril); P = softmax_j(S); lse_i = log(sum_j exp(S_ij)) (natural);
//   out_i = sum_j P'_ij v_j with P' = P M / (1 - p), M the keep mask of graph.dropout
//   over the flattened [B, H, T, S] probabilities (flat index ((b H + h) T + i) S + j,
//   philox.cuh's rule with the offset read from device memory and key `seed`).
// Backward (FlashAttention-2's, Dao 2023, Algorithm 2, with P recomputed from lse):
//   Delta_i = dout_i . out_i, dP_ij = M_ij / (1 - p) dout_i . v_j,
//   dS_ij = P_ij (dP_ij - Delta_i), dq_i = scale sum_j dS_ij k_j,
//   dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P'_ij dout_i.
//
// Operands: q, out, dout, dq [BH, T, d]; k, v, dk, dv [BH, S, d]; lse [BH, T]; all
// float32 row-major; offset int64 [] (read only when p > 0).
//
// aicfc_attention_rows_fwd_f32: out, lse. Warp w of block (bh, y) takes query row
//   i = 8 y + w; its lanes take 32 keys at a time (lane l: key j0 + l, the dot product
//   over d from the query row in shared memory), the running max and sum follow the
//   online softmax (Milakov and Gimelshein 2018), and lane l accumulates output
//   columns l, l + 32, l + 64, l + 96 from the chunk's probabilities (broadcast by
//   shuffles, keys in increasing order).
//   ABI: (q, k, v, offset|null, out, lse, int32 BH, int32 T, int32 S, int32 d,
//         float scale, int32 causal, double p, int64 seed).
// aicfc_attention_rows_bwd_dq_f32: Delta (into the workspace) and dq, a warp per query
//   row as in the forward.
//   ABI: (q, k, v, dout, out, lse, offset|null, dq, workspace (Delta [BH T] float32,
//         written whole), int32 BH, int32 T, int32 S, int32 d, float scale,
//         int32 causal, double p, int64 seed).
// aicfc_attention_rows_bwd_dkdv_f32: dk and dv, a warp per key row j (lanes over the
//   queries i that see j), reading Delta from the workspace: launched after the dq
//   kernel on the same stream.
//   ABI: (q, k, v, dout, lse, offset|null, dk, dv, workspace, int32 BH, int32 T,
//         int32 S, int32 d, float scale, int32 causal, double p, int64 seed).
// aicfc_attention_rows_{fwd,bwd_dq,bwd_dkdv}_packed_f32: the same (S = T) on the heads of
//   a packed projection in place (attention_layout.cuh): qkv [N, T, 3D] (q, k, v at
//   columns 0, D, 2D, head h at h d within each, D = H d), out and dout [N, T, D], dqkv
//   [N, T, 3D] laid out as qkv; lse, Delta [N H, T]; BH = N H.
//   ABI: (qkv, offset|null, out, lse, int32 BH, int32 H, int32 T, int32 d, float scale,
//         int32 causal, double p, int64 seed); (qkv, dout, out, lse, offset|null, dqkv,
//         workspace, <the same scalars>); (qkv, dout, lse, offset|null, dqkv, workspace,
//         <the same scalars>).
// Grid: (BH, ceil(rows / 8)) with rows = T (forward, dq) or S (dk, dv); 256 threads.
//
// Every output row is written by one warp, summing in a fixed order, with no atomics:
// deterministic, bit-identical from run to run. fp32 arithmetic.
#include "attention_layout.cuh"
#include "common.cuh"
#include "philox.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kWarps = 8;
constexpr int kMaxD = 128;
constexpr int kCols = kMaxD / 32;  // output columns a lane holds
constexpr unsigned kFull = 0xffffffffu;

// One row of d floats into shared memory (the warp's lanes, coalesced).
__device__ __forceinline__ void load_row(float* dst, const float* __restrict__ src, int d,
                                         int lane) {
  for (int c = lane; c < d; c += 32) dst[c] = __ldg(src + c);
  __syncwarp();
}

__device__ __forceinline__ float dot(const float* __restrict__ row, const float* sh, int d) {
  float s = 0.0f;
  for (int c = 0; c < d; ++c) s = fmaf(__ldg(row + c), sh[c], s);
  return s;
}

struct Keep {
  bool on;
  uint32_t threshold;
  float scale;
  uint64_t offset, seed;
  __device__ __forceinline__ Keep(const int64_t* off, double p, int64_t s)
      : on(p > 0.0),
        threshold(aicfc::dropout_threshold(p)),
        scale(p > 0.0 ? (float)(1.0 / (1.0 - p)) : 1.0f),
        offset(p > 0.0 ? (uint64_t)off[0] : 0),
        seed((uint64_t)s) {}
  // 1 / (1 - p) where flat element `flat` keeps, 0 where it drops (1 without dropout).
  __device__ __forceinline__ float factor(uint64_t flat) const {
    if (!on) return 1.0f;
    uint32_t w[4];
    aicfc::philox_block(flat >> 2, offset, seed, w);
    const int u = (int)(flat & 3);
    const uint32_t word = u == 0 ? w[0] : u == 1 ? w[1] : u == 2 ? w[2] : w[3];
    return (word >> 8) >= threshold ? scale : 0.0f;
  }
};

__device__ __forceinline__ float bcast(float v, int src) { return __shfl_sync(kFull, v, src); }

// The kernels' bodies: the rows of q and dq at ql.at(bh, i), of k, v, dk, dv at
// kl.at(bh, j), of out and dout at ol.at(bh, i) (attention_layout.cuh: plain [BH, T, d]
// and [BH, S, d], or the heads of packed qkv and out).
__device__ __forceinline__ void rows_fwd(const float* q, const float* k, const float* v,
                                         const int64_t* offset, float* out, float* lse, int T,
                                         int S, int d, float scale, int causal, double p,
                                         int64_t seed, const aicfc::Heads& ql,
                                         const aicfc::Heads& kl, const aicfc::Heads& ol) {
  __shared__ float qs[kWarps][kMaxD];
  const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
  const int bh = (int)blockIdx.x, i = (int)blockIdx.y * kWarps + w;
  if (i >= T) return;  // uniform over the warp; no block-wide barrier follows
  const Keep keep(offset, p, seed);
  load_row(qs[w], q + ql.at(bh, i), d, lane);
  const float* kb = k + kl.base(bh);
  const float* vb = v + kl.base(bh);
  const int rs = kl.rs;
  const int end = causal ? min(S, i + 1) : S;
  float m = aicfc::neg_inf(), l = 0.0f, o[kCols] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j0 = 0; j0 < end; j0 += 32) {
    const int j = j0 + lane;
    const float s = j < end ? scale * dot(kb + (size_t)j * rs, qs[w], d) : aicfc::neg_inf();
    const float m_new = fmaxf(m, aicfc::warp_max(s));  // finite: key j0 is unmasked
    const float alpha = expf(m - m_new);
    const float e = j < end ? expf(s - m_new) : 0.0f;
    l = l * alpha + aicfc::warp_sum(e);
    m = m_new;
    const float pe = j < end ? e * keep.factor(((uint64_t)bh * T + i) * S + j) : 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[c] *= alpha;
    const int n = min(32, end - j0);
    for (int t = 0; t < n; ++t) {
      const float pt = bcast(pe, t);
      const float* vr = vb + (size_t)(j0 + t) * rs;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (lane + 32 * c < d) o[c] = fmaf(pt, __ldg(vr + lane + 32 * c), o[c]);
    }
  }
  const float inv = 1.0f / l;
  float* orow = out + ol.at(bh, i);
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (lane + 32 * c < d) orow[lane + 32 * c] = o[c] * inv;
  if (lane == 0) lse[(size_t)bh * T + i] = m + logf(l);
}

__device__ __forceinline__ void rows_bwd_dq(const float* q, const float* k, const float* v,
                                            const float* dout, const float* out,
                                            const float* lse, const int64_t* offset, float* dq,
                                            float* workspace, int T, int S, int d, float scale,
                                            int causal, double p, int64_t seed,
                                            const aicfc::Heads& ql, const aicfc::Heads& kl,
                                            const aicfc::Heads& ol) {
  __shared__ float qs[kWarps][kMaxD];
  __shared__ float gs[kWarps][kMaxD];
  const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
  const int bh = (int)blockIdx.x, i = (int)blockIdx.y * kWarps + w;
  if (i >= T) return;
  const Keep keep(offset, p, seed);
  const size_t row = (size_t)bh * T + i;
  const float* orow = out + ol.at(bh, i);
  load_row(qs[w], q + ql.at(bh, i), d, lane);
  load_row(gs[w], dout + ol.at(bh, i), d, lane);
  float delta = 0.0f;
  for (int c = lane; c < d; c += 32) delta = fmaf(gs[w][c], __ldg(orow + c), delta);
  delta = aicfc::warp_sum(delta);
  if (lane == 0) workspace[row] = delta;
  const float li = __ldg(lse + row);
  const float* kb = k + kl.base(bh);
  const float* vb = v + kl.base(bh);
  const int rs = kl.rs;
  const int end = causal ? min(S, i + 1) : S;
  float acc[kCols] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j0 = 0; j0 < end; j0 += 32) {
    const int j = j0 + lane;
    float ds = 0.0f;
    if (j < end) {
      const float P = expf(scale * dot(kb + (size_t)j * rs, qs[w], d) - li);
      const float dP = keep.factor(row * S + j) * dot(vb + (size_t)j * rs, gs[w], d);
      ds = P * (dP - delta);
    }
    const int n = min(32, end - j0);
    for (int t = 0; t < n; ++t) {
      const float dt = bcast(ds, t);
      const float* kr = kb + (size_t)(j0 + t) * rs;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (lane + 32 * c < d) acc[c] = fmaf(dt, __ldg(kr + lane + 32 * c), acc[c]);
    }
  }
  float* drow = dq + ql.at(bh, i);
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (lane + 32 * c < d) drow[lane + 32 * c] = acc[c] * scale;
}

__device__ __forceinline__ void rows_bwd_dkdv(const float* q, const float* k, const float* v,
                                              const float* dout, const float* lse,
                                              const int64_t* offset, float* dk, float* dv,
                                              const float* workspace, int T, int S, int d,
                                              float scale, int causal, double p, int64_t seed,
                                              const aicfc::Heads& ql, const aicfc::Heads& kl,
                                            const aicfc::Heads& ol) {
  __shared__ float ks[kWarps][kMaxD];
  __shared__ float vs[kWarps][kMaxD];
  const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
  const int bh = (int)blockIdx.x, j = (int)blockIdx.y * kWarps + w;
  if (j >= S) return;
  const Keep keep(offset, p, seed);
  const size_t krow = kl.at(bh, j);
  load_row(ks[w], k + krow, d, lane);
  load_row(vs[w], v + krow, d, lane);
  const float* qb = q + ql.base(bh);
  const float* gb = dout + ol.base(bh);
  const int rs = ql.rs, ors = ol.rs;
  const int begin = causal ? j : 0;  // the queries i >= j see key j
  float dka[kCols] = {0.0f, 0.0f, 0.0f, 0.0f}, dva[kCols] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i0 = begin; i0 < T; i0 += 32) {
    const int i = i0 + lane;
    float ds = 0.0f, pk = 0.0f;
    if (i < T) {
      const size_t row = (size_t)bh * T + i;
      const float P = expf(scale * dot(qb + (size_t)i * rs, ks[w], d) - __ldg(lse + row));
      const float f = keep.factor(row * S + j);
      const float dP = f * dot(gb + (size_t)i * ors, vs[w], d);
      ds = P * (dP - __ldg(workspace + row));
      pk = P * f;
    }
    const int n = min(32, T - i0);
    for (int t = 0; t < n; ++t) {
      const float dt = bcast(ds, t), pt = bcast(pk, t);
      const float* qr = qb + (size_t)(i0 + t) * rs;
      const float* gr = gb + (size_t)(i0 + t) * ors;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        if (lane + 32 * c < d) {
          dka[c] = fmaf(dt, __ldg(qr + lane + 32 * c), dka[c]);
          dva[c] = fmaf(pt, __ldg(gr + lane + 32 * c), dva[c]);
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    if (lane + 32 * c < d) {
      dk[krow + lane + 32 * c] = dka[c] * scale;
      dv[krow + lane + 32 * c] = dva[c];
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_fwd_f32(const float* q, const float* k, const float* v,
                                 const int64_t* offset, float* out, float* lse, int32_t BH,
                                 int32_t T, int32_t S, int32_t d, float scale, int32_t causal,
                                 double p, int64_t seed) {
  rows_fwd(q, k, v, offset, out, lse, T, S, d, scale, causal, p, seed,
           aicfc::Heads::plain(T, d), aicfc::Heads::plain(S, d),
           aicfc::Heads::plain(T, d));
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_bwd_dq_f32(const float* q, const float* k, const float* v,
                                    const float* dout, const float* out, const float* lse,
                                    const int64_t* offset, float* dq, float* workspace,
                                    int32_t BH, int32_t T, int32_t S, int32_t d, float scale,
                                    int32_t causal, double p, int64_t seed) {
  rows_bwd_dq(q, k, v, dout, out, lse, offset, dq, workspace, T, S, d, scale, causal, p, seed,
              aicfc::Heads::plain(T, d), aicfc::Heads::plain(S, d), aicfc::Heads::plain(T, d));
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_bwd_dkdv_f32(const float* q, const float* k, const float* v,
                                      const float* dout, const float* lse,
                                      const int64_t* offset, float* dk, float* dv,
                                      const float* workspace, int32_t BH, int32_t T, int32_t S,
                                      int32_t d, float scale, int32_t causal, double p,
                                      int64_t seed) {
  rows_bwd_dkdv(q, k, v, dout, lse, offset, dk, dv, workspace, T, S, d, scale, causal, p, seed,
                aicfc::Heads::plain(T, d), aicfc::Heads::plain(S, d), aicfc::Heads::plain(T, d));
}

// The packed entries (S = T, D = H d): qkv [N, T, 3D] with q, k, v at columns 0, D, 2D,
// out and dout [N, T, D], dqkv laid out as qkv.
#define AICFC_PACKED_HEADS(H, T, d)                                         \
  const int E = (H) * (d);                                                  \
  const aicfc::Heads in = aicfc::Heads::packed((H), (T), (d), 3 * E);       \
  const aicfc::Heads og = aicfc::Heads::packed((H), (T), (d), E)

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_fwd_packed_f32(const float* qkv, const int64_t* offset, float* out,
                                        float* lse, int32_t BH, int32_t H, int32_t T,
                                        int32_t d, float scale, int32_t causal, double p,
                                        int64_t seed) {
  AICFC_PACKED_HEADS(H, T, d);
  rows_fwd(qkv, qkv + E, qkv + 2 * E, offset, out, lse, T, T, d, scale, causal, p, seed, in,
           in, og);
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_bwd_dq_packed_f32(const float* qkv, const float* dout, const float* out,
                                           const float* lse, const int64_t* offset, float* dqkv,
                                           float* workspace, int32_t BH, int32_t H, int32_t T,
                                           int32_t d, float scale, int32_t causal, double p,
                                           int64_t seed) {
  AICFC_PACKED_HEADS(H, T, d);
  rows_bwd_dq(qkv, qkv + E, qkv + 2 * E, dout, out, lse, offset, dqkv, workspace, T, T, d,
              scale, causal, p, seed, in, in, og);
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_rows_bwd_dkdv_packed_f32(const float* qkv, const float* dout,
                                             const float* lse, const int64_t* offset,
                                             float* dqkv, const float* workspace, int32_t BH,
                                             int32_t H, int32_t T, int32_t d, float scale,
                                             int32_t causal, double p, int64_t seed) {
  AICFC_PACKED_HEADS(H, T, d);
  rows_bwd_dkdv(qkv, qkv + E, qkv + 2 * E, dout, lse, offset, dqkv + E, dqkv + 2 * E, workspace,
                T, T, d, scale, causal, p, seed, in, in, og);
}
