// Fused scaled-dot-product attention, forward and backward, in the style of
// FlashAttention-2 (Dao 2023, "FlashAttention-2: faster attention with better
// parallelism and work partitioning", Algorithms 1 and 2): tiles of queries against
// streamed tiles of keys and values, an online softmax (running max and sum), the
// row log-sum-exp saved for the backward, which recomputes the probabilities tile by
// tile; no [T, T] buffer exists anywhere.
//
// Operands: q, k, v, out, dout, dq, dk, dv [B, H, T, d] float32 row-major (16-byte
// aligned: CuPy allocations and arena slots are); lse, delta [B, H, T] float32; BH =
// B x H. Scores S = scale q k^T with the causal mask (j > i is -inf) when causal != 0;
// P = softmax(S) along the last axis; lse = log(sum_j exp(S_ij)) (natural log);
// out = P' v with P' = dropout(P) when p > 0: element (b, h, i, j) of the flattened
// [B, H, T, T] probabilities has flat index ((b H + h) T + i) T + j and keeps by
// philox.cuh's rule for that index (counter flat / 4, word flat % 4, the offset read
// from device memory, key `seed`), kept ones scaled by 1 / (1 - p): the mask of
// graph.dropout applied to softmax(S) with the same seed and offset.
// Backward (with D_i = sum_c dout_ic out_ic = rowsum(dP' o P'), which holds with
// dropout since out = P' v):
//   dv = P'^T dout,  dP = (dout v^T) o M / (1 - p),  dS = P o (dP - D),
//   dq = scale dS k,  dk = scale dS^T q.
//
// aicfc_attention_fwd_f32_d{32,64,128}: out and lse.
//   ABI: (q, k, v, offset int64 []|null, out, lse, int32 BH, int32 T, float scale,
//         int32 causal, double p, int64 seed). offset is read only when p > 0.
//   Grid: (BH, ceil(T / 64)): block y takes query tile ceil(T / 64) - 1 - y, so the
//   longest causal rows start first; 128 threads. Dynamic shared memory: 4 (3 x 64 d +
//   64 x 64) bytes (40, 64, 112 KB for d = 32, 64, 128; set the function's
//   MaxDynamicSharedMemorySize above 48 KB). Each output row is written by one block
//   in a fixed order: deterministic.
// aicfc_attention_bwd_delta_f32: D = rowsum(dout o out), the backward's pre-pass.
//   ABI: (out, dout, workspace (D [BH T] float32, written whole: no zeroing needed),
//         int32 rows (BH T), int32 d).
//   Grid: ceil(rows / (256 / (d / 4))) blocks of 256 threads; d / 4 lanes a row, d in
//   {32, 64, 128}.
// aicfc_attention_bwd_f32_d{32,64,128}: dq, dk, dv. Block (bh, t) computes dk and dv of
//   key tile t (looping over the query tiles that see it) and then dq of query tile t
//   (looping over the key tiles it sees), so each output is written by one block, in a
//   fixed order, with no atomics: deterministic, bit-identical from run to run, at
//   the price of computing S and dout v^T twice (7 tile products instead of
//   FlashAttention-2's 5 with atomic dq). Causal work per block is the same for every
//   t (ceil(T / 64) + 1 tile pairs).
//   ABI: (q, k, v, dout, lse, offset|null, dq, dk, dv, workspace (D from the pre-pass),
//         int32 BH, int32 T, float scale, int32 causal, double p, int64 seed).
//   Grid: (BH, ceil(T / 64)); 128 threads (d = 32, 64) or 256 (d = 128). Dynamic shared
//   memory: 4 (4 x 64 d + 2 x 64 x 64 + 128) bytes (65, 97, 161 KB).
// aicfc_attention_{fwd,bwd}_packed_f32_d{32,64,128}: the same on the heads of a packed
//   projection, read and written in place (attention_layout.cuh): qkv [N, T, 3D] with q,
//   k, v at columns 0, D, 2D and head h at h d within each (D = H d); out, dout [N, T, D];
//   dqkv [N, T, 3D] laid out as qkv; lse, D [N H, T] as above (BH = N H).
//   ABI: (qkv, offset|null, out, lse, int32 BH, int32 H, int32 T, float scale,
//         int32 causal, double p, int64 seed) and (qkv, dout, lse, offset|null, dqkv,
//         workspace, int32 BH, int32 H, int32 T, float scale, int32 causal, double p,
//         int64 seed); grid, threads and shared memory as the plain kernels'.
// aicfc_attention_bwd_delta_packed_f32: the pre-pass over out, dout [N, T, H d].
//   ABI: (out, dout, workspace, int32 rows (N H T), int32 d, int32 H, int32 T).
//
// Tiles: 64 queries x 64 keys. A thread holds a 4 x (64 / TX) block of a score tile
// (rows 4 ty + r, columns in groups of 4 consecutive ones, 4 TX apart, so one Philox
// call covers 4 of its elements) and 4 x (d / TX) of an output tile; TX = 8 threads share
// a row (16 for the backward at d = 128). Every [64][W] tile in shared memory has its
// 16-byte chunks XOR-swizzled by (row / 4) % 8, so the 8 lanes of a quarter-warp that
// read one chunk of 8 rows 4 apart, or 8 chunks of one row, hit 8 bank groups: the
// inner products read shared memory without bank conflicts. fp32 arithmetic (FFMA); a
// TF32 tensor-core variant (mma.sync m16n8k8) is the follow-up.
#include "attention_layout.cuh"
#include "common.cuh"
#include "philox.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kTile = 64;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float4 ld4(const float* s) {
  return *reinterpret_cast<const float4*>(s);
}
__device__ __forceinline__ void st4(float* s, float4 v) { *reinterpret_cast<float4*>(s) = v; }

