// Low-precision storage types (bf16, f16) with fp32 math inside: every aicfc kernel that
// reads or writes a bf16/f16 buffer converts on load (`aicfc::load`, exact) and on store
// (`aicfc::store`, round to nearest even: cvt.rn, as ml_dtypes and the NumPy reference
// round), and computes in float between. Templates on the storage type T, so one kernel
// body serves f32, bf16 and f16 (float's conversions are the identity).
#pragma once

#ifndef AICFC_EMULATOR
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace aicfc {

using bf16 = __nv_bfloat16;
using f16 = __half;

template <class T>
__device__ __forceinline__ float load(T x);
template <>
__device__ __forceinline__ float load<float>(float x) { return x; }
template <>
__device__ __forceinline__ float load<bf16>(bf16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float load<f16>(f16 x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T store(float x);
template <>
__device__ __forceinline__ float store<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 store<bf16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ f16 store<f16>(float x) { return __float2half_rn(x); }

// Elementwise loops over n elements of storage types with fp32 math between (`f` maps
// floats to a float). Where every pointer is aligned to its 8-element pack (16 bytes for
// bf16/f16, 32 for float), each thread moves packs of 8 (LDG/STG.128: two-byte elements
// one at a time left the loops at about half the memory bandwidth), then the tail of
// n % 8 elements one at a time; grid-stride in both parts. Same values as the scalar loop.
template <class T>
struct alignas(8 * sizeof(T)) Pack8 {
  T v[8];
};

template <class T>
__device__ __forceinline__ bool pack_aligned(const void* p) {
  return (reinterpret_cast<uint64_t>(p) % sizeof(Pack8<T>)) == 0;
}

template <class T, class U, class F>
__device__ __forceinline__ void map1(const T* x, U* y, int64_t n, F f) {
  int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t packs = pack_aligned<T>(x) && pack_aligned<U>(y) ? n / 8 : 0;
  for (int64_t i = start; i < packs; i += stride) {
    Pack8<T> a = reinterpret_cast<const Pack8<T>*>(x)[i];
    Pack8<U> b;
#pragma unroll
    for (int k = 0; k < 8; ++k) b.v[k] = store<U>(f(load<T>(a.v[k])));
    reinterpret_cast<Pack8<U>*>(y)[i] = b;
  }
  for (int64_t i = 8 * packs + start; i < n; i += stride) y[i] = store<U>(f(load<T>(x[i])));
}

template <class T, class F>
__device__ __forceinline__ void map2(const T* a, const T* b, T* y, int64_t n, F f) {
  int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  bool aligned = pack_aligned<T>(a) && pack_aligned<T>(b) && pack_aligned<T>(y);
  int64_t packs = aligned ? n / 8 : 0;
  for (int64_t i = start; i < packs; i += stride) {
    Pack8<T> p = reinterpret_cast<const Pack8<T>*>(a)[i];
    Pack8<T> q = reinterpret_cast<const Pack8<T>*>(b)[i];
    Pack8<T> r;
#pragma unroll
    for (int k = 0; k < 8; ++k) r.v[k] = store<T>(f(load<T>(p.v[k]), load<T>(q.v[k])));
    reinterpret_cast<Pack8<T>*>(y)[i] = r;
  }
  for (int64_t i = 8 * packs + start; i < n; i += stride)
    y[i] = store<T>(f(load<T>(a[i]), load<T>(b[i])));
}

}  // namespace aicfc
