// The whole train step of a small MLP in one persistent kernel (issue 14, way 2):
// forward (Linear + activation per layer), softmax cross-entropy (mean) and its
// gradient, backward (dX, dW, db per layer) and the Adam/AdamW update of every
// parameter, with a grid-wide barrier between dependent phases
// (docs/design.md#fused-mlp-train-step). It computes what autodiff.mlp_train_step's
// NumPy reference computes (runtime/reference.py mlp_train_step: the unfused ops in
// order), products in float32 FMA (the order of the sums differs from NumPy's).
//
// aicfc_mlp_train_step_f32: ABI (workspace, const int64 meta*).
//   meta: kGlobal fields (pointers and counts, below), then kLayer fields per layer.
//   Layer l computes Z = H[l-1] W^T + b (W [N, K] row-major, b [N] or absent),
//   H[l] = act(Z) (the `act` codes of common.cuh); the last layer's act is none and its
//   H is the logits. dZ[L] = (softmax(logits) - onehot(y)) * dloss / M; dZ[l-1] =
//   act'(dZ[l] W, saved[l-1]) (saved: H or Z, what the activation's gradient reads,
//   dialects/activation_table.py); dW = dZ^T H[l-1], db = column sums of dZ; then
//   optim.cu's adam_update of every element with the step counters, hyperparameters,
//   grad_scale and apply read from device memory at each launch.
//
// Phases (P = 2 L, L = layers), each a list of 16x16 tiles that the blocks take in turn
// (tile t by block t mod grid), a grid barrier after each but the last:
//   fwd(l), l = 1 .. L-1     H[l] (and Z[l] where it is saved)
//   loss                     16-row tasks: the logits rows in shared memory, their
//                            log-softmax, the row's -log p[y] and dZ[L]
//   bwd(l), l = L .. 2       dZ[l-1] tiles; and the dW, db and Adam tiles of layer l+1
//                            (its W was last read by bwd(l+1), one phase before); in
//                            bwd(L), block 0 adds the row losses (in row order)
//   last                     dW, db and Adam of layers 2 and 1; block 0 writes every
//                            step counter t = step + 1
// A parameter is updated in place only after the phase that last reads it, so its
// outputs may alias its inputs (alias policy of the op). Every step counter is read
// by every block before the first barrier and written after it. Deterministic: fixed
// summation orders, no float atomics.
//
// Co-residency: the barrier spins, so every block must be resident at once. The
// launcher sizes the grid to at most one block per multiprocessor (__launch_bounds__
// (256, 1): registers and the dynamic shared memory, about 25 KB, always fit one
// block), so all blocks run concurrently whatever else the device runs (a block of
// another kernel finishes and frees its multiprocessor). A hand-written barrier rather
// than a cooperative launch: it is a plain kernel node that stream capture takes as
// any other, and the CPU emulator runs it with all blocks alive at once.
// Workspace (zeroed at load, left zeroed): uint32 arrive at byte 0, uint32 leave at 4.
//
// Limits (the registry's constraints; the launcher checks them): M <= 256 rows, every
// layer's N <= 256 (the loss task keeps 16 logits rows of N <= 256 in shared memory),
// any K; 256 threads a block.
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 16;  // output tile side
constexpr int kTileK = 64;  // K per shared-memory stage
constexpr int kMaxWidth = 256;
constexpr int kMaxLayers = 8;

// meta fields
constexpr int kGlobal = 16;
enum Global {
  G_X,
  G_Y,
  G_DLOSS,
  G_LOSS,
  G_LR,
  G_BETA1,
  G_BETA2,
  G_EPS,
  G_WD,
  G_SCALE,
  G_APPLY,
  G_ROWVAL,
  G_M,
  G_LAYERS,
  G_DECOUPLED,
};
constexpr int kLayer = 24;
enum LayerField {
  L_K,
  L_N,
  L_ACT,
  L_W,
  L_B,
  L_W_OUT,
  L_B_OUT,
  L_MW,
  L_VW,
  L_SW,
  L_MW_OUT,
  L_VW_OUT,
  L_SW_OUT,
  L_MB,
  L_VB,
  L_SB,
  L_MB_OUT,
  L_VB_OUT,
  L_SB_OUT,
  L_H,
  L_Z,
  L_DZ,
  L_SAVED,
};

struct Layer {
  int K, N, act;
  const float *W, *b;
  float *W_out, *b_out, *mW, *vW, *sW, *mW_out, *vW_out, *sW_out;
  float *mb, *vb, *sb, *mb_out, *vb_out, *sb_out;
  float *h, *z, *dz;
  const float* saved;
};