// Offset of chunk `chunk` (4 floats) of row `row` in a swizzled tile of W floats a row.
template <int W>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * W + ((chunk ^ ((row >> 2) & 7)) << 2);
}

// Rows [r0, r0 + 64) of a [T, D] matrix (rows rs floats apart) into a swizzled tile; rows
// from T on are zero.
template <int D, int NT>
__device__ __forceinline__ void load_tile(float* tile, const float* __restrict__ g, int r0,
                                          int T, int rs) {
  constexpr int CH = D / 4;
#pragma unroll
  for (int k = 0; k < kTile * CH / NT; ++k) {
    int i = (int)threadIdx.x + k * NT;
    int row = i / CH, ch = i % CH;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r0 + row < T) v = __ldg(reinterpret_cast<const float4*>(g + (size_t)(r0 + row) * rs) + ch);
    st4(tile + swz<D>(row, ch), v);
  }
}

// Entries [r0, r0 + 64) of a [T] vector; from T on they are zero.
__device__ __forceinline__ void load_vec(float* s, const float* __restrict__ g, int r0, int T) {
  const int i = (int)threadIdx.x;
  if (i < kTile) s[i] = r0 + i < T ? __ldg(g + r0 + i) : 0.0f;
}

// The thread's place in a tile: rows 4 ty + r; column n of its score block is col(n).
template <int TX>
struct Place {
  int tx, ty;
  __device__ __forceinline__ Place() : tx((int)threadIdx.x % TX), ty((int)threadIdx.x / TX) {}
  __device__ __forceinline__ int col(int n) const { return (n >> 2) * (4 * TX) + tx * 4 + (n & 3); }
};

// acc[r][n] = sum_c A[4 ty + r][c] B[col(n)][c] over the D columns of two swizzled tiles.
// Rows 4 ty + r share (row / 4) % 8 = ty % 8, and rows col(n) share tx % 8, so each
// operand needs one XOR per chunk and immediate offsets otherwise.
template <int D, int TX>
__device__ __forceinline__ void mm_abt(const float* A, const float* B, float acc[4][kTile / TX],
                                       const Place<TX>& pl) {
  constexpr int SC = kTile / TX;
  const float* a0 = A + pl.ty * 4 * D;
  const float* b0 = B + pl.tx * 4 * D;
  const int xa = pl.ty & 7, xb = pl.tx & 7;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int n = 0; n < SC; ++n) acc[r][n] = 0.0f;
  for (int ch = 0; ch < D / 4; ++ch) {
    const int ca = (ch ^ xa) << 2, cb = (ch ^ xb) << 2;
    float4 a[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = ld4(a0 + r * D + ca);
#pragma unroll
    for (int n = 0; n < SC; ++n) {
      float4 b = ld4(b0 + ((n >> 2) * 4 * TX + (n & 3)) * D + cb);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float s = acc[r][n];
        s = fmaf(a[r].x, b.x, s);
        s = fmaf(a[r].y, b.y, s);
        s = fmaf(a[r].z, b.z, s);
        s = fmaf(a[r].w, b.w, s);
        acc[r][n] = s;
      }
    }
  }
}

