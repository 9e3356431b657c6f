// Tensor-core latency kernels for small GEMMs (mma.sync through kernels/mma.cuh): the
// split-K kernels of gemm_small.cu with their inner product on tensor cores.
//
// Same contract, grid, workspace and ABI as gemm_small.cu's aicfc_gemm_splitk_f32_* and
// aicfc_gemm_epilogue_grad_f32_* (32x32 output tiles, K cut into `splits` chunks of
// `k_chunk`, a multiple of 32 and at most 128; per-tile tickets, partials added by the
// last block in chunk order, so the sums are deterministic), for three input types:
//   bf16, f16: operands stored in the type, mma.m16n8k16 with float32 accumulation;
//   tf32:      float32 operands rounded to tf32 (cvt.rna, 10 mantissa bits) on their way
//              into shared memory, mma.m16n8k8, float32 accumulation (about 1e-3
//              relative error: the registry runs them only where TF32 is allowed).
// The epilogue is float32 math; its outputs are stored in OUT: the input type, or float32
// ("wide": a bf16/f16 product whose result and bias are float32, aicfc-fold-casts).
//
// aicfc_gemm_mma_<in>[_f32]_{nn,nt,tn,tt}: Y = act(op(A) op(B) + bias), Z = the
//   pre-activation (when not null), bias [N] in OUT or null, Y and Z [M, N] in OUT.
//   ABI: (A, B, bias|null, Y, Z|null, workspace, int32 M, int32 N, int32 K, int32 act,
//   int32 splits, int32 k_chunk).
// aicfc_gemm_epilogue_grad_mma_<in>[_f32]_{nn,nt,tn,tt}: dZ = (op(A) op(B)) *
//   act'(saved) in the input type (saved too), dbias = column sums of dZ (as stored) in
//   OUT; the workspace of gemm_small.cu's epilogue_grad kernel.
//   ABI: (A, B, saved, dZ, dbias, workspace, int32 M, int32 N, int32 K, int32 act,
//   int32 splits, int32 k_chunk).
// Grid: (ceil(N / 32), ceil(M / 32), splits); block: 256 threads, 8 warps in a 2 x 4
// grid, each warp one 16 x 8 mma tile of the 32 x 32 output tile.
//
// Ragged edges: the block stages its whole chunk of op(A) [32][k_chunk] and op(B)^T
// [32][k_chunk] in shared memory, k contiguous, zero past M, N and the chunk's end, so a
// fragment is two (tf32: one) 32-bit shared loads per register and the k steps past K add
// zeros; the epilogue stores only m < M, n < N.
#include "mma.cuh"

AICFC_EXPORT_ABI_VERSION

namespace aicfc {

struct tf32_in {};  // the tag of float32 operands rounded to tf32

// Operand staging per input type: `Word` the shared-memory element, `kStep` the mma's K.
template <class In>
struct MmaOperand {
  using Storage = In;  // bf16 / f16: the operand's own 16 bits
  using Word = uint16_t;
  static constexpr int kStep = 16;
  __device__ __forceinline__ static Word word(const Storage* p, size_t i) {
    return reinterpret_cast<const uint16_t*>(p)[i];
  }
};
template <>
struct MmaOperand<tf32_in> {
  using Storage = float;
  using Word = uint32_t;
  static constexpr int kStep = 8;
  __device__ __forceinline__ static Word word(const Storage* p, size_t i) {
    return to_tf32(__ldg(p + i));
  }
};

template <class In>
__device__ __forceinline__ void mma_step(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]);
template <>
__device__ __forceinline__ void mma_step<bf16>(float (&c)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  mma_m16n8k16_bf16(c, a, b);
}
template <>
__device__ __forceinline__ void mma_step<f16>(float (&c)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
  mma_m16n8k16_f16(c, a, b);
}
template <>
__device__ __forceinline__ void mma_step<tf32_in>(float (&c)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2]) {
  mma_m16n8k8_tf32(c, a, b);
}

constexpr int kMmaTile = 32, kMmaMaxChunk = 128, kMmaThreads = 256;

__device__ __forceinline__ size_t mma_partials_offset(int tickets) {
  return ((size_t)tickets * 4 + 255) / 256 * 256;
}

