// Packed-qkv attention on tensor cores: bf16 / f16 storage, float32 softmax statistics and
// accumulation, the products on mma.sync m16n8k16 (kernels/mma.cuh). The math, the packed
// layout (attention_layout.cuh), the tiles of 64 queries x 64 keys, the grid and the
// deterministic backward decomposition are attention.cu's (its header); what differs:
//
//   - storage: qkv [N, T, 3D], out, dout [N, T, D], dqkv [N, T, 3D] in bf16 (or f16);
//     lse, D [N H, T] float32 (lse in natural log, as the f32 kernels', so the backward
//     contract is the same); the outputs are rounded once, to nearest even;
//   - work split: 4 warps, each owning 16 rows of the block's 64-row tile (FlashAttention-2's
//     layout). A warp's 16 x 64 score tile lives in registers as the C fragments of eight
//     m16n8 products; the probabilities (and dS) are re-packed in registers to bf16 A
//     fragments for the next product (the C fragment of two adjacent m16n8 tiles is the A
//     fragment of one m16n8k16: FlashAttention's convert_layout_acc_Aregs), so P, like the
//     operands, is rounded to bf16 before P V (as FlashAttention rounds it);
//   - shared memory: [64][d + 8] 16-bit tiles (rows padded by 16 bytes, so the 8 rows an
//     ldmatrix phase reads fall in 8 distinct bank groups); K and Q as B fragments of
//     A B^T through ldmatrix, V, dout, Q and K as B fragments of P V through
//     ldmatrix.trans;
//   - no dropout: the registry rows take dropout_p = 0 only, p > 0 runs attention.cu's
//     float32 kernels (the ABI keeps offset, p and seed, unread, so one launcher serves
//     both).
//
// aicfc_attention_fwd_packed_{bf16,f16}_d{32,64,128}: out and lse.
//   ABI: (qkv, offset|null, out, lse, int32 BH, int32 H, int32 T, float scale,
//         int32 causal, double p, int64 seed).
//   Grid: (BH, ceil(T / 64)), 128 threads; dynamic shared memory 3 x 64 (d + 8) x 2 bytes.
// aicfc_attention_bwd_delta_packed_{bf16,f16}: D = rowsum(dout o out) in float32.
//   ABI: (out, dout, workspace (D [N H T] float32, written whole), int32 rows (N H T),
//         int32 d, int32 H, int32 T). Grid: ceil(rows / (256 / (d / 8))) blocks of 256.
// aicfc_attention_bwd_packed_{bf16,f16}_d{32,64,128}: dqkv (dq, dk, dv at columns 0, D, 2D).
//   ABI: (qkv, dout, lse, offset|null, dqkv, workspace (D), int32 BH, int32 H, int32 T,
//         float scale, int32 causal, double p, int64 seed).
//   Grid: (BH, ceil(T / 64)), 128 threads; dynamic shared memory 4 x 64 (d + 8) x 2 + 512
//   bytes. Block (bh, t): dk, dv of key tile t (warps own 16 keys each), then dq of query
//   tile t (warps own 16 queries each): each output written by one block, no atomics.
#include "attention_layout.cuh"
#include "common.cuh"
#include "lowp.cuh"
#include "mma.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kTile = 64;
constexpr int kThreads = 128;  // 4 warps x 16 rows
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFull = 0xffffffffu;

// The product and the packing of one storage type.
template <class ST>
struct Mma;
template <>
struct Mma<aicfc::bf16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    aicfc::mma_m16n8k16_bf16(c, a, b);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return aicfc::pack_bf16x2(lo, hi);
  }
};
template <>
struct Mma<aicfc::f16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    aicfc::mma_m16n8k16_f16(c, a, b);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return aicfc::pack_f16x2(lo, hi);
  }
};

// Rows [r0, r0 + 64) of a [T, D] matrix of 16-bit values (rows rs apart) into a [64][D + 8]
// tile, 16 bytes a thread at a time; rows from T on are zero.
template <int D>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* __restrict__ g, int r0,
                                          int T, int rs) {
  constexpr int CH = D / 8, LD = D + 8;
#pragma unroll
  for (int k = 0; k < kTile * CH / kThreads; ++k) {
    const int i = (int)threadIdx.x + k * kThreads;
    const int row = i / CH, ch = i % CH;
    uint4 v = {0u, 0u, 0u, 0u};
    if (r0 + row < T) v = *(reinterpret_cast<const uint4*>(g + (size_t)(r0 + row) * rs) + ch);
    *reinterpret_cast<uint4*>(tile + row * LD + ch * 8) = v;
  }
}

