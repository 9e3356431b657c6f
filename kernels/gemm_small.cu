// Latency kernels for small GEMMs: Y = act(op(A) op(B) + bias), Z = op(A) op(B) + bias.
//
// The operands and epilogue of gemm.cu (row-major float32; op(A) [M, K], op(B) [K, N];
// bias [N] or null; Z, the pre-activation, or null), for products too small to fill
// the GPU with 64x64 or 128x128 tiles: the 784-256-256-10 MLP at batch 128 has 2 to 32
// such tiles per product for 132 multiprocessors, and its 10-wide layer leaves a tile
// mostly empty.
//
// aicfc_gemm_skinny_f32_{nn,nt,tn,tt}: one side is at most 32 (`mode` says which):
//   mode 0, K <= 32: one thread per output, a K-term dot product (a dX = dY W with
//                    K = 10 outputs of the next layer);
//   mode 1, N <= 32: one warp per row m of Y: lanes stride over K, one accumulator per
//                    column, then warp-shuffle sums (a 10-wide layer's forward);
//   mode 2, M <= 32: one warp per column n of Y, likewise (its dW = dY^T X).
//   ABI: (A, B, bias|null, Y, Z|null, int32 M, int32 N, int32 K, int32 act, int32 mode).
//   Grid: 256-thread blocks; mode 0 ceil(M N / 256), mode 1 ceil(M / 8), mode 2
//   ceil(N / 8) of them (8 warps per block).
// aicfc_gemm_splitk_f32_{nn,nt,tn,tt}: 32x32 output tiles, K cut into `splits` chunks of
//   `k_chunk` (a multiple of 32, at most 128: the block loads its whole chunk of both
//   operands into shared memory with every load in flight at once, 34 KB), one block per
//   (tile, chunk), so a product of 32 tiles still runs on ~2 blocks per multiprocessor. Each block writes its partial tile to the
//   workspace; the last block of a tile to finish (a per-tile ticket, as common.cuh's
//   last_block_done) adds the partials in chunk order, so the sum is deterministic, and
//   applies the epilogue. splits = 1 writes Y directly. Workspace: uint32 tickets, one
//   per tile, from byte 0 (zeroed at load; the last block resets its ticket, so a replayed
//   graph starts from zero), then float partials [splits][M][N] from byte
//   256 * ceil(4 * tiles / 256).
//   ABI: (A, B, bias|null, Y, Z|null, workspace, int32 M, int32 N, int32 K, int32 act,
//   int32 splits, int32 k_chunk). Grid: (ceil(N / 32), ceil(M / 32), splits), 256 threads.
// aicfc_gemm_epilogue_grad_f32_{nn,nt,tn,tt}: autodiff.gemm_epilogue_grad, the split-K
//   kernel's product with the backward epilogue (reference.gemm_epilogue_grad):
//   dZ = (op(A) op(B)) * act'(saved) and dbias = column sums of dZ, in one launch. The
//   block that holds a tile's whole sum writes dZ and the tile's column sums (row order)
//   to the workspace; the last tile of each 32-column strip to finish (a second, per-strip
//   ticket) adds them in tile order into dbias, so dbias is deterministic too. Workspace:
//   uint32 tickets, one per tile then one per strip, from byte 0 (zeroed at load, reset
//   by their last block), then float column sums [ceil(M / 32)][N] from byte
//   256 * ceil(4 * (tiles + strips) / 256) (rounded up to 64 floats), then the partials
//   [splits][M][N] when splits > 1.
//   ABI: (A, B, saved, dZ, dbias, workspace, int32 M, int32 N, int32 K, int32 act,
//   int32 splits, int32 k_chunk). Grid and block as the split-K kernel's.
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace aicfc {

// op(A)[m, k] with A stored [M, K], or [K, M] when transposed.
template <bool TA>
__device__ __forceinline__ float op_a(const float* __restrict__ A, int m, int k, int M, int K) {
  return TA ? __ldg(A + (size_t)k * M + m) : __ldg(A + (size_t)m * K + k);
}

// op(B)[k, n] with B stored [K, N], or [N, K] when transposed.
template <bool TB>
__device__ __forceinline__ float op_b(const float* __restrict__ B, int k, int n, int K, int N) {
  return TB ? __ldg(B + (size_t)n * K + k) : __ldg(B + (size_t)k * N + n);
}

__device__ __forceinline__ void store_output(const float* __restrict__ bias, float* __restrict__ Y,
                                             float* __restrict__ Z, int N, int m, int n, float acc,
                                             int act) {
  float z = acc + (bias ? __ldg(bias + n) : 0.0f);
  size_t o = (size_t)m * N + n;
  if (Z) Z[o] = z;
  Y[o] = activate(z, act);
}

constexpr int kSkinny = 32;     // the short side's bound: one accumulator per lane's column

// Mode 0: one thread per output.
template <bool TA, bool TB>
__device__ __forceinline__ void skinny_short_k(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               const float* __restrict__ bias,
                                               float* __restrict__ Y, float* __restrict__ Z, int M,
                                               int N, int K, int act) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)M * N) return;
  int m = (int)(idx / N), n = (int)(idx % N);
  float acc = 0.0f;
