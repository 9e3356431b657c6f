// A CPU emulation of the CUDA execution model, for checking kernels' index math
// without a GPU (test/python/gpu/cuda_emu.py builds it with g++).
//
// Each CUDA thread of a block is one std::thread; blocks run one after another, so
// `__shared__` (defined as `static`) is shared by the block's threads. __syncthreads
// is a std::barrier over the block, warp shuffles exchange through a per-warp buffer
// between two barriers over the warp; a thread that returns early drops out of both
// barriers (as exited threads do on sm_70+). Memory is host memory; __ldg/__ldcg are
// plain loads, atomicAdd is a std::atomic_ref. Not a timing model and not a race
// detector: it runs the kernel's arithmetic and indexing as written.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <math.h>

#include <cmath>
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

namespace emu {

struct Block {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> exchange;  // one float per thread, for shuffles
};

inline Block* current = nullptr;
inline thread_local int linear_tid = 0;

inline void launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  gridDim = grid;
  blockDim = block;
  unsigned nthreads = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.block = std::make_unique<std::barrier<>>(nthreads);
        for (unsigned w = 0; w < (nthreads + 31) / 32; ++w)
          b.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, nthreads - 32 * w)));
        b.exchange.assign(nthreads, 0.0f);
        current = &b;
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < nthreads; ++t)
          threads.emplace_back([&, t] {
            blockIdx = {bx, by, bz};
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            linear_tid = (int)t;
            body();
            b.block->arrive_and_drop();
            b.warps[t / 32]->arrive_and_drop();
          });
        for (auto& th : threads) th.join();
        current = nullptr;
      }
}

}  // namespace emu

inline void __syncthreads() { emu::current->block->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

inline float __shfl_xor_sync(unsigned, float v, int offset) {
  int t = emu::linear_tid, w = t / 32;
  emu::current->exchange[t] = v;
  emu::current->warps[w]->arrive_and_wait();
  float got = emu::current->exchange[(t & ~31) | ((t & 31) ^ offset)];
  emu::current->warps[w]->arrive_and_wait();
  return got;
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
inline float expf(float x) { return std::exp(x); }
inline float logf(float x) { return std::log(x); }
inline float erff(float x) { return std::erf(x); }
inline float fmaf(float a, float b, float c) { return std::fma(a, b, c); }
inline float fmaxf(float a, float b) { return std::fmax(a, b); }
using std::max;
using std::min;
