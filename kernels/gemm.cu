// GEMM with a fused epilogue: Y = act(op(A) op(B) + bias), Z = op(A) op(B) + bias.
//
// op(A) is [M, K] (A stored [M, K], or [K, M] when transposed), op(B) is [K, N] (B
// stored [K, N], or [N, K] when transposed); bias has length N (one value per output
// column, as reference.gemm_epilogue); Z (the pre-activation, kept for the gelu
// backward) is written when its pointer is not null. All row-major float32.
//
// Two families, each instantiated for the four transpose pairs (suffix _nn, _nt,
// _tn, _tt = transpose_a, transpose_b):
//   aicfc_gemm_f32_*   strict fp32 SIMT: a BM x BN block tile, BK deep, each thread
//                      TM x TN outputs in registers, double-buffered shared memory.
//                      Two tile shapes: 128x128 (large problems) and 64x64 (_s64,
//                      small problems, more blocks).
//   aicfc_gemm_tf32_*  tensor cores through WMMA m16n16k8 with TF32 inputs and fp32
//                      accumulation (about 1e-3 relative error; off unless TF32 is
//                      allowed).
// ABI: (A, B, bias|null, Y, Z|null, int32 M, int32 N, int32 K, int32 act).
#include "common.cuh"
#include <mma.h>

AICFC_EXPORT_ABI_VERSION

namespace aicfc {

// Element (row r, col c) of op(X) where X is stored row-major with `ld` columns.
template <bool T>
__device__ __forceinline__ float load_op(const float* __restrict__ x, int r, int c, int rows,
                                         int cols, int ld) {
  if (r >= rows || c >= cols) return 0.0f;
  return T ? __ldg(x + (size_t)c * ld + r) : __ldg(x + (size_t)r * ld + c);
}

// Load the BM x BK tile of op(A) at (m0, k0) and the BK x BN tile of op(B) at (k0, n0)
// into registers, with consecutive threads reading consecutive addresses of the
// stored matrix (coalesced) whichever operand is transposed.
template <int BM, int BN, int BK, int NT, bool TA, bool TB>
struct TileLoader {
  static constexpr int A_PER = BM * BK / NT;
  static constexpr int B_PER = BK * BN / NT;
  float a[A_PER], b[B_PER];

  __device__ __forceinline__ void load(const float* A, const float* B, int M, int N, int K,
                                       int m0, int n0, int k0) {
    int tid = threadIdx.x;
    int lda = TA ? M : K, ldb = TB ? K : N;
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
      int idx = tid + i * NT;
      int m = TA ? idx % BM : idx / BK;
      int k = TA ? idx / BM : idx % BK;
      a[i] = load_op<TA>(A, m0 + m, k0 + k, M, K, lda);
    }
#pragma unroll
    for (int i = 0; i < B_PER; ++i) {
      int idx = tid + i * NT;
      int k = TB ? idx % BK : idx / BN;
      int n = TB ? idx / BK : idx % BN;
      b[i] = load_op<TB>(B, k0 + k, n0 + n, K, N, ldb);
    }
  }

  // Store into shared tiles As[k][m] (k-major) and Bs[k][n].
  template <int LDA, int LDB>
  __device__ __forceinline__ void store(float (*As)[LDA], float (*Bs)[LDB]) {
    int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
      int idx = tid + i * NT;
      int m = TA ? idx % BM : idx / BK;
      int k = TA ? idx / BM : idx % BK;
      As[k][m] = a[i];
    }
#pragma unroll
    for (int i = 0; i < B_PER; ++i) {
      int idx = tid + i * NT;
      int k = TB ? idx % BK : idx / BN;
      int n = TB ? idx / BK : idx % BN;
      Bs[k][n] = b[i];
    }
  }
};