#pragma unroll 4
  for (int k = 0; k < K; ++k) acc = fmaf(op_a<TA>(A, m, k, M, K), op_b<TB>(B, k, n, K, N), acc);
  store_output(bias, Y, Z, N, m, n, acc, act);
}

// Modes 1 and 2: one warp per index w of the long side (a row m when SHORT_N, else a
// column n); lane l accumulates k = l, l + 32, ... for every short index s < S <= NS.
// The loads of the NS short-side values are unconditional (indices past S are clamped
// to S - 1, their sums are dropped): a load behind `if (s < S)` would be a branch, and
// the warp would wait for each load in turn instead of having them all in flight.
template <bool TA, bool TB, bool SHORT_N, int NS>
__device__ __forceinline__ void skinny_warp(const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ Y,
                                            float* __restrict__ Z, int M, int N, int K, int act) {
  int lane = threadIdx.x & 31;
  int w = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  int L = SHORT_N ? M : N, S = SHORT_N ? N : M;
  if (w >= L) return;  // the whole warp leaves together: the shuffles below see 32 lanes
  float acc[NS];
#pragma unroll
  for (int s = 0; s < NS; ++s) acc[s] = 0.0f;
#pragma unroll 4
  for (int k = lane; k < K; k += 32) {
    float p = SHORT_N ? op_a<TA>(A, w, k, M, K) : op_b<TB>(B, k, w, K, N);
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      int sc = s < S ? s : S - 1;
      float q = SHORT_N ? op_b<TB>(B, k, sc, K, N) : op_a<TA>(A, sc, k, M, K);
      acc[s] = fmaf(p, q, acc[s]);
    }
  }
  float mine = 0.0f;
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    if (s < S) {  // uniform over the warp
      float v = warp_sum(acc[s]);
      if (lane == s) mine = v;
    }
  }
  if (lane < S) {
    int m = SHORT_N ? w : lane, n = SHORT_N ? lane : w;
    store_output(bias, Y, Z, N, m, n, mine, act);
  }
}

// The short side's bound NS as a template argument: 8, 16 or 32 accumulators.
template <bool TA, bool TB, bool SHORT_N>
__device__ __forceinline__ void skinny_warp_any(const float* A, const float* B, const float* bias,
                                                float* Y, float* Z, int M, int N, int K, int act) {
  int S = SHORT_N ? N : M;
  if (S <= 8)
    skinny_warp<TA, TB, SHORT_N, 8>(A, B, bias, Y, Z, M, N, K, act);
  else if (S <= 16)
    skinny_warp<TA, TB, SHORT_N, 16>(A, B, bias, Y, Z, M, N, K, act);
  else
    skinny_warp<TA, TB, SHORT_N, kSkinny>(A, B, bias, Y, Z, M, N, K, act);
}

constexpr int kTile = 32, kMaxChunk = 128, kThreads = 256;

__device__ __forceinline__ size_t splitk_partials_offset(int tickets) {
  return ((size_t)tickets * 4 + 255) / 256 * 256;
}

// Floats of gemm_epilogue_grad's column sums [tile rows][N], rounded up to 64 (256 bytes).
__device__ __forceinline__ size_t epilogue_grad_columns(int tile_rows, int N) {
  return ((size_t)tile_rows * N + 63) / 64 * 64;
}

