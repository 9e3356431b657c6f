// Row kernels: a team of blockDim.x threads (a multiple of 32, at most 1024) works on
// one row, blockDim.y rows per block (layernorm.cu, cross_entropy.cu). A team of 32 is
// a warp and reduces with shuffles alone; a wider team adds its warps' values through
// shared memory in warp order. Every reduction here has a fixed order, so a row's
// result does not depend on timing.
#pragma once

#include "common.cuh"

namespace aicfc {

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// `v` reduced over the calling thread's team; every thread of the team gets the same
// bits (a butterfly gives each lane the same operands in the same order, and the warps'
// values are then combined in warp order). scratch: 32 floats of shared memory. Every
// thread of the block calls it (a team wider than a warp synchronises the block).
template <typename Op>
__device__ __forceinline__ float team_reduce(float v, float* scratch, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (blockDim.x == 32) return v;
  int warps = (int)(blockDim.x >> 5);
  int first = (int)threadIdx.y * warps;
  int warp = first + (int)(threadIdx.x >> 5);
  __syncthreads();  // the previous call's readers are done with scratch
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  float t = scratch[first];
  for (int w = 1; w < warps; ++w) t = op(t, scratch[first + w]);
  return t;
}

__device__ __forceinline__ float team_sum(float v, float* scratch) {
  return team_reduce(v, scratch, SumOp());
}

__device__ __forceinline__ float team_max(float v, float* scratch) {
  return team_reduce(v, scratch, MaxOp());
}

}  // namespace aicfc