// acc[r][m] += sum_k Pt[k][4 ty + r] V[k][ocol(m)] for k < 64: Pt holds a probability
// tile transposed (row k, the chunk of rows 4 ty .. 4 ty + 3 at chunk ty), V a [64][D]
// tile; ocol(m) = (m / 4) 4 TX + 4 tx + m % 4.
template <int D, int TX>
__device__ __forceinline__ void mm_pv(const float* Pt, const float* V, float acc[4][D / TX],
                                      const Place<TX>& pl) {
  constexpr int OG = D / (4 * TX);
#pragma unroll 2
  for (int kk = 0; kk < kTile / 4; ++kk) {
    const int xk = kk & 7;  // (k / 4) % 8 for the four rows k = 4 kk + i
    const int cp = (pl.ty ^ xk) << 2, cv = (pl.tx ^ xk) << 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = kk * 4 + i;
      float4 p = ld4(Pt + k * kTile + cp);
      float pr[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
      for (int g = 0; g < OG; ++g) {
        float4 v = ld4(V + k * D + g * TX * 4 + cv);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          acc[r][g * 4 + 0] = fmaf(pr[r], v.x, acc[r][g * 4 + 0]);
          acc[r][g * 4 + 1] = fmaf(pr[r], v.y, acc[r][g * 4 + 1]);
          acc[r][g * 4 + 2] = fmaf(pr[r], v.z, acc[r][g * 4 + 2]);
          acc[r][g * 4 + 3] = fmaf(pr[r], v.w, acc[r][g * 4 + 3]);
        }
      }
    }
  }
}

// Pt[col(n)][4 ty + r] = vals[r][n]: the thread's score block, transposed, into a
// swizzled [64][64] tile (rows col(n) share (row / 4) % 8 = tx % 8).
template <int TX>
__device__ __forceinline__ void store_pt(float* Pt, const float vals[4][kTile / TX],
                                         const Place<TX>& pl) {
  const int c = (pl.ty ^ (pl.tx & 7)) << 2;
#pragma unroll
  for (int n = 0; n < kTile / TX; ++n)
    st4(Pt + pl.col(n) * kTile + c, make_float4(vals[0][n], vals[1][n], vals[2][n], vals[3][n]));
}

// Rows row0 + r (those below T) of a [T, D] matrix at g (rows rs floats apart) = the
// thread's output block acc[r][m] (columns ocol(m)) times mul[r].
template <int D, int TX>
__device__ __forceinline__ void store_rows(float* g, int row0, int T, const float acc[4][D / TX],
                                           const float mul[4], const Place<TX>& pl, int rs) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (row0 + r >= T) continue;
    float* row = g + (size_t)(row0 + r) * rs + pl.tx * 4;
#pragma unroll
    for (int c = 0; c < D / TX; c += 4)
      st4(row + c / 4 * 4 * TX, make_float4(acc[r][c] * mul[r], acc[r][c + 1] * mul[r],
                                            acc[r][c + 2] * mul[r], acc[r][c + 3] * mul[r]));
  }
}

__device__ __forceinline__ uint32_t pick(const uint32_t w[4], int i) {
  return i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
}

// Keep bits of the flat elements f0 .. f0 + 3 (bit u for f0 + u): one Philox block, or
// two where f0 is not a multiple of 4 (T % 4 != 0).
__device__ __forceinline__ unsigned keep4(uint64_t f0, uint32_t threshold, uint64_t offset,
                                          uint64_t seed) {
  uint32_t a[4], b[4];
  aicfc::philox_block(f0 >> 2, offset, seed, a);
  const int s = (int)(f0 & 3);
  if (s) aicfc::philox_block((f0 >> 2) + 1, offset, seed, b);
  unsigned bits = 0;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    int i = s + u;
    uint32_t w = i < 4 ? pick(a, i) : pick(b, i - 4);
    bits |= ((w >> 8) >= threshold ? 1u : 0u) << u;
  }
  return bits;
}