// Entries [r0, r0 + 64) of a [T] vector; from T on they are zero.
__device__ __forceinline__ void load_vec(float* s, const float* __restrict__ g, int r0, int T) {
  const int i = (int)threadIdx.x;
  if (i < kTile) s[i] = r0 + i < T ? g[r0 + i] : 0.0f;
}

// The A fragments (16 x 16 each, mma.cuh's layout) of rows row0 .. row0 + 15 of a tile:
// matrix i = lane / 8 of ldmatrix_x4 is rows + 8 (i % 2), columns + 8 (i / 2).
template <int D>
__device__ __forceinline__ void load_a(uint32_t (&a)[D / 16][4], const uint16_t* tile, int row0,
                                       int lane) {
  constexpr int LD = D + 8;
  const uint16_t* p = tile + (row0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) aicfc::ldmatrix_x4(a[kc], p + kc * 16);
}

// acc[nb] = the C fragment of columns 8 nb .. 8 nb + 7 of A B^T, A the warp's 16 rows (A
// fragments), B a [64][D] tile: B's rows are the "col" B operand as stored, so ldmatrix
// (not transposed) matrix i gives rows 8 (nb + i / 2) .., columns 16 kc + 8 (i % 2).
template <class ST, int D>
__device__ __forceinline__ void mma_abt(float (&acc)[8][4], const uint32_t (&a)[D / 16][4],
                                        const uint16_t* B, int lane) {
  constexpr int LD = D + 8;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[nb][c] = 0.0f;
  const uint16_t* p = B + ((lane >> 4) * 8 + (lane & 7)) * LD + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int nb = 0; nb < 8; nb += 2)
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t r[4];
      aicfc::ldmatrix_x4(r, p + nb * 8 * LD + kc * 16);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      Mma<ST>::run(acc[nb], a[kc], b0);
      Mma<ST>::run(acc[nb + 1], a[kc], b1);
    }
}

// o += P V: P the warp's 16 x 64 tile as C fragments (rounded here to the storage type as
// A fragments: keys 16 kk .. 16 kk + 15 are the C tiles 2 kk and 2 kk + 1), V a [64][D]
// tile (row = key): ldmatrix.trans matrix i gives keys 16 kk + 8 (i % 2) .., columns
// 8 (nb + i / 2) .., the B fragments of columns nb and nb + 1.
template <class ST, int D>
__device__ __forceinline__ void mma_pv(float (&o)[D / 8][4], const float (&p)[8][4],
                                       const uint16_t* V, int lane) {
  constexpr int LD = D + 8;
  const uint16_t* base = V + (((lane >> 3) & 1) * 8 + (lane & 7)) * LD + (lane >> 4) * 8;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t a[4] = {
        Mma<ST>::pack(p[2 * kk][0], p[2 * kk][1]), Mma<ST>::pack(p[2 * kk][2], p[2 * kk][3]),
        Mma<ST>::pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
        Mma<ST>::pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int nb = 0; nb < D / 8; nb += 2) {
      uint32_t r[4];
      aicfc::ldmatrix_x4_trans(r, base + kk * 16 * LD + nb * 8);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      Mma<ST>::run(o[nb], a, b0);
      Mma<ST>::run(o[nb + 1], a, b1);
    }
  }
}

// Rows row0 and row0 + 8 (those below T) of a [T, D] matrix at g (rows rs apart) = the
// C fragments acc times mul, rounded to the storage type: a 32-bit pair per store.
template <class ST, int D>
__device__ __forceinline__ void store_rows(ST* g, int row0, int T, const float (&acc)[D / 8][4],
                                           float mul0, float mul8, int rs, int tq) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (row >= T) continue;
    const float mul = h ? mul8 : mul0;
    uint32_t* dst = reinterpret_cast<uint32_t*>(g + (size_t)row * rs + 2 * tq);
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
      dst[nb * 4] = Mma<ST>::pack(acc[nb][2 * h] * mul, acc[nb][2 * h + 1] * mul);
  }
}

