// A CPU emulation of the CUDA execution model, for checking kernels' index math
// without a GPU (test/python/gpu/cuda_emu.py builds it with g++).
//
// Each CUDA thread of a block is one std::thread; blocks run one after another on the
// same threads, so `__shared__` (defined as `static`) is shared by the block's threads.
// `launch_cooperative` instead runs every block's threads at once (a kernel with a grid
// barrier needs all blocks resident): each block has its own barriers and dynamic
// shared memory, but a static `__shared__` would be one for all blocks, so such kernels
// keep their shared memory in AICFC_DYNAMIC_SHARED.
// __syncthreads is a std::barrier over the block; warp shuffles and votes exchange
// through a per-warp buffer between two barriers over the warp; a thread that returns
// early drops out of both barriers (as exited threads do on sm_70+). Memory is host
// memory; __ldg/__ldcg are plain loads, atomicAdd is a std::atomic_ref. Dynamic shared
// memory (the launch's shared_mem bytes) is one zero-filled buffer per block, reached
// through AICFC_DYNAMIC_SHARED (common.cuh), since `extern __shared__` has no C++
// meaning. Not a timing model and not a race detector: it runs the kernel's arithmetic
// and indexing as written.
#pragma once

#define AICFC_EMULATOR 1

#include <algorithm>
#include <atomic>
#include <barrier>
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// The 16-byte word of elementwise.cu's byte copy.
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __constant__
#define __restrict__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

namespace emu {

struct Block {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<uint64_t> exchange;  // one word per thread, for shuffles and votes
  std::vector<std::max_align_t> dynamic;  // the launch's dynamic shared memory
};

inline thread_local Block* current = nullptr;
inline thread_local int linear_tid = 0;

// Fresh barriers (the block's and one per warp), shuffle words and zeroed dynamic shared
// memory for a block of `nthreads`.
inline void set_up_block(Block& b, unsigned nthreads, size_t shared_bytes) {
  b.block = std::make_unique<std::barrier<>>(nthreads);
  b.warps.clear();
  for (unsigned w = 0; w < (nthreads + 31) / 32; ++w)
    b.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, nthreads - 32 * w)));
  b.exchange.assign(nthreads, 0);
  b.dynamic.assign((shared_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t),
                   std::max_align_t{});
}

// The block's threads are made once per launch and run the blocks in turn: a control
// barrier (which no thread leaves) starts each block after thread 0 has set up its
// barriers and shared memory, and ends it once every thread is through.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& body,
                   size_t shared_bytes = 0) {
  gridDim = grid;
  blockDim = block;
  unsigned nthreads = block.x * block.y * block.z;
  unsigned nblocks = grid.x * grid.y * grid.z;
  Block b;
  std::barrier<> control(nthreads);
  auto set_up = [&] { set_up_block(b, nthreads, shared_bytes); };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      current = &b;
      threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      linear_tid = (int)t;
      for (unsigned i = 0; i < nblocks; ++i) {
        if (t == 0) set_up();
        control.arrive_and_wait();
        blockIdx = {i % grid.x, (i / grid.x) % grid.y, i / (grid.x * grid.y)};
        body();
        b.block->arrive_and_drop();
        b.warps[t / 32]->arrive_and_drop();
        control.arrive_and_wait();
      }
    });
  for (auto& th : threads) th.join();
}

// Every thread of every block alive at once (a cooperative launch): one std::thread per
// CUDA thread, the blocks' barriers and shared memory set up before any starts.
inline void launch_cooperative(dim3 grid, dim3 block, const std::function<void()>& body,
                               size_t shared_bytes = 0) {
  gridDim = grid;
  blockDim = block;
  unsigned nthreads = block.x * block.y * block.z;
  unsigned nblocks = grid.x * grid.y * grid.z;
  std::vector<Block> blocks(nblocks);
  for (Block& b : blocks) set_up_block(b, nthreads, shared_bytes);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < nblocks; ++i)
    for (unsigned t = 0; t < nthreads; ++t)
      threads.emplace_back([&, i, t] {
        current = &blocks[i];
        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        blockIdx = {i % grid.x, (i / grid.x) % grid.y, i / (grid.x * grid.y)};
        linear_tid = (int)t;
        body();
        current->block->arrive_and_drop();
        current->warps[t / 32]->arrive_and_drop();
      });
  for (auto& th : threads) th.join();
}

template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(current->dynamic.data());
}

// Lane `src` of the calling thread's warp sees `v`; returns what lane `src` offered.
template <typename T>
T exchange(T v, int src) {
  static_assert(sizeof(T) <= 8);
  int t = linear_tid, w = t / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  current->exchange[t] = bits;
  current->warps[w]->arrive_and_wait();
  uint64_t got = current->exchange[(t & ~31) | (src & 31)];
  current->warps[w]->arrive_and_wait();
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}

}  // namespace emu

inline void __syncthreads() { emu::current->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu::current->warps[emu::linear_tid / 32]->arrive_and_wait();
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int offset) {
  return emu::exchange(v, (emu::linear_tid & 31) ^ offset);
}
template <typename T>
inline T __shfl_sync(unsigned, T v, int src) {
  return emu::exchange(v, src);
}
// Every lane of the warp must be active (as the kernels' full-mask votes assume).
inline unsigned __ballot_sync(unsigned, int pred) {
  int t = emu::linear_tid, w = t / 32;
  emu::current->exchange[t] = pred ? 1 : 0;
  emu::current->warps[w]->arrive_and_wait();
  unsigned bits = 0;
  int lanes = (int)std::min<size_t>(32, emu::current->exchange.size() - (size_t)(t & ~31));
  for (int l = 0; l < lanes; ++l)
    if (emu::current->exchange[(t & ~31) | l]) bits |= 1u << l;
  emu::current->warps[w]->arrive_and_wait();
  return bits;
}
inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}

template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) { return *p; }

inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float expf(float x) { return std::exp(x); }
inline float exp2f(float x) { return std::exp2(x); }
inline float log2f(float x) { return std::log2(x); }
inline float sqrtf(float x) { return std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float fminf(float a, float b) { return std::fmin(a, b); }
inline float fabsf(float x) { return std::fabs(x); }
inline float logf(float x) { return std::log(x); }
inline float erff(float x) { return std::erf(x); }
inline float fmaf(float a, float b, float c) { return std::fma(a, b, c); }
inline float fmaxf(float a, float b) { return std::fmax(a, b); }
using std::max;
using std::min;

// bf16 and f16 storage (cuda_bf16.h, cuda_fp16.h): 16-bit words; float -> bf16 rounds to
// nearest even by integer arithmetic on the float's bits (NaN stays a quiet NaN), float
// -> f16 through the compiler's _Float16 (IEEE round to nearest even, inf past 65504).
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 x) {
  uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}
inline float __half2float(__half x) {
  _Float16 h;
  std::memcpy(&h, &x.bits, 2);
  return float(h);
}
inline __half __float2half_rn(float f) {
  _Float16 h = _Float16(f);
  __half out;
  std::memcpy(&out.bits, &h, 2);
  return out;
}