// The output (row, column) within the 32 x 32 tile of accumulator i of this thread: warp
// (wm, wn) = (warp / 4, warp % 4) holds rows 16 wm .. +15, columns 8 wn .. +7; lane
// (g, t) = (lane / 4, lane % 4) rows g, g + 8 and columns 2t, 2t + 1 (mma.cuh's C layout).
__device__ __forceinline__ int mma_row(int i) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return (warp / 4) * 16 + lane / 4 + 8 * (i / 2);
}
__device__ __forceinline__ int mma_col(int i) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return (warp % 4) * 8 + 2 * (lane % 4) + i % 2;
}

// The sum over K of this thread's four outputs of its block's tile, in `sum`; returns true
// in the block that holds the whole sum (see gemm_small.cu's splitk_tile, same workspace).
template <class In, bool TA, bool TB>
__device__ __forceinline__ bool mma_splitk_tile(const typename MmaOperand<In>::Storage* A,
                                                const typename MmaOperand<In>::Storage* B,
                                                uint32_t* __restrict__ tickets,
                                                float* __restrict__ partials, int M, int N,
                                                int K, int splits, int k_chunk, float (&sum)[4]) {
  using Op = MmaOperand<In>;
  using Word = typename Op::Word;
  // Row pitch: 4 words (32-bit) past a multiple of 32 banks, so a fragment load's 8 rows
  // g x 4 columns t fall in 32 distinct banks.
  constexpr int kPitch = kMmaMaxChunk + (sizeof(Word) == 2 ? 8 : 4);
  __align__(16) __shared__ Word As[kMmaTile][kPitch];  // As[m][k]: op(A)
  __align__(16) __shared__ Word Bs[kMmaTile][kPitch];  // Bs[n][k]: op(B) transposed
  __shared__ bool is_last;
  int tid = threadIdx.x;
  int m0 = blockIdx.y * kMmaTile, n0 = blockIdx.x * kMmaTile;
  int k_begin = blockIdx.z * k_chunk;
  int k_end = min(K, k_begin + k_chunk);

  // The whole chunk at once, predicated; a warp reads consecutive addresses of the stored
  // matrix whichever operand is transposed.
#pragma unroll
  for (int i = 0; i < kMmaMaxChunk * kMmaTile / kMmaThreads; ++i) {
    int idx = tid + i * kMmaThreads;
    int am = TA ? idx % kMmaTile : idx / kMmaMaxChunk;
    int ak = TA ? idx / kMmaTile : idx % kMmaMaxChunk;
    int m = m0 + am, k = k_begin + ak;
    As[am][ak] = (m < M && k < k_end)
                     ? Op::word(A, TA ? (size_t)k * M + m : (size_t)m * K + k)
                     : Word(0);
    int bn = TB ? idx / kMmaMaxChunk : idx % kMmaTile;
    int bk = TB ? idx % kMmaMaxChunk : idx / kMmaTile;
    int n = n0 + bn, kb = k_begin + bk;
    Bs[bn][bk] = (n < N && kb < k_end)
                     ? Op::word(B, TB ? (size_t)n * K + kb : (size_t)kb * N + n)
                     : Word(0);
  }
  __syncthreads();

  int warp = tid >> 5, lane = tid & 31, g = lane / 4, t = lane % 4;
  int ra = (warp / 4) * 16 + g, rb = (warp % 4) * 8 + g;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int nk = k_end - k_begin;  // the steps past it multiply staged zeros
  for (int kk = 0; kk < nk; kk += Op::kStep) {
    uint32_t a[4], b[2];
    if constexpr (sizeof(Word) == 2) {  // two k per 32-bit register, the lower k low
      auto w = [](const Word* p) { return *reinterpret_cast<const uint32_t*>(p); };
      a[0] = w(&As[ra][kk + 2 * t]);
      a[1] = w(&As[ra + 8][kk + 2 * t]);
      a[2] = w(&As[ra][kk + 2 * t + 8]);
      a[3] = w(&As[ra + 8][kk + 2 * t + 8]);
      b[0] = w(&Bs[rb][kk + 2 * t]);
      b[1] = w(&Bs[rb][kk + 2 * t + 8]);
    } else {
      a[0] = As[ra][kk + t];
      a[1] = As[ra + 8][kk + t];
      a[2] = As[ra][kk + t + 4];
      a[3] = As[ra + 8][kk + t + 4];
      b[0] = Bs[rb][kk + t];
      b[1] = Bs[rb][kk + t + 4];
    }
    mma_step<In>(acc, a, b);
  }

  if (splits == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sum[i] = acc[i];
    return true;
  }

  int tile = blockIdx.y * gridDim.x + blockIdx.x;
  size_t plane = (size_t)M * N;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int m = m0 + mma_row(i), n = n0 + mma_col(i);
    if (m < M && n < N) partials[blockIdx.z * plane + (size_t)m * N + n] = acc[i];
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) is_last = atomicAdd(tickets + tile, 1u) == (uint32_t)(splits - 1);
  __syncthreads();
  if (!is_last) return false;
  if (tid == 0) tickets[tile] = 0u;
  // The partials in chunk order, 8 chunks' loads in flight at a time; absent ones read 0.