template <class ST, int D>
__device__ void attention_fwd(const ST* q, const ST* k, const ST* v, ST* __restrict__ out,
                              float* __restrict__ lse, int T, float scale, int causal,
                              const aicfc::Heads& in, const aicfc::Heads& og) {
  constexpr int LD = D + 8;
  AICFC_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* Qs = smem;
  uint16_t* Ks = Qs + kTile * LD;
  uint16_t* Vs = Ks + kTile * LD;
  const int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5, tq = lane & 3;
  const int bh = (int)blockIdx.x;
  const int q0 = ((int)gridDim.y - 1 - (int)blockIdx.y) * kTile;
  const size_t base = in.base(bh);
  const uint16_t* qg = reinterpret_cast<const uint16_t*>(q) + base;
  const uint16_t* kg = reinterpret_cast<const uint16_t*>(k) + base;
  const uint16_t* vg = reinterpret_cast<const uint16_t*>(v) + base;
  const float sl2 = scale * kLog2e;
  load_tile<D>(Qs, qg, q0, T, in.rs);
  __syncthreads();
  uint32_t qf[D / 16][4];
  load_a<D>(qf, Qs, 16 * w, lane);
  const int i0 = q0 + 16 * w + (lane >> 2);  // the thread's rows: i0 and i0 + 8
  float m[2] = {aicfc::neg_inf(), aicfc::neg_inf()}, l[2] = {0.0f, 0.0f}, o[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nb][c] = 0.0f;
  const int kv_end = causal ? min(T, q0 + kTile) : T;
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile's readers of Ks, Vs are done
    load_tile<D>(Ks, kg, k0, T, in.rs);
    load_tile<D>(Vs, vg, k0, T, in.rs);
    __syncthreads();
    float s[8][4];
    mma_abt<ST, D>(s, qf, Ks, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = i0 + 8 * h;
      float mx = aicfc::neg_inf();
#pragma unroll
      for (int nb = 0; nb < 8; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = k0 + nb * 8 + 2 * tq + e;
          const bool ok = j < T && (!causal || j <= i);
          float& x = s[nb][2 * h + e];
          x = ok ? x * sl2 : aicfc::neg_inf();  // base-2 scores
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));  // the row's 4 threads (lanes 4 g + t)
      mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
      const float m_new = fmaxf(m[h], mx);
      const float m_use = m_new == aicfc::neg_inf() ? 0.0f : m_new;  // a row with nothing yet
      const float alpha = exp2f(m[h] - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < 8; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[nb][2 * h + e];
          x = exp2f(x - m_use);
          sum += x;
        }
      l[h] = l[h] * alpha + sum;  // this thread's columns; the row's threads add up at the end
      m[h] = m_new;
#pragma unroll
      for (int nb = 0; nb < D / 8; ++nb) {
        o[nb][2 * h] *= alpha;
        o[nb][2 * h + 1] *= alpha;
      }
    }
    mma_pv<ST, D>(o, s, Vs, lane);
  }
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float lt = l[h];
    lt += __shfl_xor_sync(kFull, lt, 1);
    lt += __shfl_xor_sync(kFull, lt, 2);
    inv[h] = 1.0f / lt;
    const int i = i0 + 8 * h;
    if (i < T && tq == 0) lse[(size_t)bh * T + i] = (m[h] + log2f(lt)) * kLn2;
  }
  store_rows<ST, D>(out + og.base(bh), i0, T, o, inv[0], inv[1], og.rs, tq);
}

