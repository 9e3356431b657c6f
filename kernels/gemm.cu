// GEMM with a fused epilogue: Y = act(op(A) op(B) + bias), Z = op(A) op(B) + bias.
//
// op(A) is [M, K] (A stored [M, K], or [K, M] when transposed), op(B) is [K, N] (B
// stored [K, N], or [N, K] when transposed); bias has length N (one value per output
// column, as reference.gemm_epilogue); Z (the pre-activation, kept for the gelu
// backward) is written when its pointer is not null. All row-major float32.
//
// aicfc_gemm_f32_* (strict fp32 SIMT), instantiated for the four transpose pairs
// (suffix _nn, _nt, _tn, _tt = transpose_a, transpose_b): a BM x BN block tile, BK
// deep, each thread TM x TN outputs in registers, double-buffered shared memory.
// Two tile shapes: 128x128 (large problems) and 64x64 (_s64, small problems, more
// blocks). The TF32 tensor-core variant is gemm_tf32.cu.
// ABI: (A, B, bias|null, Y, Z|null, int32 M, int32 N, int32 K, int32 act).
//
// aicfc_gemm_batched_f32_* (the 64x64 tile, a batch of products, torch.matmul's batched
// form): block z runs product z, A_z = A + z stride_a, B_z = B + z stride_b (a stride of
// 0 broadcasts one operand over the batch), Y_z and Z_z at z M N; the bias (length N)
// is shared. ABI: (A, B, bias|null, Y, Z|null, int32 M, int32 N, int32 K, int32 act,
// int64 stride_a, int64 stride_b). Grid: (ceil(N / 64), ceil(M / 64), batch).
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace aicfc {

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

}  // namespace aicfc

// Grid: (ceil(N / BN), ceil(M / BM)); block: 256 threads.
#define AICFC_GEMM_F32(SUFFIX, BM, BN, TM, TN, TA, TB)                                         \
  extern "C" __global__ void __launch_bounds__(256)                                            \
      aicfc_gemm_f32_##SUFFIX(const float* A, const float* B, const float* bias, float* Y,     \
                              float* Z, int32_t M, int32_t N, int32_t K, int32_t act) {        \
    aicfc::gemm_f32_tile<BM, BN, 8, TM, TN, TA, TB>(A, B, bias, Y, Z, M, N, K, act);           \
  }

// Grid: (ceil(N / 64), ceil(M / 64), batch); block: 256 threads.
#define AICFC_GEMM_BATCHED_F32(SUFFIX, TA, TB)                                                 \
  extern "C" __global__ void __launch_bounds__(256) aicfc_gemm_batched_f32_##SUFFIX(          \
      const float* A, const float* B, const float* bias, float* Y, float* Z, int32_t M,        \
      int32_t N, int32_t K, int32_t act, int64_t stride_a, int64_t stride_b) {                 \
    const size_t z = blockIdx.z, plane = (size_t)M * N;                                        \
    aicfc::gemm_f32_tile<64, 64, 8, 4, 4, TA, TB>(A + z * stride_a, B + z * stride_b, bias,   \
                                                  Y + z * plane, Z ? Z + z * plane : nullptr, \
                                                  M, N, K, act);                               \
  }

AICFC_GEMM_F32(nn, 128, 128, 8, 8, false, false)
AICFC_GEMM_F32(nt, 128, 128, 8, 8, false, true)
AICFC_GEMM_F32(tn, 128, 128, 8, 8, true, false)
AICFC_GEMM_F32(tt, 128, 128, 8, 8, true, true)
AICFC_GEMM_F32(s64_nn, 64, 64, 4, 4, false, false)
AICFC_GEMM_F32(s64_nt, 64, 64, 4, 4, false, true)
AICFC_GEMM_F32(s64_tn, 64, 64, 4, 4, true, false)
AICFC_GEMM_F32(s64_tt, 64, 64, 4, 4, true, true)
AICFC_GEMM_BATCHED_F32(nn, false, false)
AICFC_GEMM_BATCHED_F32(nt, false, true)
AICFC_GEMM_BATCHED_F32(tn, true, false)
AICFC_GEMM_BATCHED_F32(tt, true, true)