template <typename T>
__device__ __forceinline__ T* ptr(const int64_t* f, int k) {
  return reinterpret_cast<T*>(f[k]);
}

__device__ __forceinline__ Layer layer_at(const int64_t* meta, int l) {
  const int64_t* f = meta + kGlobal + (int64_t)l * kLayer;
  Layer L;
  L.K = (int)f[L_K];
  L.N = (int)f[L_N];
  L.act = (int)f[L_ACT];
  L.W = ptr<const float>(f, L_W);
  L.b = ptr<const float>(f, L_B);
  L.W_out = ptr<float>(f, L_W_OUT);
  L.b_out = ptr<float>(f, L_B_OUT);
  L.mW = ptr<float>(f, L_MW);
  L.vW = ptr<float>(f, L_VW);
  L.sW = ptr<float>(f, L_SW);
  L.mW_out = ptr<float>(f, L_MW_OUT);
  L.vW_out = ptr<float>(f, L_VW_OUT);
  L.sW_out = ptr<float>(f, L_SW_OUT);
  L.mb = ptr<float>(f, L_MB);
  L.vb = ptr<float>(f, L_VB);
  L.sb = ptr<float>(f, L_SB);
  L.mb_out = ptr<float>(f, L_MB_OUT);
  L.vb_out = ptr<float>(f, L_VB_OUT);
  L.sb_out = ptr<float>(f, L_SB_OUT);
  L.h = ptr<float>(f, L_H);
  L.z = ptr<float>(f, L_Z);
  L.dz = ptr<float>(f, L_DZ);
  L.saved = ptr<const float>(f, L_SAVED);
  return L;
}

// Shared memory of a block (dynamic: the emulator gives each block its own).
struct Smem {
  float a[kTileK * kTile];        // op(A) stage [kk][i]
  float b[kTileK * kTile];        // op(B) stage [kk][j]
  float red[kThreads];            // db partials
  float logits[kTile * kMaxWidth];  // the loss task's rows
  float step[2 * kMaxLayers];     // every parameter's step counter as read at the start
};

// Loads and stores of the barrier words that other blocks write (L1 is not coherent).
__device__ __forceinline__ unsigned load_volatile(unsigned* p) {
#ifdef AICFC_EMULATOR
  return atomicAdd(p, 0u);
#else
  return *reinterpret_cast<volatile unsigned*>(p);
#endif
}

// Every block waits here until all gridDim.x blocks have arrived the `k`-th time
// (k = 1, 2, ...): the arrive counter only grows within a launch.
__device__ __forceinline__ void grid_barrier(unsigned* arrive, unsigned k) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrive, 1u);
    unsigned target = k * gridDim.x;
    while (load_volatile(arrive) < target) {
    }
    __threadfence();
  }
  __syncthreads();
}

// After the last barrier: the block that leaves last resets the counters.
__device__ __forceinline__ void grid_leave(unsigned* ws) {
  if (threadIdx.x == 0) {
    unsigned ticket = atomicAdd(ws + 1, 1u);
    if (ticket == gridDim.x - 1) {
      ws[0] = 0u;
      ws[1] = 0u;
      __threadfence();
    }
  }
}

// C[i][j] = sum_k A(r0 + i, k) B(k, c0 + j) over k < K for the thread's (i, j) =
// (tid / 16, tid % 16); A and B return 0 outside the matrices. Each stage of kTileK is
// loaded into registers while the stage before it is multiplied (one L2 round trip
// per stage hidden behind the FMAs), then stored to shared memory.
template <typename FA, typename FB>
__device__ __forceinline__ float tile_dot(Smem& s, FA A, FB B, int r0, int c0, int K) {
  constexpr int kPer = kTileK * kTile / kThreads;  // elements of each operand per thread
  int tid = threadIdx.x, ti = tid / kTile, tj = tid % kTile;
  float ra[kPer], rb[kPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      int e = tid + u * kThreads, kk = e % kTileK, i = e / kTileK;
      ra[u] = A(r0 + i, k0 + kk);
      rb[u] = B(k0 + kk, c0 + i);
    }
  };
  fetch(0);
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTileK) {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      int e = tid + u * kThreads, kk = e % kTileK, i = e / kTileK;
      s.a[kk * kTile + i] = ra[u];
      s.b[kk * kTile + i] = rb[u];
    }
    __syncthreads();
    if (k0 + kTileK < K) fetch(k0 + kTileK);