#pragma unroll
  for (int i = 0; i < 4; ++i) sum[i] = 0.0f;
  for (int z0 = 0; z0 < splits; z0 += 8) {
    float v[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int m = min(m0 + mma_row(i), M - 1), n = min(n0 + mma_col(i), N - 1);
      size_t o = (size_t)m * N + n;
#pragma unroll
      for (int q = 0; q < 8; ++q)
        v[i][q] = z0 + q < splits ? __ldcg(partials + (z0 + q) * plane + o) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int q = 0; q < 8; ++q) sum[i] += v[i][q];
  }
  return true;
}

template <class In, class Out, bool TA, bool TB>
__device__ __forceinline__ void gemm_mma(const typename MmaOperand<In>::Storage* A,
                                         const typename MmaOperand<In>::Storage* B,
                                         const Out* __restrict__ bias, Out* __restrict__ Y,
                                         Out* __restrict__ Z, void* workspace, int M, int N, int K,
                                         int act, int splits, int k_chunk) {
  int tiles = gridDim.x * gridDim.y;
  uint32_t* tickets = reinterpret_cast<uint32_t*>(workspace);
  float* partials =
      reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + mma_partials_offset(tiles));
  float sum[4];
  if (!mma_splitk_tile<In, TA, TB>(A, B, tickets, partials, M, N, K, splits, k_chunk, sum))
    return;
  int m0 = blockIdx.y * kMmaTile, n0 = blockIdx.x * kMmaTile;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int m = m0 + mma_row(i), n = n0 + mma_col(i);
    if (m < M && n < N) {
      float z = sum[i] + (bias ? load<Out>(bias[n]) : 0.0f);
      size_t o = (size_t)m * N + n;
      if (Z) Z[o] = store<Out>(z);
      Y[o] = store<Out>(activate(z, act));
    }
  }
}

