// GEMM with a fused epilogue on TF32 tensor cores (WMMA m16n16k8), same contract as
// gemm.cu: Y = act(op(A) op(B) + bias), Z = op(A) op(B) + bias (Z when not null),
// bias of length N, row-major float32 buffers, inputs rounded to TF32 (10-bit
// mantissa) and accumulated in fp32: about 1e-3 relative error, so the registry
// allows it only when TF32 is (`requires=("tf32",)`). A separate file because
// WMMA needs the toolkit's mma.h (runtime/cuda_abi.py finds it for NVRTC).
// ABI: (A, B, bias|null, Y, Z|null, int32 M, int32 N, int32 K, int32 act).
// Grid: (ceil(N / 128), ceil(M / 128)); block: 256 threads.
#include "common.cuh"
#include <mma.h>

AICFC_EXPORT_ABI_VERSION

namespace aicfc {

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
