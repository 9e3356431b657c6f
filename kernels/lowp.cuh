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

}  // namespace aicfc
