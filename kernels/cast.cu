// graph.cast between float32 and the low-precision storage types (reference.cast).
//
// ABI: aicfc_cast_<from>_<to> (x, y, int64 n) for (from, to) in f32 -> bf16, bf16 -> f32,
// f32 -> f16, f16 -> f32: y[i] = x[i] converted, a grid-stride loop over n elements (grid
// from the launcher; 8 elements a thread where aligned: kernels/lowp.cuh map1). A narrowing cast rounds to nearest even (cvt.rn; f16 overflows to
// inf past 65504); a widening cast is exact (kernels/lowp.cuh).
#include "common.cuh"
#include "lowp.cuh"

AICFC_EXPORT_ABI_VERSION

template <class From, class To>
__device__ __forceinline__ void cast_loop(const From* x, To* y, int64_t n) {
  aicfc::map1(x, y, n, [](float v) { return v; });
}

#define AICFC_CAST(FROM_NAME, FROM, TO_NAME, TO)                                        \
  extern "C" __global__ void aicfc_cast_##FROM_NAME##_##TO_NAME(const FROM* x, TO* y,  \
                                                                 int64_t n) {          \
    cast_loop<FROM, TO>(x, y, n);                                                      \
  }

AICFC_CAST(f32, float, bf16, aicfc::bf16)
AICFC_CAST(bf16, aicfc::bf16, f32, float)
AICFC_CAST(f32, float, f16, aicfc::f16)
AICFC_CAST(f16, aicfc::f16, f32, float)