// Dropout on the probabilities: p = 0 keeps everything with scale 1.
struct Dropout {
  bool on;
  uint32_t threshold;
  float scale;
  uint64_t offset, seed;
  __device__ __forceinline__ Dropout(const int64_t* off, double p, int64_t s)
      : on(p > 0.0),
        threshold(aicfc::dropout_threshold(p)),
        scale(p > 0.0 ? (float)(1.0 / (1.0 - p)) : 1.0f),
        offset(p > 0.0 ? (uint64_t)off[0] : 0),
        seed((uint64_t)s) {}
  // Keep bits of `groups` runs of 4 consecutive flat elements, run e starting at
  // first + e / per * row_step + (e % per) * col_step, as bits 4 e .. 4 e + 3 (all
  // ones without dropout). A rolled loop: one Philox body in the code, few registers.
  __device__ __forceinline__ uint32_t mask(int groups, int per, uint64_t first,
                                           uint64_t row_step, int col_step) const {
    if (!on) return 0xffffffffu;
    uint32_t bits = 0;
#pragma unroll 1
    for (int e = 0; e < groups; ++e) {
      uint64_t f0 = first + (uint64_t)(e / per) * row_step + (uint64_t)((e % per) * col_step);
      bits |= keep4(f0, threshold, offset, seed) << (4 * e);
    }
    return bits;
  }
};

template <int D>
__device__ void attention_fwd(const float* __restrict__ q, const float* __restrict__ k,
                              const float* __restrict__ v, const int64_t* offset,
                              float* __restrict__ out, float* __restrict__ lse, int T,
                              float scale, int causal, double p, int64_t seed,
                              const aicfc::Heads& in, const aicfc::Heads& og) {
  constexpr int TX = 8, NT = 16 * TX, SC = kTile / TX, OC = D / TX;
  AICFC_DYNAMIC_SHARED(float, smem);
  float* Qs = smem;
  float* Ks = Qs + kTile * D;
  float* Vs = Ks + kTile * D;
  float* Pt = Vs + kTile * D;
  const Place<TX> pl;
  const Dropout drop(offset, p, seed);
  const int bh = (int)blockIdx.x;
  const int q0 = ((int)gridDim.y - 1 - (int)blockIdx.y) * kTile;
  const size_t base = in.base(bh);
  const float sl2 = scale * kLog2e;
  load_tile<D, NT>(Qs, q + base, q0, T, in.rs);
  float m[4], l[4], o[4][OC];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = aicfc::neg_inf();
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < OC; ++c) o[r][c] = 0.0f;
  }
  const int kv_end = causal ? min(T, q0 + kTile) : T;
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // Qs is in; the previous tile's readers of Ks, Vs, Pt are done
    load_tile<D, NT>(Ks, k + base, k0, T, in.rs);
    load_tile<D, NT>(Vs, v + base, k0, T, in.rs);
    __syncthreads();
    float s[4][SC];
    mm_abt<D, TX>(Qs, Ks, s, pl);
    // Bit 4 (r SC / 4 + g) + u: element (r, 4 g + u), flat ((bh T + i) T + j).
    const uint32_t kept = drop.mask(4 * SC / 4, SC / 4,
                                    ((uint64_t)bh * T + q0 + pl.ty * 4) * T + k0 + pl.col(0),
                                    (uint64_t)T, 4 * TX);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = q0 + pl.ty * 4 + r;
      float mx = aicfc::neg_inf();
#pragma unroll
      for (int n = 0; n < SC; ++n) {
        const int j = k0 + pl.col(n);
        const bool ok = j < T && (!causal || j <= i);
        s[r][n] = ok ? s[r][n] * sl2 : aicfc::neg_inf();  // base-2 scores
        mx = fmaxf(mx, s[r][n]);
      }
