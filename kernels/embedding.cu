// Embedding: rows of a table gathered by integer ids, and its deterministic backward.
//
// Operands: table [V, D] float32 row-major, ids [N] int32 or int64 (the label types of
// graph.cross_entropy; N = the product of the ids' dims), out / dout [N, D] float32.
//
// aicfc_embedding_f32_{i32,i64}: out[n, :] = table[ids[n], :] (torch.nn.functional
//   .embedding). An id outside [0, V) (possible only for ids already on the device: the
//   sync path checks host ids) gives a NaN row and reads nothing outside the table.
//   ABI: (ids [N], table [V, D], out [N, D], int32 N, int32 V, int32 D) (graph.embedding's
//   operand order).
//   Grid: ceil(N / 8) blocks (or fewer: grid-stride) of 256 threads, a warp per row,
//   lanes over 16-byte columns (D a multiple of 4 and 16-byte aligned buffers) or
//   single ones.
//
// The backward, dtable[v, :] = sum over n with ids[n] = v of dout[n, :], in two
// launches with no atomics (the result is bit-identical from run to run):
// aicfc_embedding_grad_chunks_f32_{i32,i64}: the positions are cut into C =
//   ceil(N / chunk) chunks of `chunk` consecutive positions (chunk <= 256). Block c
//   sorts its chunk's ids stably (each position's rank is the count of (id, n) pairs
//   before it, 256 comparisons from shared memory), so equal ids form segments in
//   increasing n; it writes the chunk's column of the slot map (map[v][c] = the
//   segment of id v in chunk c, or -1), and each warp sums a segment's dout rows in
//   increasing n into one partial row of 128 columns (grid y: the column slice).
//   Invalid ids are sorted last and dropped.
//   ABI: (dout [N, D], ids [N], workspace, int32 N, int32 V, int32 D, int32 chunk).
//   Grid: (C, ceil(D / 128)), 256 threads.
// aicfc_embedding_grad_combine_f32: dtable[v, slice] = the sum of v's partials over the
//   chunks: `split` warps share one (v, slice), each adding the present partials of a
//   contiguous range of chunks in increasing c, and the ranges' sums are added in range
//   order; every row of dtable is written (zero where v does not occur).
//   ABI: (dtable [V, D], workspace, int32 N, int32 V, int32 D, int32 chunk, int32 split).
//   Grid: ceil(V ceil(D / 128) / (8 / split)) blocks of 256 threads; split is 1, 2, 4
//   or 8 (8 when there are few (v, slice) pairs for the device, as for V = 65).
// So dtable[v] = sum over ranges (sum over chunks c in the range (sum over n in chunk
// c with ids[n] = v, n increasing)), each sum from 0.0 left to right: with one chunk
// (N <= chunk) that is the plain sum in increasing n, as np.add.at adds.
// Workspace (no zeroing needed: every entry read was written by the same replay):
//   int32 map [V][C] from byte 0, float partials [C][min(chunk, V)][D] from byte
//   256 ceil(4 V C / 256).
// Cost, N = 64 x 256 = 16,384, D = 384, chunk 256 (C = 64): V = 65: launch 1 reads dout
// once (25 MB) and writes at most 64 x 65 partial rows (6.4 MB), launch 2 reads them and
// writes 100 KB; V = 50,257: launch 1 writes the 12.9 MB map and about N partial rows
// (25 MB), launch 2 reads both and writes the 77 MB table, which is the floor of any
// dense gradient of that table.
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kThreads = 256;
constexpr int kMaxChunk = 256;
constexpr int kSlice = 128;  // columns per warp task: 32 lanes x 4
constexpr int kNone = 0x7fffffff;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ int cdiv(int a, int b) { return (a + b - 1) / b; }

__device__ __forceinline__ size_t map_bytes(int V, int C) {
  return ((size_t)V * C * 4 + 255) / 256 * 256;
}

// The four columns of slice `c0` that lane `lane` holds: c0 + 4 lane + [0, 4) (VEC 4)
// or c0 + lane + 32 u (VEC 1); columns >= D read as 0 and are not written.
template <int VEC>
__device__ __forceinline__ void load4(const float* __restrict__ row, int c0, int lane, int D,
                                      float v[4]) {
  if constexpr (VEC == 4) {
    int c = c0 + 4 * lane;
    float4 q = c < D ? __ldg(reinterpret_cast<const float4*>(row + c)) : make_float4(0, 0, 0, 0);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int c = c0 + lane + 32 * u;
      v[u] = c < D ? __ldg(row + c) : 0.0f;
    }
  }
}