template <class ST, int D>
__device__ void attention_bwd(const ST* q, const ST* k, const ST* v, const ST* dout,
                              const float* __restrict__ lse, ST* dq, ST* dk, ST* dv,
                              const float* __restrict__ delta, int T, float scale, int causal,
                              const aicfc::Heads& in, const aicfc::Heads& og) {
  constexpr int LD = D + 8;
  AICFC_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* Ks = smem;
  uint16_t* Vs = Ks + kTile * LD;
  uint16_t* Qs = Vs + kTile * LD;
  uint16_t* dOs = Qs + kTile * LD;
  float* lse_s = reinterpret_cast<float*>(dOs + kTile * LD);
  float* dl_s = lse_s + kTile;
  const int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5, tq = lane & 3;
  const int bh = (int)blockIdx.x, t = (int)blockIdx.y, nt = (int)gridDim.y;
  const size_t base = in.base(bh);
  const uint16_t* qg = reinterpret_cast<const uint16_t*>(q) + base;
  const uint16_t* kg = reinterpret_cast<const uint16_t*>(k) + base;
  const uint16_t* vg = reinterpret_cast<const uint16_t*>(v) + base;
  const uint16_t* dog = reinterpret_cast<const uint16_t*>(dout) + og.base(bh);
  const float* lse_bh = lse + (size_t)bh * T;
  const float* dl_bh = delta + (size_t)bh * T;
  const float sl2 = scale * kLog2e;
  uint32_t af[D / 16][4];

  // Phase 1: dk, dv of key tile t; the warp's keys j0 + g and j0 + g + 8, over the query
  // tiles. S^T = K Q^T and (dout V^T)^T = V dout^T have the queries as columns.
  const int k0 = t * kTile, j0 = k0 + 16 * w + (lane >> 2);
  load_tile<D>(Ks, kg, k0, T, in.rs);
  load_tile<D>(Vs, vg, k0, T, in.rs);
  float dka[D / 8][4], dva[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) dka[nb][c] = dva[nb][c] = 0.0f;
  for (int qt = causal ? t : 0; qt < nt; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();  // the previous tile's readers of Qs, dOs, lse_s, dl_s are done
    load_tile<D>(Qs, qg, q0, T, in.rs);
    load_tile<D>(dOs, dog, q0, T, og.rs);
    load_vec(lse_s, lse_bh, q0, T);
    load_vec(dl_s, dl_bh, q0, T);
    __syncthreads();
    float st[8][4], dpt[8][4];
    load_a<D>(af, Ks, 16 * w, lane);
    mma_abt<ST, D>(st, af, Qs, lane);
    load_a<D>(af, Vs, 16 * w, lane);
    mma_abt<ST, D>(dpt, af, dOs, lane);
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ci = nb * 8 + 2 * tq + e, i = q0 + ci;
        const float lse2 = lse_s[ci] * kLog2e, dl = dl_s[ci];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = j0 + 8 * h, c = 2 * h + e;
          const bool ok = i < T && j < T && (!causal || j <= i);
          const float P = ok ? exp2f(st[nb][c] * sl2 - lse2) : 0.0f;
          st[nb][c] = P;                       // P^T for dv
          dpt[nb][c] = P * (dpt[nb][c] - dl);  // dS^T for dk
        }
      }
    mma_pv<ST, D>(dva, st, dOs, lane);
    mma_pv<ST, D>(dka, dpt, Qs, lane);
  }
  store_rows<ST, D>(dv + base, j0, T, dva, 1.0f, 1.0f, in.rs, tq);
  store_rows<ST, D>(dk + base, j0, T, dka, scale, scale, in.rs, tq);

  // Phase 2: dq of query tile t; the warp's queries i0 + g and i0 + g + 8, over the key
  // tiles: S = Q K^T, dP = dout V^T, dS = P o (dP - D), dq = scale dS K.
  const int q0 = t * kTile, i0 = q0 + 16 * w + (lane >> 2);
  __syncthreads();  // phase 1's readers of Qs and dOs are done
  load_tile<D>(Qs, qg, q0, T, in.rs);
  load_tile<D>(dOs, dog, q0, T, og.rs);
  float lse2[2], dl[2], dqa[D / 8][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = i0 + 8 * h;
    lse2[h] = i < T ? lse_bh[i] * kLog2e : 0.0f;
    dl[h] = i < T ? dl_bh[i] : 0.0f;
  }
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) dqa[nb][c] = 0.0f;
  const int kv_end = causal ? min(T, q0 + kTile) : T;
  for (int kk0 = 0; kk0 < kv_end; kk0 += kTile) {
    __syncthreads();  // Qs, dOs are in; the previous tile's readers of Ks, Vs are done
    load_tile<D>(Ks, kg, kk0, T, in.rs);
    load_tile<D>(Vs, vg, kk0, T, in.rs);
    __syncthreads();
    float s[8][4], dp[8][4];
    load_a<D>(af, Qs, 16 * w, lane);
    mma_abt<ST, D>(s, af, Ks, lane);
    load_a<D>(af, dOs, 16 * w, lane);
    mma_abt<ST, D>(dp, af, Vs, lane);
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = kk0 + nb * 8 + 2 * tq + e;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = i0 + 8 * h, c = 2 * h + e;
          const bool ok = i < T && j < T && (!causal || j <= i);
          const float P = ok ? exp2f(s[nb][c] * sl2 - lse2[h]) : 0.0f;
          s[nb][c] = P * (dp[nb][c] - dl[h]);  // dS
        }
      }
    mma_pv<ST, D>(dqa, s, Ks, lane);
  }
  store_rows<ST, D>(dq + base, i0, T, dqa, scale, scale, in.rs, tq);
}