#pragma unroll
      for (int off = TX / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
      const float m_new = fmaxf(m[r], mx);
      const float m_use = m_new == aicfc::neg_inf() ? 0.0f : m_new;  // a row with nothing yet
      const float alpha = exp2f(m[r] - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < SC; ++n) {
        s[r][n] = exp2f(s[r][n] - m_use);
        sum += s[r][n];
      }
      l[r] = l[r] * alpha + sum;  // this thread's columns; the row's threads add up at the end
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < OC; ++c) o[r][c] *= alpha;
      if (drop.on) {
#pragma unroll
        for (int n = 0; n < SC; ++n)
          s[r][n] = (kept >> (r * SC + n)) & 1u ? s[r][n] * drop.scale : 0.0f;
      }
    }
    store_pt<TX>(Pt, s, pl);
    __syncthreads();
    mm_pv<D, TX>(Pt, Vs, o, pl);
  }
  float inv[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float lt = l[r];
#pragma unroll
    for (int off = TX / 2; off > 0; off >>= 1) lt += __shfl_xor_sync(kFull, lt, off);
    inv[r] = 1.0f / lt;
    const int i = q0 + pl.ty * 4 + r;
    if (i < T && pl.tx == 0) lse[(size_t)bh * T + i] = (m[r] + log2f(lt)) * kLn2;
  }
  store_rows<D, TX>(out + og.base(bh), q0 + pl.ty * 4, T, o, inv, pl, og.rs);
}

template <int D>
__device__ void attention_bwd(const float* __restrict__ q, const float* __restrict__ k,
                              const float* __restrict__ v, const float* __restrict__ dout,
                              const float* __restrict__ lse, const int64_t* offset,
                              float* __restrict__ dq, float* __restrict__ dk,
                              float* __restrict__ dv, const float* __restrict__ delta, int T,
                              float scale, int causal, double p, int64_t seed,
                              const aicfc::Heads& in, const aicfc::Heads& og) {
  constexpr int TX = D == 128 ? 16 : 8, NT = 16 * TX, SC = kTile / TX, OC = D / TX;
  AICFC_DYNAMIC_SHARED(float, smem);
  float* Ks = smem;
  float* Vs = Ks + kTile * D;
  float* Qs = Vs + kTile * D;
  float* dOs = Qs + kTile * D;
  float* Ps = dOs + kTile * D;
  float* dSs = Ps + kTile * kTile;
  float* lse_s = dSs + kTile * kTile;
  float* dl_s = lse_s + kTile;
  const Place<TX> pl;
  const Dropout drop(offset, p, seed);
  const int bh = (int)blockIdx.x, t = (int)blockIdx.y, nt = (int)gridDim.y;
  const size_t base = in.base(bh), obase = og.base(bh);  // q, k, v, dq, dk, dv; dout
  const int rs = in.rs, ors = og.rs;
  const float* lse_bh = lse + (size_t)bh * T;
  const float* dl_bh = delta + (size_t)bh * T;
  const float sl2 = scale * kLog2e;

  // Phase 1: dk, dv of key tile t (rows j = k0 + 4 ty + r), over the query tiles.
  const int k0 = t * kTile;
  load_tile<D, NT>(Ks, k + base, k0, T, rs);
  load_tile<D, NT>(Vs, v + base, k0, T, rs);
  float dka[4][OC], dva[4][OC];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < OC; ++c) dka[r][c] = dva[r][c] = 0.0f;
  for (int qt = causal ? t : 0; qt < nt; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();  // the previous tile's readers of Qs, dOs, Ps, dSs, lse_s, dl_s are done
    load_tile<D, NT>(Qs, q + base, q0, T, rs);
    load_tile<D, NT>(dOs, dout + obase, q0, T, ors);
    load_vec(lse_s, lse_bh, q0, T);
    load_vec(dl_s, dl_bh, q0, T);
    __syncthreads();
    float st[4][SC], dpt[4][SC];  // S^T and (dout v^T)^T: rows j, columns i = q0 + col(n)
    mm_abt<D, TX>(Ks, Qs, st, pl);
    mm_abt<D, TX>(Vs, dOs, dpt, pl);
    // Bit 4 n + r: element (i = q0 + col(n), j = j0 + r), flat ((bh T + i) T + j); the
    // columns col(n) of one run of 4 are consecutive, those of the next 4 TX further.
    const int j0 = k0 + pl.ty * 4;
    const uint32_t keep_bits = drop.mask(SC, 4, ((uint64_t)bh * T + q0 + pl.col(0)) * T + j0,
                                         (uint64_t)4 * TX * T, T);
#pragma unroll
    for (int n = 0; n < SC; ++n) {
      const int ci = pl.col(n), i = q0 + ci;
      const float lse2 = lse_s[ci] * kLog2e, dl = dl_s[ci];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r;
        const bool ok = i < T && j < T && (!causal || j <= i);
        const float P = ok ? exp2f(st[r][n] * sl2 - lse2) : 0.0f;
        const bool kept = (keep_bits >> (4 * n + r)) & 1u;
        const float dP = kept ? dpt[r][n] * drop.scale : 0.0f;
        st[r][n] = kept ? P * drop.scale : 0.0f;  // P' for dv
        dpt[r][n] = P * (dP - dl);                // dS for dk
      }
    }
    store_pt<TX>(Ps, st, pl);
    store_pt<TX>(dSs, dpt, pl);
    __syncthreads();
    mm_pv<D, TX>(Ps, dOs, dva, pl);
    mm_pv<D, TX>(dSs, Qs, dka, pl);
  }
  const float ones[4] = {1.0f, 1.0f, 1.0f, 1.0f}, scales[4] = {scale, scale, scale, scale};
  store_rows<D, TX>(dv + base, k0 + pl.ty * 4, T, dva, ones, pl, rs);
  store_rows<D, TX>(dk + base, k0 + pl.ty * 4, T, dka, scales, pl, rs);

  // Phase 2: dq of query tile t (rows i = q0 + 4 ty + r), over the key tiles.
  const int q0 = t * kTile;
  __syncthreads();  // phase 1's readers of Qs and dOs are done
  load_tile<D, NT>(Qs, q + base, q0, T, rs);
  load_tile<D, NT>(dOs, dout + obase, q0, T, ors);
  float lse2[4], dl[4], dqa[4][OC];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = q0 + pl.ty * 4 + r;
    lse2[r] = i < T ? __ldg(lse_bh + i) * kLog2e : 0.0f;
    dl[r] = i < T ? __ldg(dl_bh + i) : 0.0f;