// The sum over K of this block's 2x2 outputs (rows m0 + ty + 16 i, columns n0 + tx + 16 j)
// of its 32x32 tile, in `sum`. Returns true in the block that holds the whole sum: the only
// one when splits == 1, else the last of the tile's `splits` blocks to finish (it adds the
// partials in chunk order, so the sum is deterministic, and resets the tile's ticket).
template <bool TA, bool TB>
__device__ __forceinline__ bool splitk_tile(const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            uint32_t* __restrict__ tickets,
                                            float* __restrict__ partials, int M, int N, int K,
                                            int splits, int k_chunk, float (&sum)[2][2]) {
  __shared__ float As[kMaxChunk][kTile + 1];  // As[k][m], the block's whole K chunk
  __shared__ float Bs[kMaxChunk][kTile + 1];  // Bs[k][n]
  __shared__ bool is_last;
  int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  int k_begin = blockIdx.z * k_chunk;
  int k_end = min(K, k_begin + k_chunk);  // k_chunk <= kMaxChunk (runtime/cuda_launch.py)
  float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

  // The whole chunk at once (16 elements of each operand per thread, every load in flight
  // together; predicated, not branched). A warp reads 32 consecutive addresses of the
  // stored matrix whichever operand is transposed.
#pragma unroll
  for (int i = 0; i < kMaxChunk * kTile / kThreads; ++i) {
    int idx = tid + i * kThreads;
    int am = TA ? idx % kTile : idx / kMaxChunk, ak = TA ? idx / kTile : idx % kMaxChunk;
    As[ak][am] =
        (m0 + am < M && k_begin + ak < k_end) ? op_a<TA>(A, m0 + am, k_begin + ak, M, K) : 0.0f;
    int bn = TB ? idx / kMaxChunk : idx % kTile, bk = TB ? idx % kMaxChunk : idx / kTile;
    Bs[bk][bn] =
        (n0 + bn < N && k_begin + bk < k_end) ? op_b<TB>(B, k_begin + bk, n0 + bn, K, N) : 0.0f;
  }
  __syncthreads();
  int nk = k_end - k_begin;
#pragma unroll 8
  for (int k = 0; k < nk; ++k) {
    float a0 = As[k][ty], a1 = As[k][ty + 16];
    float b0 = Bs[k][tx], b1 = Bs[k][tx + 16];
    acc[0][0] = fmaf(a0, b0, acc[0][0]);
    acc[0][1] = fmaf(a0, b1, acc[0][1]);
    acc[1][0] = fmaf(a1, b0, acc[1][0]);
    acc[1][1] = fmaf(a1, b1, acc[1][1]);
  }

  if (splits == 1) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) sum[i][j] = acc[i][j];
    return true;
  }

  int tile = blockIdx.y * gridDim.x + blockIdx.x;
  size_t plane = (size_t)M * N;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) partials[blockIdx.z * plane + (size_t)m * N + n] = acc[i][j];
    }
  __threadfence();
  __syncthreads();
  if (tid == 0) is_last = atomicAdd(tickets + tile, 1u) == (uint32_t)(splits - 1);
  __syncthreads();
  if (!is_last) return false;
  if (tid == 0) tickets[tile] = 0u;
  // Add the partials in chunk order, 8 chunks' loads in flight at a time (a plain
  // `s += load` loop would wait for each load in turn); absent ones read as 0.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) sum[i][j] = 0.0f;
  for (int z0 = 0; z0 < splits; z0 += 8) {
    float v[2][2][8];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        int m = min(m0 + ty + 16 * i, M - 1), n = min(n0 + tx + 16 * j, N - 1);
        size_t o = (size_t)m * N + n;
#pragma unroll
        for (int q = 0; q < 8; ++q)
          v[i][j][q] = z0 + q < splits ? __ldcg(partials + (z0 + q) * plane + o) : 0.0f;
      }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int q = 0; q < 8; ++q) sum[i][j] += v[i][j][q];
  }
  return true;
}

template <bool TA, bool TB>
__device__ __forceinline__ void gemm_splitk(const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ Y,
                                            float* __restrict__ Z, void* workspace, int M, int N,
                                            int K, int act, int splits, int k_chunk) {
  int tiles = gridDim.x * gridDim.y;
  uint32_t* tickets = reinterpret_cast<uint32_t*>(workspace);
  float* partials =
      reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + splitk_partials_offset(tiles));
  float sum[2][2];
  if (!splitk_tile<TA, TB>(A, B, tickets, partials, M, N, K, splits, k_chunk, sum)) return;
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) store_output(bias, Y, Z, N, m, n, sum[i][j], act);
    }
}