template <int BM, int BN, int BK, int TM, int TN, bool TA, bool TB>
__device__ __forceinline__ void gemm_f32_tile(const float* __restrict__ A,
                                              const float* __restrict__ B,
                                              const float* __restrict__ bias, float* __restrict__ Y,
                                              float* __restrict__ Z, int M, int N, int K, int act) {
  constexpr int TX = BN / TN, TY = BM / TM, NT = TX * TY;
  __shared__ float As[2][BK][BM + 4];
  __shared__ float Bs[2][BK][BN + 4];
  int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  TileLoader<BM, BN, BK, NT, TA, TB> ld;
  ld.load(A, B, M, N, K, m0, n0, 0);
  ld.store(As[0], Bs[0]);
  __syncthreads();

  int ntiles = (K + BK - 1) / BK;
  for (int t = 0; t < ntiles; ++t) {
    int cur = t & 1;
    if (t + 1 < ntiles) ld.load(A, B, M, N, K, m0, n0, (t + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[cur][k][ty + i * TY];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[cur][k][tx + j * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (t + 1 < ntiles) ld.store(As[cur ^ 1], Bs[cur ^ 1]);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    int m = m0 + ty + i * TY;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int n = n0 + tx + j * TX;
      if (n >= N) continue;
      float z = acc[i][j] + (bias ? __ldg(bias + n) : 0.0f);
      size_t o = (size_t)m * N + n;
      if (Z) Z[o] = z;
      Y[o] = activate(z, act);
    }
  }
}

// --- TF32 tensor cores (WMMA m16n16k8) -------------------------------------------

namespace wmma = nvcuda::wmma;

template <bool TA, bool TB>
__device__ __forceinline__ void gemm_tf32_tile(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               const float* __restrict__ bias,
                                               float* __restrict__ Y, float* __restrict__ Z, int M,
                                               int N, int K, int act) {
  // 128 x 128 block tile, BK = 16, 8 warps in a 2 x 4 grid, each warp 64 x 32
  // (4 x 2 fragments of 16 x 16).
  constexpr int BM = 128, BN = 128, BK = 16, NT = 256;
  constexpr int LDA = BK + 4, LDB = BN + 4;
  __shared__ __align__(32) float As[BM][LDA];  // row-major op(A) tile: As[m][k]
  __shared__ __align__(32) float Bs[BK][LDB];  // row-major op(B) tile: Bs[k][n]
  __shared__ __align__(32) float Cs[8][16][16 + 4];

  int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int wm = warp / 4, wn = warp % 4;
  int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  int lda = TA ? M : K, ldb = TB ? K : N;

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = 0; i < BM * BK / NT; ++i) {
      int idx = tid + i * NT;
      int m = TA ? idx % BM : idx / BK;
      int k = TA ? idx / BM : idx % BK;
      As[m][k] = load_op<TA>(A, m0 + m, k0 + k, M, K, lda);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / NT; ++i) {
      int idx = tid + i * NT;
      int k = TB ? idx % BK : idx / BN;
      int n = TB ? idx / BK : idx % BN;
      Bs[k][n] = load_op<TB>(B, k0 + k, n0 + n, K, N, ldb);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wmma::load_matrix_sync(fa[i], &As[wm * 64 + i * 16][kk], LDA);
#pragma unroll
        for (int e = 0; e < fa[i].num_elements; ++e) fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        wmma::load_matrix_sync(fb[j], &Bs[kk][wn * 32 + j * 16], LDB);
#pragma unroll
        for (int e = 0; e < fb[j].num_elements; ++e) fb[j].x[e] = wmma::__float_to_tf32(fb[j].x[e]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: stage each 16 x 16 fragment in this warp's shared slab, then apply
  // bias and activation with bounds checks.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&Cs[warp][0][0], acc[i][j], 16 + 4, wmma::mem_row_major);
      __syncwarp();
      int rbase = m0 + wm * 64 + i * 16, cbase = n0 + wn * 32 + j * 16;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        int r = e * 2 + (lane >> 4), c = lane & 15;
        int m = rbase + r, n = cbase + c;
        if (m < M && n < N) {
          float z = Cs[warp][r][c] + (bias ? __ldg(bias + n) : 0.0f);
          size_t o = (size_t)m * N + n;
          if (Z) Z[o] = z;
          Y[o] = activate(z, act);
        }
      }
      __syncwarp();
    }
  }
}

}  // namespace aicfc

// Grid: (ceil(N / BN), ceil(M / BM)); block: 256 threads.
#define AICFC_GEMM_F32(SUFFIX, BM, BN, TM, TN, TA, TB)                                         \
  extern "C" __global__ void __launch_bounds__(256)                                            \
      aicfc_gemm_f32_##SUFFIX(const float* A, const float* B, const float* bias, float* Y,     \
                              float* Z, int32_t M, int32_t N, int32_t K, int32_t act) {        \
    aicfc::gemm_f32_tile<BM, BN, 8, TM, TN, TA, TB>(A, B, bias, Y, Z, M, N, K, act);           \
  }

AICFC_GEMM_F32(nn, 128, 128, 8, 8, false, false)
AICFC_GEMM_F32(nt, 128, 128, 8, 8, false, true)
AICFC_GEMM_F32(tn, 128, 128, 8, 8, true, false)
AICFC_GEMM_F32(tt, 128, 128, 8, 8, true, true)
AICFC_GEMM_F32(s64_nn, 64, 64, 4, 4, false, false)
AICFC_GEMM_F32(s64_nt, 64, 64, 4, 4, false, true)
AICFC_GEMM_F32(s64_tn, 64, 64, 4, 4, true, false)
AICFC_GEMM_F32(s64_tt, 64, 64, 4, 4, true, true)

#define AICFC_GEMM_TF32(SUFFIX, TA, TB)                                                        \
  extern "C" __global__ void __launch_bounds__(256)                                            \
      aicfc_gemm_tf32_##SUFFIX(const float* A, const float* B, const float* bias, float* Y,    \
                               float* Z, int32_t M, int32_t N, int32_t K, int32_t act) {       \
    aicfc::gemm_tf32_tile<TA, TB>(A, B, bias, Y, Z, M, N, K, act);                             \
  }

AICFC_GEMM_TF32(nn, false, false)
AICFC_GEMM_TF32(nt, false, true)
AICFC_GEMM_TF32(tn, true, false)
AICFC_GEMM_TF32(tt, true, true)