#pragma unroll
    for (int c = 0; c < OC; ++c) dqa[r][c] = 0.0f;
  }
  const int kv_end = causal ? min(T, q0 + kTile) : T;
  for (int kk0 = 0; kk0 < kv_end; kk0 += kTile) {
    __syncthreads();  // Qs, dOs are in; the previous tile's readers of Ks, Vs, dSs are done
    load_tile<D, NT>(Ks, k + base, kk0, T, rs);
    load_tile<D, NT>(Vs, v + base, kk0, T, rs);
    __syncthreads();
    float s[4][SC], dp[4][SC];  // S and dout v^T: rows i, columns j = kk0 + col(n)
    mm_abt<D, TX>(Qs, Ks, s, pl);
    mm_abt<D, TX>(dOs, Vs, dp, pl);
    const uint32_t kept = drop.mask(4 * SC / 4, SC / 4,
                                    ((uint64_t)bh * T + q0 + pl.ty * 4) * T + kk0 + pl.col(0),
                                    (uint64_t)T, 4 * TX);  // as in the forward
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = q0 + pl.ty * 4 + r;
#pragma unroll
      for (int n = 0; n < SC; ++n) {
        const int j = kk0 + pl.col(n);
        const bool ok = i < T && j < T && (!causal || j <= i);
        const float P = ok ? exp2f(s[r][n] * sl2 - lse2[r]) : 0.0f;
        const float dP = (kept >> (r * SC + n)) & 1u ? dp[r][n] * drop.scale : 0.0f;
        s[r][n] = P * (dP - dl[r]);  // dS
      }
    }
    store_pt<TX>(dSs, s, pl);
    __syncthreads();
    mm_pv<D, TX>(dSs, Ks, dqa, pl);
  }
  store_rows<D, TX>(dq + base, q0 + pl.ty * 4, T, dqa, scales, pl, rs);
}

// D of row bh T + i, whose d floats lie at `og.at(bh, i)` of out and dout.
__device__ __forceinline__ void attention_delta(const float* out, const float* dout,
                                                float* workspace, int rows, int d, int T,
                                                const aicfc::Heads& og) {
  const int lanes = d / 4;  // 8, 16 or 32: a row's float4s, within one warp
  const int row = (int)(blockIdx.x * (blockDim.x / lanes) + threadIdx.x / lanes);
  const int c = (int)(threadIdx.x % lanes) * 4;
  float s = 0.0f;
  if (row < rows) {
    const size_t at = og.at(row / T, row % T) + c;
    float4 a = __ldg(reinterpret_cast<const float4*>(out + at));
    float4 b = __ldg(reinterpret_cast<const float4*>(dout + at));
    s = a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_xor_sync(kFull, s, off);
  if (row < rows && threadIdx.x % lanes == 0) workspace[row] = s;
}

}  // namespace