// The backward epilogue after the product (gemm_small.cu's gemm_epilogue_grad): dZ for
// the block's outputs, the tile's column sums of dZ as stored (its warps' 16 rows by
// shuffles over g, then the two row halves in order) into row blockIdx.y of `columns`,
// then the last tile of the column strip adds those rows in tile order into dbias.
template <class In, class Out, bool TA, bool TB>
__device__ __forceinline__ void gemm_epilogue_grad_mma(
    const typename MmaOperand<In>::Storage* A, const typename MmaOperand<In>::Storage* B,
    const typename MmaOperand<In>::Storage* __restrict__ saved,
    typename MmaOperand<In>::Storage* __restrict__ dZ, Out* __restrict__ dbias, void* workspace,
    int M, int N, int K, int act, int splits, int k_chunk) {
  using S = typename MmaOperand<In>::Storage;
  __shared__ float halves[2][kMmaTile];
  __shared__ bool strip_last;
  int tiles = gridDim.x * gridDim.y;
  uint32_t* tickets = reinterpret_cast<uint32_t*>(workspace);  // [tiles], then [strips]
  char* base = reinterpret_cast<char*>(workspace);
  float* columns = reinterpret_cast<float*>(base + mma_partials_offset(tiles + gridDim.x));
  float* partials = columns + ((size_t)gridDim.y * N + 63) / 64 * 64;
  float sum[4];
  if (!mma_splitk_tile<In, TA, TB>(A, B, tickets, partials, M, N, K, splits, k_chunk, sum))
    return;
  int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int m0 = blockIdx.y * kMmaTile, n0 = blockIdx.x * kMmaTile;
  float col[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int m = m0 + mma_row(i), n = n0 + mma_col(i);
    if (m < M && n < N) {
      size_t o = (size_t)m * N + n;
      S g = store<S>(activate_grad(sum[i], load<S>(saved[o]), act));
      dZ[o] = g;
      col[i % 2] += load<S>(g);
    }
  }
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {  // over g: lanes of one t hold the same columns
    col[0] += __shfl_xor_sync(0xffffffffu, col[0], o);
    col[1] += __shfl_xor_sync(0xffffffffu, col[1], o);
  }
  if (lane < 4) {
    halves[warp / 4][mma_col(0)] = col[0];
    halves[warp / 4][mma_col(1)] = col[1];
  }
  __syncthreads();
  if (tid < kMmaTile && n0 + tid < N)
    columns[(size_t)blockIdx.y * N + n0 + tid] = halves[0][tid] + halves[1][tid];
  __threadfence();
  __syncthreads();
  uint32_t* strip = tickets + tiles + blockIdx.x;
  if (tid == 0) strip_last = atomicAdd(strip, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!strip_last) return;
  if (tid == 0) *strip = 0u;
  if (tid < kMmaTile && n0 + tid < N) {
    float t = 0.0f;
    for (int r = 0; r < (int)gridDim.y; ++r) t += __ldcg(columns + (size_t)r * N + n0 + tid);
    dbias[n0 + tid] = store<Out>(t);
  }
}

}  // namespace aicfc

// One input type IN (its tag TAG) and output type OUT, the four transpose pairs.
#define AICFC_GEMM_MMA_PAIR(NAME, IN, STORAGE, OUT, SUFFIX, TA, TB)                             \
  extern "C" __global__ void __launch_bounds__(256) aicfc_gemm_mma_##NAME##_##SUFFIX(           \
      const STORAGE* A, const STORAGE* B, const OUT* bias, OUT* Y, OUT* Z, void* workspace,     \
      int32_t M, int32_t N, int32_t K, int32_t act, int32_t splits, int32_t k_chunk) {          \
    aicfc::gemm_mma<IN, OUT, TA, TB>(A, B, bias, Y, Z, workspace, M, N, K, act, splits,         \
                                     k_chunk);                                                  \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(256)                                             \
      aicfc_gemm_epilogue_grad_mma_##NAME##_##SUFFIX(                                           \
          const STORAGE* A, const STORAGE* B, const STORAGE* saved, STORAGE* dZ, OUT* dbias,    \
          void* workspace, int32_t M, int32_t N, int32_t K, int32_t act, int32_t splits,        \
          int32_t k_chunk) {                                                                    \
    aicfc::gemm_epilogue_grad_mma<IN, OUT, TA, TB>(A, B, saved, dZ, dbias, workspace, M, N, K, \
                                                   act, splits, k_chunk);                       \
  }

#define AICFC_GEMM_MMA(NAME, IN, STORAGE, OUT)                      \
  AICFC_GEMM_MMA_PAIR(NAME, IN, STORAGE, OUT, nn, false, false)     \
  AICFC_GEMM_MMA_PAIR(NAME, IN, STORAGE, OUT, nt, false, true)      \
  AICFC_GEMM_MMA_PAIR(NAME, IN, STORAGE, OUT, tn, true, false)      \
  AICFC_GEMM_MMA_PAIR(NAME, IN, STORAGE, OUT, tt, true, true)

AICFC_GEMM_MMA(bf16, aicfc::bf16, aicfc::bf16, aicfc::bf16)
AICFC_GEMM_MMA(bf16_f32, aicfc::bf16, aicfc::bf16, float)
AICFC_GEMM_MMA(f16, aicfc::f16, aicfc::f16, aicfc::f16)
AICFC_GEMM_MMA(f16_f32, aicfc::f16, aicfc::f16, float)
AICFC_GEMM_MMA(tf32, aicfc::tf32_in, float, float)
