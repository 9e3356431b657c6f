// Shared definitions of the aicfc CUDA kernels (included by every kernels/*.cu).
//
// Launch ABI (version AICFC_KERNEL_ABI_VERSION, checked by the CuPy backend when it
// loads a module): every extern "C" kernel takes its input buffers in the op's
// operand order, then its output buffers in result order, then its scalar
// parameters with the exact C types listed in runtime/registry_cuda.py. An absent
// optional buffer (a GEMM without bias) is passed as a null pointer. Kernels that
// need scratch memory (a deterministic cross-block reduction, a ticket counter) take
// one backend-owned workspace buffer right after the outputs; it is zeroed when the
// program is loaded and every kernel leaves it zeroed for the next replay. Sources are
// compiled by NVRTC (cupy.RawModule) at run time and by nvcc in CI, so they use no
// standard header under NVRTC.
#pragma once

#define AICFC_KERNEL_ABI_VERSION 1

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif

// Every module exports its ABI version as a device constant read at load time.
#define AICFC_EXPORT_ABI_VERSION \
  extern "C" __constant__ int aicfc_abi_version = AICFC_KERNEL_ABI_VERSION;

// Dynamic shared memory (the launch's shared_mem bytes, 16-byte aligned) as `T* name`.
// The CPU emulator (test/python/gpu/cuda_emu.h) gives each block a buffer of its own,
// since `extern __shared__` has no meaning in plain C++.
#ifdef AICFC_EMULATOR
#define AICFC_DYNAMIC_SHARED(T, name) T* name = emu::dynamic_shared<T>()
#else
#define AICFC_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char aicfc_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(aicfc_dynamic_shared_)
#endif

// Activations, one row each as in dialects/activation_table.py (test_activation_table.py
// checks that these codes equal the table's). AICFC_ACT_<NAME> is the `act` scalar of the
// GEMM and epilogue kernels (0: none); aicfc::<name>(x) is y = act(x) and
// aicfc::<name>_grad(dy, s) is dx = dy act'(.), with s what the table says its gradient
// saves (the input x or the output y). AICFC_ACTIVATIONS(X) lists every row as
// X(name, code): elementwise.cu makes the kernels aicfc_<name>_f32 and
// aicfc_<name>_grad_f32 of each, activate() and activate_grad() switch over them.
#define AICFC_ACT_NONE 0
#define AICFC_ACT_RELU 1
#define AICFC_ACT_GELU 2
#define AICFC_ACT_TANH 3
#define AICFC_ACT_SILU 4

#define AICFC_ACTIVATIONS(X) \
  X(relu, AICFC_ACT_RELU)    \
  X(gelu, AICFC_ACT_GELU)    \
  X(tanh, AICFC_ACT_TANH)    \
  X(silu, AICFC_ACT_SILU)

namespace aicfc {

constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// relu: y = max(x, 0); dx = dy [y > 0] (reference.relu, relu_grad).
__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : 0.0f; }
__device__ __forceinline__ float relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks and Gimpel 2016), as reference.gelu.
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kSqrtHalf)); }

// d gelu / dx = Phi(x) + x phi(x), as reference.gelu_grad.
__device__ __forceinline__ float gelu_deriv(float x) {
  float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
  float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
  return cdf + x * pdf;
}
__device__ __forceinline__ float gelu_grad(float dy, float x) { return dy * gelu_deriv(x); }

// tanh: dx = dy (1 - y^2) (reference.tanh, tanh_grad).
__device__ __forceinline__ float tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float tanh_grad(float dy, float y) { return dy * (1.0f - y * y); }

// silu: y = x sigmoid(x) (Elfwing et al. 2018); dx = dy s (1 + x (1 - s)), s = sigmoid(x)
// (reference.silu, silu_grad).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float silu_grad(float dy, float x) {
  float s = sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

#define AICFC_ACTIVATE_CASE(NAME, CODE) \
  case CODE:                            \
    return aicfc::NAME(z);
#define AICFC_ACTIVATE_GRAD_CASE(NAME, CODE) \
  case CODE:                                 \
    return aicfc::NAME##_grad(dy, s);

// y = act(z) for the `act` code (none: z).
__device__ __forceinline__ float activate(float z, int act) {
  switch (act) {
    AICFC_ACTIVATIONS(AICFC_ACTIVATE_CASE)
    default:
      return z;
  }
}

// dz = dy act'(.) for the `act` code, s what the activation's gradient saves (none: dy).
__device__ __forceinline__ float activate_grad(float dy, float s, int act) {
  switch (act) {
    AICFC_ACTIVATIONS(AICFC_ACTIVATE_GRAD_CASE)
    default:
      return dy;
  }
}

// Element (row r, col c) of op(X) where X is stored row-major with `ld` columns.
template <bool T>
__device__ __forceinline__ float load_op(const float* __restrict__ x, int r, int c, int rows,
                                         int cols, int ld) {
  if (r >= rows || c >= cols) return 0.0f;
  return T ? __ldg(x + (size_t)c * ld + r) : __ldg(x + (size_t)r * ld + c);
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// Whether a (possibly null) pointer allows 16-byte vector accesses.
__device__ __forceinline__ bool aligned16(const void* p) {
  return ((unsigned long long)p & 15ull) == 0;
}

// Sum over a warp with shuffles (all 32 lanes active).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nwarps ? scratch[lane] : 0.0f;
  return warp_sum(t);
}

// The "last block finishes" pattern (CUDA sample threadFenceReduction): each block
// publishes its partial result, then takes a ticket; the block that draws the last
// ticket sees every partial and resets the counter so that a replayed graph starts
// from zero again. Returns true in every thread of the last block (of any block shape:
// the first thread of the block takes the ticket).
__device__ __forceinline__ bool last_block_done(uint32_t* counter) {
  __shared__ bool is_last;
  bool first = (threadIdx.x | threadIdx.y | threadIdx.z) == 0;
  __threadfence();
  __syncthreads();
  if (first) {
    uint32_t ticket = atomicAdd(counter, 1u);
    is_last = (ticket == gridDim.x * gridDim.y - 1);
  }
  __syncthreads();
  if (is_last && first) *counter = 0u;
  return is_last;
}

}  // namespace aicfc