// The backward epilogue after the product: dZ = sum * act'(saved) for the block's outputs,
// the tile's column sums of dZ (its 32 rows, through shared memory in row order) into row
// blockIdx.y of `columns` [tile rows][N], then the last tile of the column strip to finish
// (a per-strip ticket) adds those rows in tile order into dbias: deterministic.
template <bool TA, bool TB>
__device__ __forceinline__ void gemm_epilogue_grad(
    const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ saved,
    float* __restrict__ dZ, float* __restrict__ dbias, void* workspace, int M, int N, int K,
    int act, int splits, int k_chunk) {
  __shared__ float rows[16][kTile + 1];
  __shared__ bool strip_last;
  int tiles = gridDim.x * gridDim.y;
  uint32_t* tickets = reinterpret_cast<uint32_t*>(workspace);  // [tiles], then [strips]
  char* base = reinterpret_cast<char*>(workspace);
  float* columns = reinterpret_cast<float*>(base + splitk_partials_offset(tiles + gridDim.x));
  float* partials = columns + epilogue_grad_columns(gridDim.y, N);
  float sum[2][2];
  if (!splitk_tile<TA, TB>(A, B, tickets, partials, M, N, K, splits, k_chunk, sum)) return;
  int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  float col[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) {
        size_t o = (size_t)m * N + n;
        float g = activate_grad(sum[i][j], __ldg(saved + o), act);
        dZ[o] = g;
        col[j] += g;
      }
    }
  rows[ty][tx] = col[0];
  rows[ty][tx + 16] = col[1];
  __syncthreads();
  if (tid < kTile && n0 + tid < N) {
    float t = 0.0f;
#pragma unroll
    for (int r = 0; r < 16; ++r) t += rows[r][tid];
    columns[(size_t)blockIdx.y * N + n0 + tid] = t;
  }
  __threadfence();
  __syncthreads();
  uint32_t* strip = tickets + tiles + blockIdx.x;
  if (tid == 0) strip_last = atomicAdd(strip, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!strip_last) return;
  if (tid == 0) *strip = 0u;
  if (tid < kTile && n0 + tid < N) {
    float t = 0.0f;
    for (int r = 0; r < (int)gridDim.y; ++r) t += __ldcg(columns + (size_t)r * N + n0 + tid);
    dbias[n0 + tid] = t;
  }
}

}  // namespace aicfc

#define AICFC_GEMM_SMALL(SUFFIX, TA, TB)                                                       \
  extern "C" __global__ void __launch_bounds__(256) aicfc_gemm_skinny_f32_##SUFFIX(          \
      const float* A, const float* B, const float* bias, float* Y, float* Z, int32_t M,         \
      int32_t N, int32_t K, int32_t act, int32_t mode) {                                        \
    if (mode == 1)                                                                              \
      aicfc::skinny_warp_any<TA, TB, true>(A, B, bias, Y, Z, M, N, K, act);                     \
    else if (mode == 2)                                                                         \
      aicfc::skinny_warp_any<TA, TB, false>(A, B, bias, Y, Z, M, N, K, act);                    \
    else                                                                                        \
      aicfc::skinny_short_k<TA, TB>(A, B, bias, Y, Z, M, N, K, act);                            \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) aicfc_gemm_splitk_f32_##SUFFIX(          \
      const float* A, const float* B, const float* bias, float* Y, float* Z, void* workspace,   \
      int32_t M, int32_t N, int32_t K, int32_t act, int32_t splits, int32_t k_chunk) {          \
    aicfc::gemm_splitk<TA, TB>(A, B, bias, Y, Z, workspace, M, N, K, act, splits, k_chunk);     \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) aicfc_gemm_epilogue_grad_f32_##SUFFIX(    \
      const float* A, const float* B, const float* saved, float* dZ, float* dbias,              \
      void* workspace, int32_t M, int32_t N, int32_t K, int32_t act, int32_t splits,            \
      int32_t k_chunk) {                                                                        \
    aicfc::gemm_epilogue_grad<TA, TB>(A, B, saved, dZ, dbias, workspace, M, N, K, act, splits,  \
                                      k_chunk);                                                 \
  }

AICFC_GEMM_SMALL(nn, false, false)
AICFC_GEMM_SMALL(nt, false, true)
AICFC_GEMM_SMALL(tn, true, false)
AICFC_GEMM_SMALL(tt, true, true)