// Minimum blocks per multiprocessor in __launch_bounds__: as many as the shared memory
// admits (228 KB a multiprocessor), so registers do not lower the occupancy further.
// The packed entries take q, k, v at column offsets 0, D, 2D of qkv [N, T, 3D] (D = H d)
// and out, dout [N, T, D]; dq, dk, dv go to the same offsets of dqkv [N, T, 3D].
#define AICFC_ATTENTION(D, FWD_BLOCKS, BWD_THREADS, BWD_BLOCKS)                                \
  extern "C" __global__ void __launch_bounds__(128, FWD_BLOCKS) aicfc_attention_fwd_f32_d##D( \
      const float* q, const float* k, const float* v, const int64_t* offset, float* out,       \
      float* lse, int32_t BH, int32_t T, float scale, int32_t causal, double p, int64_t seed) { \
    const aicfc::Heads h = aicfc::Heads::plain(T, D);                                          \
    attention_fwd<D>(q, k, v, offset, out, lse, T, scale, causal, p, seed, h, h);              \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(BWD_THREADS, BWD_BLOCKS)                        \
      aicfc_attention_bwd_f32_d##D(                                                            \
      const float* q, const float* k, const float* v, const float* dout, const float* lse,     \
      const int64_t* offset, float* dq, float* dk, float* dv, const float* workspace,          \
      int32_t BH, int32_t T, float scale, int32_t causal, double p, int64_t seed) {            \
    const aicfc::Heads h = aicfc::Heads::plain(T, D);                                          \
    attention_bwd<D>(q, k, v, dout, lse, offset, dq, dk, dv, workspace, T, scale, causal, p,   \
                     seed, h, h);                                                              \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(128, FWD_BLOCKS)                                \
      aicfc_attention_fwd_packed_f32_d##D(const float* qkv, const int64_t* offset, float* out, \
                                          float* lse, int32_t BH, int32_t H, int32_t T,        \
                                          float scale, int32_t causal, double p,               \
                                          int64_t seed) {                                      \
    const int E = H * D;                                                                       \
    attention_fwd<D>(qkv, qkv + E, qkv + 2 * E, offset, out, lse, T, scale, causal, p, seed,   \
                     aicfc::Heads::packed(H, T, D, 3 * E), aicfc::Heads::packed(H, T, D, E));  \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(BWD_THREADS, BWD_BLOCKS)                        \
      aicfc_attention_bwd_packed_f32_d##D(                                                     \
      const float* qkv, const float* dout, const float* lse, const int64_t* offset,            \
      float* dqkv, const float* workspace, int32_t BH, int32_t H, int32_t T, float scale,      \
      int32_t causal, double p, int64_t seed) {                                                \
    const int E = H * D;                                                                       \
    attention_bwd<D>(qkv, qkv + E, qkv + 2 * E, dout, lse, offset, dqkv, dqkv + E,             \
                     dqkv + 2 * E, workspace, T, scale, causal, p, seed,                       \
                     aicfc::Heads::packed(H, T, D, 3 * E), aicfc::Heads::packed(H, T, D, E));  \
  }

AICFC_ATTENTION(32, 4, 128, 2)
AICFC_ATTENTION(64, 3, 128, 2)
AICFC_ATTENTION(128, 2, 256, 1)

// Grid: ceil(rows / (256 / (d / 4))) blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_bwd_delta_f32(const float* out, const float* dout, float* workspace,
                                  int32_t rows, int32_t d) {
  attention_delta(out, dout, workspace, rows, d, rows, aicfc::Heads::plain(rows, d));
}

// The same over out, dout [N, T, H d] (heads merged); D in the order (n H + h) T + i.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_attention_bwd_delta_packed_f32(const float* out, const float* dout, float* workspace,
                                         int32_t rows, int32_t d, int32_t H, int32_t T) {
  attention_delta(out, dout, workspace, rows, d, T, aicfc::Heads::packed(H, T, d, H * d));
}