#pragma unroll 16
    for (int kk = 0; kk < kTileK; ++kk) acc = fmaf(s.a[kk * kTile + ti], s.b[kk * kTile + tj], acc);
    __syncthreads();
  }
  return acc;
}

__device__ __forceinline__ int tiles(int rows, int cols) {
  return ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
}

// Forward tile t of layer L: H = act(X W^T + b) (Z too where it is saved).
__device__ void forward_tile(Smem& s, const Layer& L, const float* X, int M, int t) {
  int tn = (L.N + kTile - 1) / kTile;
  int r0 = (t / tn) * kTile, c0 = (t % tn) * kTile;
  int K = L.K, N = L.N;
  const float* W = L.W;
  auto A = [=](int r, int k) { return (r < M && k < K) ? X[(size_t)r * K + k] : 0.0f; };
  auto B = [=](int k, int c) { return (k < K && c < N) ? W[(size_t)c * K + k] : 0.0f; };
  float z = tile_dot(s, A, B, r0, c0, K);
  int r = r0 + threadIdx.x / kTile, c = c0 + threadIdx.x % kTile;
  if (r < M && c < N) {
    if (L.b) z += L.b[c];
    if (L.z) L.z[(size_t)r * N + c] = z;
    L.h[(size_t)r * N + c] = aicfc::activate(z, L.act);
  }
}

// The loss task of rows [r0, r0 + 16): logits = X W^T + b of the last layer into shared
// memory, then per row (a warp per two rows) the log-softmax, the row's log p[y] into
// rowval and dZ = (p - onehot(y)) * dloss / M. A label outside [0, N) makes rowval NaN
// and the row's dZ zero (as cross_entropy.cu).
__device__ void loss_task(Smem& s, const Layer& L, const float* X, const int32_t* y,
                          float dloss, float* rowval, int M, int task) {
  int r0 = task * kTile, K = L.K, N = L.N;
  const float* W = L.W;
  auto A = [=](int r, int k) { return (r < M && k < K) ? X[(size_t)r * K + k] : 0.0f; };
  auto B = [=](int k, int c) { return (k < K && c < N) ? W[(size_t)c * K + k] : 0.0f; };
  for (int c0 = 0; c0 < N; c0 += kTile) {
    float z = tile_dot(s, A, B, r0, c0, K);
    int i = threadIdx.x / kTile, c = c0 + threadIdx.x % kTile;
    if (c < N) s.logits[i * kMaxWidth + c] = z + (L.b ? L.b[c] : 0.0f);
  }
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float scale = dloss / (float)M;
  for (int i = warp; i < kTile; i += kThreads / 32) {
    int r = r0 + i;
    if (r >= M) continue;  // the whole warp skips
    const float* row = s.logits + i * kMaxWidth;
    float mx = aicfc::neg_inf();
    for (int c = lane; c < N; c += 32) mx = fmaxf(mx, row[c]);
    mx = aicfc::warp_max(mx);
    float sum = 0.0f;
    for (int c = lane; c < N; c += 32) sum += expf(row[c] - mx);
    sum = aicfc::warp_sum(sum);
    float lse = logf(sum);
    int label = y[r];
    bool ok = label >= 0 && label < N;
    for (int c = lane; c < N; c += 32) {
      float lsm = row[c] - mx - lse;
      float g = ok ? (expf(lsm) - (c == label ? 1.0f : 0.0f)) * scale : 0.0f;
      L.dz[(size_t)r * N + c] = g;
    }
    if (lane == 0) rowval[r] = ok ? row[label] - mx - lse : aicfc::quiet_nan();
  }
  __syncthreads();
}

// Backward tile t of dX through layer L: dZp = act'(dZ W, saved of the layer below).
__device__ void backward_tile(Smem& s, const Layer& L, const Layer& P, int M, int t) {
  int K = L.K, N = L.N;
  int tk = (K + kTile - 1) / kTile;
  int r0 = (t / tk) * kTile, c0 = (t % tk) * kTile;
  const float* dz = L.dz;
  const float* W = L.W;
  auto A = [=](int r, int n) { return (r < M && n < N) ? dz[(size_t)r * N + n] : 0.0f; };
  auto B = [=](int n, int c) { return (n < N && c < K) ? W[(size_t)n * K + c] : 0.0f; };
  float dy = tile_dot(s, A, B, r0, c0, N);
  int r = r0 + threadIdx.x / kTile, c = c0 + threadIdx.x % kTile;
  if (r < M && c < K) {
    size_t at = (size_t)r * K + c;
    P.dz[at] = P.act ? aicfc::activate_grad(dy, P.saved[at], P.act) : dy;
  }
}