template <int VEC>
__device__ __forceinline__ void store4(float* row, int c0, int lane, int D, const float v[4]) {
  if constexpr (VEC == 4) {
    int c = c0 + 4 * lane;
    if (c < D) *reinterpret_cast<float4*>(row + c) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int c = c0 + lane + 32 * u;
      if (c < D) row[c] = v[u];
    }
  }
}

template <int VEC, typename L>
__device__ void embedding_rows(const float* __restrict__ table, const L* __restrict__ ids,
                               float* __restrict__ out, int N, int V, int D) {
  int lane = (int)(threadIdx.x & 31);
  int warps = (int)(gridDim.x * (blockDim.x >> 5));
  const float nan = aicfc::quiet_nan();
  for (int n = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)); n < N; n += warps) {
    long long id = (long long)ids[n];
    bool ok = id >= 0 && id < V;
    const float* src = table + (size_t)(ok ? id : 0) * D;
    float* dst = out + (size_t)n * D;
    if constexpr (VEC == 4) {
      for (int c = 4 * lane; c < D; c += 128) {
        float4 q = ok ? __ldg(reinterpret_cast<const float4*>(src + c))
                      : make_float4(nan, nan, nan, nan);
        *reinterpret_cast<float4*>(dst + c) = q;
      }
    } else {
      for (int c = lane; c < D; c += 32) dst[c] = ok ? __ldg(src + c) : nan;
    }
  }
}

struct ChunkShared {
  int key[kMaxChunk];    // the chunk's ids in position order (kNone: invalid or absent)
  int skey[kMaxChunk];   // sorted by (id, position)
  int spos[kMaxChunk];   // the positions, in the same order
  int flag[kMaxChunk];   // 1 where a segment starts
  int heads[kMaxChunk + 1];  // segment s is [heads[s], heads[s + 1]) of the sorted order
  int nseg;
};

template <int VEC, typename L>
__device__ void grad_chunks(const float* __restrict__ dout, const L* __restrict__ ids,
                            char* __restrict__ ws, int N, int V, int D, int chunk,
                            ChunkShared& sh) {
  const int C = cdiv(N, chunk), S = min(chunk, V);
  int* map = reinterpret_cast<int*>(ws);
  float* partials = reinterpret_cast<float*>(ws + map_bytes(V, C));
  const int c = (int)blockIdx.x, slice = (int)blockIdx.y, t = (int)threadIdx.x;
  const int n0 = c * chunk, cnt = min(chunk, N - n0);
  int k = kNone;
  if (t < cnt) {
    long long id = (long long)ids[n0 + t];
    k = id >= 0 && id < V ? (int)id : kNone;
  }
  sh.key[t] = k;
  __syncthreads();
  if (t < cnt) {
    int r = 0;
    for (int m = 0; m < cnt; ++m) {
      int km = sh.key[m];
      r += (km < k) || (km == k && m < t);
    }
    sh.skey[r] = k;
    sh.spos[r] = n0 + t;
  }
  __syncthreads();
  bool head = t < cnt && sh.skey[t] != kNone && (t == 0 || sh.skey[t - 1] != sh.skey[t]);
  sh.flag[t] = head ? 1 : 0;
  __syncthreads();
  if (head) {
    int seg = 0;
    for (int m = 0; m < t; ++m) seg += sh.flag[m];
    sh.heads[seg] = t;
  }
  if (t == 0) {
    int nseg = 0, nvalid = 0;
    for (int m = 0; m < cnt; ++m) {
      nseg += sh.flag[m];
      nvalid += sh.skey[m] != kNone;
    }
    sh.nseg = nseg;
    sh.heads[nseg] = nvalid;
  }
  __syncthreads();
  const int nseg = sh.nseg;
  if (slice == 0) {  // uniform over the block
    for (int v = t; v < V; v += kThreads) map[(size_t)v * C + c] = -1;
    __syncthreads();  // orders the -1s before the segments' slots
    if (t < nseg) map[(size_t)sh.skey[sh.heads[t]] * C + c] = t;
  }
  const int warp = t >> 5, lane = t & 31, c0 = slice * kSlice;
  for (int s = warp; s < nseg; s += kThreads / 32) {
    int lo = sh.heads[s], hi = sh.heads[s + 1];
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = lo; i < hi; i += 4) {
      float v[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (i + j < hi) load4<VEC>(dout + (size_t)sh.spos[i + j] * D, c0, lane, D, v[j]);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (i + j < hi) {
#pragma unroll
          for (int u = 0; u < 4; ++u) acc[u] += v[j][u];
        }
    }
    store4<VEC>(partials + ((size_t)c * S + s) * D, c0, lane, D, acc);
  }
}

