// Dropout with a counter-based generator: Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011), bit-identical to
// reference.dropout_keep.
//
// Element i keeps iff (word >> 8) >= round(p * 2^24), where word is output i % 4 of
// Philox4x32-10 with counter (i / 4 low, high, offset low, high) and key (seed low,
// high). The offset is read from device memory (the state `rng.offset`, advanced by
// the step itself), so every replay of a captured graph draws a new mask; the seed
// is a compile-time property. Kept elements are scaled by 1 / (1 - p).
//
// aicfc_dropout_{f32,bf16,f16}: (x, offset int64 [], out, double p, int64 seed, int64 n);
// one template on the storage type, the scaling in fp32 and one rounding on the store
// (kernels/lowp.cuh).
// The same kernel runs dropout_grad (dy in place of x): the mask is recomputed.
// Grid: ceil(n / 4 / 256) blocks (capped, grid-stride) of 256 threads; each thread
// draws one Philox block of 4 words for 4 consecutive elements.
#include "common.cuh"
#include "lowp.cuh"
#include "philox.cuh"

AICFC_EXPORT_ABI_VERSION

template <class T>
__device__ __forceinline__ void dropout(const T* x, const int64_t* offset, T* out, double p,
                                        int64_t seed, int64_t n) {
  uint64_t off = (uint64_t)offset[0];
  uint64_t key = (uint64_t)seed;
  uint32_t threshold = aicfc::dropout_threshold(p);
  float scale = (float)(1.0 / (1.0 - p));
  int64_t nq = (n + 3) / 4;
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < nq;
       q += (int64_t)gridDim.x * blockDim.x) {
    uint32_t c[4];
    aicfc::philox_block((uint64_t)q, off, key, c);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t i = q * 4 + j;
      if (i < n) {
        out[i] = aicfc::store<T>((c[j] >> 8) >= threshold ? aicfc::load<T>(x[i]) * scale : 0.0f);
      }
    }
  }
}

#define AICFC_DROPOUT(SUFFIX, T)                                                          \
  extern "C" __global__ void __launch_bounds__(256) aicfc_dropout_##SUFFIX(              \
      const T* x, const int64_t* offset, T* out, double p, int64_t seed, int64_t n) {    \
    dropout<T>(x, offset, out, p, seed, n);                                               \
  }

AICFC_DROPOUT(f32, float)
AICFC_DROPOUT(bf16, aicfc::bf16)
AICFC_DROPOUT(f16, aicfc::f16)