struct Hyper {
  double lr, beta1, beta2, eps, wd;
  float scale;
  bool apply, decoupled;
};

// optim.cu's bias corrections for step counter value `step` (t = step + 1).
__device__ __forceinline__ void adam_constants(const Hyper& h, float step, float& step_size,
                                               float& bc2_sqrt) {
  double t = (double)step + 1.0;
  step_size = (float)(h.lr / (1.0 - pow(h.beta1, t)));
  bc2_sqrt = (float)sqrt(1.0 - pow(h.beta2, t));
}

// One element of reference.adam_step (optim.cu's adam_update, the same rounding).
__device__ __forceinline__ void adam_element(const Hyper& h, float step_size, float bc2_sqrt,
                                             float g, const float* p, const float* m,
                                             const float* v, float* p_out, float* m_out,
                                             float* v_out, size_t i) {
  if (!h.apply) {  // apply == 0: the outputs equal the inputs (nothing to do in place)
    if (p_out != p) p_out[i] = p[i];
    if (m_out != m) m_out[i] = m[i];
    if (v_out != v) v_out[i] = v[i];
    return;
  }
  float pp = p[i], mm = m[i], vv = v[i];
  float wd = (float)h.wd;
  g = __fmul_rn(g, h.scale);
  if (h.wd != 0.0 && h.decoupled)
    pp = __fmul_rn(pp, (float)(1.0 - h.lr * h.wd));
  else if (h.wd != 0.0)
    g = __fadd_rn(g, __fmul_rn(wd, pp));
  mm = __fadd_rn(mm, __fmul_rn((float)(1.0 - h.beta1), __fsub_rn(g, mm)));
  vv = __fadd_rn(__fmul_rn(vv, (float)h.beta2), __fmul_rn(__fmul_rn((float)(1.0 - h.beta2), g), g));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), bc2_sqrt), (float)h.eps);
  pp = __fsub_rn(pp, __fmul_rn(step_size, __fdiv_rn(mm, denom)));
  p_out[i] = pp;
  m_out[i] = mm;
  v_out[i] = vv;
}