// D of row bh T + i, whose d values lie at `og.at(bh, i)` of out and dout; d / 8 lanes a
// row, 8 values each.
template <class ST>
__device__ __forceinline__ void attention_delta(const ST* out, const ST* dout, float* workspace,
                                                int rows, int d, int T, const aicfc::Heads& og) {
  const int lanes = d / 8;  // 4, 8 or 16: within one warp
  const int row = (int)(blockIdx.x * (blockDim.x / lanes) + threadIdx.x / lanes);
  const int c = (int)(threadIdx.x % lanes) * 8;
  float s = 0.0f;
  if (row < rows) {
    const size_t at = og.at(row / T, row % T) + c;
#pragma unroll
    for (int e = 0; e < 8; ++e) s += aicfc::load(out[at + e]) * aicfc::load(dout[at + e]);
  }
  for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_xor_sync(kFull, s, off);
  if (row < rows && threadIdx.x % lanes == 0) workspace[row] = s;
}

}  // namespace

// FWD_BLOCKS, BWD_BLOCKS: the minimum blocks a multiprocessor in __launch_bounds__.
#define AICFC_ATTENTION_MMA(NAME, ST, D, FWD_BLOCKS, BWD_BLOCKS)                                \
  extern "C" __global__ void __launch_bounds__(kThreads, FWD_BLOCKS)                            \
      aicfc_attention_fwd_packed_##NAME##_d##D(const ST* qkv, const int64_t* offset, ST* out,   \
                                               float* lse, int32_t BH, int32_t H, int32_t T,    \
                                               float scale, int32_t causal, double p,           \
                                               int64_t seed) {                                  \
    const int E = H * D;                                                                        \
    attention_fwd<ST, D>(qkv, qkv + E, qkv + 2 * E, out, lse, T, scale, causal,                 \
                         aicfc::Heads::packed(H, T, D, 3 * E), aicfc::Heads::packed(H, T, D, E)); \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(kThreads, BWD_BLOCKS)                            \
      aicfc_attention_bwd_packed_##NAME##_d##D(                                                 \
      const ST* qkv, const ST* dout, const float* lse, const int64_t* offset, ST* dqkv,         \
      const float* workspace, int32_t BH, int32_t H, int32_t T, float scale, int32_t causal,    \
      double p, int64_t seed) {                                                                 \
    const int E = H * D;                                                                        \
    attention_bwd<ST, D>(qkv, qkv + E, qkv + 2 * E, dout, lse, dqkv, dqkv + E, dqkv + 2 * E,    \
                         workspace, T, scale, causal, aicfc::Heads::packed(H, T, D, 3 * E),     \
                         aicfc::Heads::packed(H, T, D, E));                                     \
  }

#define AICFC_ATTENTION_MMA_DTYPE(NAME, ST)                                                    \
  AICFC_ATTENTION_MMA(NAME, ST, 32, 4, 3)                                                      \
  AICFC_ATTENTION_MMA(NAME, ST, 64, 3, 2)                                                      \
  AICFC_ATTENTION_MMA(NAME, ST, 128, 2, 1)                                                     \
  extern "C" __global__ void __launch_bounds__(256) aicfc_attention_bwd_delta_packed_##NAME(   \
      const ST* out, const ST* dout, float* workspace, int32_t rows, int32_t d, int32_t H,     \
      int32_t T) {                                                                             \
    attention_delta<ST>(out, dout, workspace, rows, d, T, aicfc::Heads::packed(H, T, d, H * d)); \
  }

AICFC_ATTENTION_MMA_DTYPE(bf16, aicfc::bf16)
AICFC_ATTENTION_MMA_DTYPE(f16, aicfc::f16)
