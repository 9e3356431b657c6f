// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
// and the dropout keep rule of reference.dropout_keep, bit-identical to it: element i
// of a flat tensor keeps iff (word >> 8) >= round(p * 2^24), where word is output
// i % 4 of Philox4x32-10 with counter (i / 4 low, high, offset low, high) and key
// (seed low, high). Used by dropout.cu and attention.cu (dropout on the probabilities).
#pragma once

#include "common.cuh"

namespace aicfc {

__device__ __forceinline__ void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k0 += W0;
      k1 += W1;
    }
    uint32_t hi0 = __umulhi(M0, c[0]), lo0 = M0 * c[0];
    uint32_t hi1 = __umulhi(M1, c[2]), lo1 = M1 * c[2];
    uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
}

// The four words of Philox block `q` (flat elements 4q .. 4q + 3).
__device__ __forceinline__ void philox_block(uint64_t q, uint64_t offset, uint64_t seed,
                                             uint32_t w[4]) {
  w[0] = (uint32_t)q;
  w[1] = (uint32_t)(q >> 32);
  w[2] = (uint32_t)offset;
  w[3] = (uint32_t)(offset >> 32);
  philox4x32_10(w, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// round(p * 2^24) with round-half-to-even, as Python's round in reference.dropout_keep.
__device__ __forceinline__ uint32_t dropout_threshold(double p) {
  return (uint32_t)rint(p * 16777216.0);
}

}  // namespace aicfc