// Update tile t of layer L (index l): dW = dZ^T X over the M rows, Adam on W; the tiles
// of the first column block also sum db (16 column sums, each over M rows in 16
// interleaved partials added in order) and update b.
__device__ void update_tile(Smem& s, const Layer& L, int l, const float* X, int M,
                            const Hyper& h, int t) {
  int K = L.K, N = L.N;
  int tk = (K + kTile - 1) / kTile;
  int r0 = (t / tk) * kTile, c0 = (t % tk) * kTile;
  const float* dz = L.dz;
  auto A = [=](int n, int m) { return (n < N && m < M) ? dz[(size_t)m * N + n] : 0.0f; };
  auto B = [=](int m, int k) { return (m < M && k < K) ? X[(size_t)m * K + k] : 0.0f; };
  float g = tile_dot(s, A, B, r0, c0, M);
  int n = r0 + threadIdx.x / kTile, k = c0 + threadIdx.x % kTile;
  float step_size, bc2_sqrt;
  if (n < N && k < K) {
    adam_constants(h, s.step[2 * l], step_size, bc2_sqrt);
    adam_element(h, step_size, bc2_sqrt, g, L.W, L.mW, L.vW, L.W_out, L.mW_out, L.vW_out,
                 (size_t)n * K + k);
  }
  if (c0 != 0 || L.b == nullptr) return;
  // db: thread (part, j) sums rows part, part + 16, ... of column r0 + j.
  int part = threadIdx.x / kTile, j = threadIdx.x % kTile, col = r0 + j;
  float acc = 0.0f;
  if (col < N)
    for (int m = part; m < M; m += kTile) acc += dz[(size_t)m * N + col];
  s.red[part * kTile + j] = acc;
  __syncthreads();
  if (part == 0 && col < N) {
    float db = 0.0f;
    for (int q = 0; q < kTile; ++q) db += s.red[q * kTile + j];
    adam_constants(h, s.step[2 * l + 1], step_size, bc2_sqrt);
    adam_element(h, step_size, bc2_sqrt, db, L.b, L.mb, L.vb, L.b_out, L.mb_out, L.vb_out,
                 (size_t)col);
  }
  __syncthreads();
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256, 1)
    aicfc_mlp_train_step_f32(unsigned* ws, const int64_t* __restrict__ meta) {
  AICFC_DYNAMIC_SHARED(Smem, sp);
  Smem& s = *sp;
  const int64_t* gf = meta;
  const float* x = ptr<const float>(gf, G_X);
  const int32_t* y = ptr<const int32_t>(gf, G_Y);
  float* rowval = ptr<float>(gf, G_ROWVAL);
  int M = (int)gf[G_M], nl = (int)gf[G_LAYERS];
  Hyper h;
  h.lr = *ptr<const double>(gf, G_LR);
  h.beta1 = *ptr<const double>(gf, G_BETA1);
  h.beta2 = *ptr<const double>(gf, G_BETA2);
  h.eps = *ptr<const double>(gf, G_EPS);
  h.wd = *ptr<const double>(gf, G_WD);
  h.scale = *ptr<const float>(gf, G_SCALE);
  h.apply = *ptr<const float>(gf, G_APPLY) != 0.0f;
  h.decoupled = gf[G_DECOUPLED] != 0;
  float dloss = *ptr<const float>(gf, G_DLOSS);
  if (threadIdx.x < 2 * nl) {
    Layer L = layer_at(meta, threadIdx.x / 2);
    const float* sc = threadIdx.x % 2 ? L.sb : L.sW;
    s.step[threadIdx.x] = sc ? sc[0] : 0.0f;
  }
  __syncthreads();
  unsigned barrier = 0;
  int G = gridDim.x, b = blockIdx.x;
  // forward
  for (int l = 0; l + 1 < nl; ++l) {
    Layer L = layer_at(meta, l);
    const float* X = l ? layer_at(meta, l - 1).h : x;
    for (int t = b; t < tiles(M, L.N); t += G) forward_tile(s, L, X, M, t);
    grid_barrier(ws, ++barrier);
  }
  {
    Layer L = layer_at(meta, nl - 1);
    const float* X = nl > 1 ? layer_at(meta, nl - 2).h : x;
    int tasks = (M + kTile - 1) / kTile;
    for (int t = b; t < tasks; t += G) loss_task(s, L, X, y, dloss, rowval, M, t);
    grid_barrier(ws, ++barrier);
  }
  // The loss: -mean of the rows' log p[y], the rows added in order by one thread.
  auto write_loss = [&] {
    if (b == 0 && threadIdx.x == 0) {
      float total = 0.0f;
      for (int r = 0; r < M; ++r) total += rowval[r];
      *ptr<float>(gf, G_LOSS) = -(total / (float)M);
    }
  };
  // backward: bwd(l) for layer index li = nl-1 .. 1 (dZ of layer li-1), with the update
  // of layer li+1 (whose W bwd(li+1) read last).
  for (int li = nl - 1; li >= 1; --li) {
    Layer L = layer_at(meta, li), P = layer_at(meta, li - 1);
    int nb = tiles(M, L.K);
    int nu = 0;
    Layer U;
    const float* UX = nullptr;
    if (li + 1 < nl) {
      U = layer_at(meta, li + 1);
      UX = layer_at(meta, li).h;
      nu = tiles(U.N, U.K);
    }
    for (int t = b; t < nb + nu; t += G) {
      if (t < nb)
        backward_tile(s, L, P, M, t);
      else
        update_tile(s, U, li + 1, UX, M, h, t - nb);
    }
    if (li == nl - 1) write_loss();
    grid_barrier(ws, ++barrier);
  }
  // last: the updates of layer indices 1 and 0 (just 0 for one layer)
  {
    int n1 = 0;
    Layer U1, U0 = layer_at(meta, 0);
    if (nl > 1) {
      U1 = layer_at(meta, 1);
      n1 = tiles(U1.N, U1.K);
    }
    int n0 = tiles(U0.N, U0.K);
    for (int t = b; t < n1 + n0; t += G) {
      if (t < n1)
        update_tile(s, U1, 1, U0.h, M, h, t);
      else
        update_tile(s, U0, 0, x, M, h, t - n1);
    }
    if (nl == 1) write_loss();
    if (b == 0 && threadIdx.x < 2 * nl) {
      Layer L = layer_at(meta, threadIdx.x / 2);
      const float* sc = threadIdx.x % 2 ? L.sb : L.sW;
      float* so = threadIdx.x % 2 ? L.sb_out : L.sW_out;
      if (sc && so) so[0] = h.apply ? s.step[threadIdx.x] + 1.0f : s.step[threadIdx.x];
    }
  }
  grid_leave(ws);
}