template <int VEC>
__device__ void grad_combine(float* __restrict__ dtable, const char* __restrict__ ws, int N,
                             int V, int D, int chunk, int split, float4 (*red)[32]) {
  const int C = cdiv(N, chunk), S = min(chunk, V), G = cdiv(D, kSlice);
  const int* map = reinterpret_cast<const int*>(ws);
  const float* partials = reinterpret_cast<const float*>(ws + map_bytes(V, C));
  const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
  const long long pair = (long long)blockIdx.x * (8 / split) + warp / split;
  const int q = warp % split;
  const bool active = pair < (long long)V * G;  // uniform over the warp
  const int v = active ? (int)(pair / G) : 0, c0 = active ? (int)(pair % G) * kSlice : 0;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (active) {
    int lo = (int)((long long)q * C / split), hi = (int)((long long)(q + 1) * C / split);
    for (int base = lo; base < hi; base += 32) {
      int k = base + lane < hi ? __ldg(map + (size_t)v * C + base + lane) : -1;
      unsigned present = __ballot_sync(kFull, k >= 0);
      while (present) {
        // Up to four present chunks in increasing order, their loads in flight together.
        float val[4][4];
        bool has[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          has[j] = present != 0;
          if (has[j]) {
            int b = __ffs(present) - 1;
            present &= present - 1;
            int slot = __shfl_sync(kFull, k, b);
            load4<VEC>(partials + ((size_t)(base + b) * S + slot) * D, c0, lane, D, val[j]);
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (has[j]) {
#pragma unroll
            for (int u = 0; u < 4; ++u) acc[u] += val[j][u];
          }
      }
    }
  }
  if (split == 1) {
    if (active) store4<VEC>(dtable + (size_t)v * D, c0, lane, D, acc);
    return;
  }
  red[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  if (active && q == 0) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int r = 0; r < split; ++r) {
      float4 p = red[warp + r][lane];
      t[0] += p.x;
      t[1] += p.y;
      t[2] += p.z;
      t[3] += p.w;
    }
    store4<VEC>(dtable + (size_t)v * D, c0, lane, D, t);
  }
}

// The instances for D and the buffers' alignment (uniform over the grid).
template <typename L>
__device__ __forceinline__ void embedding(const float* table, const L* ids, float* out, int N,
                                          int V, int D) {
  if (D % 4 == 0 && aicfc::aligned16(table) && aicfc::aligned16(out))
    embedding_rows<4, L>(table, ids, out, N, V, D);
  else
    embedding_rows<1, L>(table, ids, out, N, V, D);
}

template <typename L>
__device__ __forceinline__ void embedding_grad_chunks(const float* dout, const L* ids,
                                                      void* workspace, int N, int V, int D,
                                                      int chunk) {
  __shared__ ChunkShared sh;
  char* ws = reinterpret_cast<char*>(workspace);
  if (D % 4 == 0 && aicfc::aligned16(dout))
    grad_chunks<4, L>(dout, ids, ws, N, V, D, chunk, sh);
  else
    grad_chunks<1, L>(dout, ids, ws, N, V, D, chunk, sh);
}

}  // namespace

// Grid: ceil(N / 8) blocks (or fewer), 256 threads.
// Grid (launch 1): (ceil(N / chunk), ceil(D / 128)), 256 threads.
#define AICFC_EMBEDDING(LT, CT)                                                                \
  extern "C" __global__ void __launch_bounds__(kThreads) aicfc_embedding_f32_##LT(            \
      const CT* ids, const float* table, float* out, int32_t N, int32_t V, int32_t D) {        \
    embedding<CT>(table, ids, out, N, V, D);                                                   \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads) aicfc_embedding_grad_chunks_f32_##LT( \
      const float* dout, const CT* ids, void* workspace, int32_t N, int32_t V, int32_t D,      \
      int32_t chunk) {                                                                         \
    embedding_grad_chunks<CT>(dout, ids, workspace, N, V, D, chunk);                           \
  }

AICFC_EMBEDDING(i32, int32_t)
AICFC_EMBEDDING(i64, int64_t)

// Grid (launch 2): ceil(V ceil(D / 128) / (8 / split)) blocks, 256 threads.
extern "C" __global__ void __launch_bounds__(kThreads)
    aicfc_embedding_grad_combine_f32(float* dtable, const void* workspace, int32_t N, int32_t V,
                                     int32_t D, int32_t chunk, int32_t split) {
  __shared__ float4 red[kThreads / 32][32];
  const char* ws = reinterpret_cast<const char*>(workspace);
  if (D % 4 == 0 && aicfc::aligned16(dtable))
    grad_combine<4>(dtable, ws, N, V, D, chunk, split, red);
  else
    grad_combine<1>(dtable, ws, N, V, D, chunk, split, red);
}
