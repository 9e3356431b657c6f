// Warp-level tensor-core products (mma.sync, sm_80+) and the shared-memory fragment loads
// (ldmatrix) that feed them, with a portable body for the CPU emulator.
//
// Fragment layouts are PTX ISA 8.x section 9.7.14.5 ("Matrix fragments for mma.m16n8k16"
// and "for mma.m16n8k8"). With g = lane / 4 and t = lane % 4:
//   m16n8k16 .bf16 / .f16, A 16 x 16 row-major, four 32-bit registers of two elements each
//     (the lower column in the low half): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1],
//     a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9];
//   B 16 x 8 "col" (element (k, n)): b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g];
//   m16n8k8 .tf32, A 16 x 8: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4],
//     a[3] = A[g+8][t+4]; B 8 x 8: b[0] = B[t][g], b[1] = B[t+4][g];
//   C, D 16 x 8 float32 (both shapes): c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1].
// The products accumulate in float32 (D = A B + C).
//
// ldmatrix_x4(r, p): lane l passes the address of row l % 8 of 8 x 8 b16 matrix l / 8; lane
// l receives in r[i] the elements (l / 4, 2 (l % 4) .. +1) of matrix i. ldmatrix_x4_trans:
// r[i] holds elements (2 (l % 4) .. +1, l / 4) of matrix i (the matrix transposed). Rows are
// 16 bytes, 16-byte aligned, in shared memory.
//
// Under AICFC_EMULATOR (test/python/gpu/cuda_emu.h) every function is the same warp
// collective written with __shfl_sync: the emulator checks a kernel's fragment index math
// and its arithmetic (sums of exact products in float32, in k order; the hardware's order
// of the float32 additions is unspecified, so tests compare within a tolerance).
#pragma once

#include "common.cuh"
#include "lowp.cuh"

namespace aicfc {

// The 16 bits of a bf16 / f16 value.
__device__ __forceinline__ uint32_t bits_of(bf16 x) {
#ifdef AICFC_EMULATOR
  return x.bits;
#else
  return __bfloat16_as_ushort(x);
#endif
}
__device__ __forceinline__ uint32_t bits_of(f16 x) {
#ifdef AICFC_EMULATOR
  return x.bits;
#else
  return __half_as_ushort(x);
#endif
}

// Two floats as packed bf16 / f16 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return bits_of(store<bf16>(lo)) | (bits_of(store<bf16>(hi)) << 16);
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  return bits_of(store<f16>(lo)) | (bits_of(store<f16>(hi)) << 16);
}

// float32 -> tf32 (cvt.rna: round to nearest, ties away from zero; 10 mantissa bits kept).
__device__ __forceinline__ uint32_t to_tf32(float x) {
#ifdef AICFC_EMULATOR
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
#else
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#endif
}

#ifdef AICFC_EMULATOR
namespace mma_emu {
inline float half_of(uint32_t word, int hi, bool is_bf16) {
  uint16_t bits = uint16_t(hi ? word >> 16 : word & 0xffffu);
  if (is_bf16) return __bfloat162float(__nv_bfloat16{bits});
  return __half2float(__half{bits});
}
inline float tf32_of(uint32_t word) {
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}
// D += A B over k = 16 (two-element registers): every lane fetches, for each k, the A
// elements of its rows g and g + 8 and the B elements of its columns 2t and 2t + 1.
inline void m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf) {
  int lane = emu::linear_tid & 31, g = lane / 4, t = lane % 4;
  for (int k = 0; k < 16; ++k) {
    int hi = k % 2, reg = k / 8, src = (k % 8) / 2;
    uint32_t a_lo = __shfl_sync(0xffffffffu, a[2 * reg], g * 4 + src);
    uint32_t a_hi = __shfl_sync(0xffffffffu, a[2 * reg + 1], g * 4 + src);
    uint32_t b0 = __shfl_sync(0xffffffffu, b[reg], (2 * t) * 4 + src);
    uint32_t b1 = __shfl_sync(0xffffffffu, b[reg], (2 * t + 1) * 4 + src);
    float x0 = half_of(a_lo, hi, bf), x8 = half_of(a_hi, hi, bf);
    float y0 = half_of(b0, hi, bf), y1 = half_of(b1, hi, bf);
    c[0] += x0 * y0;
    c[1] += x0 * y1;
    c[2] += x8 * y0;
    c[3] += x8 * y1;
  }
}
}  // namespace mma_emu
#endif

// D (= c) += A B, m16n8k16, bf16 inputs, float32 accumulate.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2]) {
#ifdef AICFC_EMULATOR
  mma_emu::m16n8k16(c, a, b, true);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// D (= c) += A B, m16n8k16, f16 inputs, float32 accumulate.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&c)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
#ifdef AICFC_EMULATOR
  mma_emu::m16n8k16(c, a, b, false);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// D (= c) += A B, m16n8k8, tf32 inputs (to_tf32 words), float32 accumulate.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&c)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
#ifdef AICFC_EMULATOR
  int lane = emu::linear_tid & 31, g = lane / 4, t = lane % 4;
  for (int k = 0; k < 8; ++k) {
    int reg = k / 4, src = k % 4;
    float x0 = mma_emu::tf32_of(__shfl_sync(0xffffffffu, a[2 * reg], g * 4 + src));
    float x8 = mma_emu::tf32_of(__shfl_sync(0xffffffffu, a[2 * reg + 1], g * 4 + src));
    float y0 = mma_emu::tf32_of(__shfl_sync(0xffffffffu, b[reg], (2 * t) * 4 + src));
    float y1 = mma_emu::tf32_of(__shfl_sync(0xffffffffu, b[reg], (2 * t + 1) * 4 + src));
    c[0] += x0 * y0;
    c[1] += x0 * y1;
    c[2] += x8 * y0;
    c[3] += x8 * y1;
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

#ifdef AICFC_EMULATOR
namespace mma_emu {
// Lane l's 32-bit word (row, 2 col .. +1) of matrix i, rows given by lanes 8 i .. 8 i + 7.
inline void ldmatrix(uint32_t (&r)[4], const void* row, bool trans) {
  int lane = emu::linear_tid & 31;
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int j = 0; j < 2; ++j) {
      int rr = trans ? 2 * (lane % 4) + j : lane / 4;
      int cc = trans ? lane / 4 : 2 * (lane % 4) + j;
      const void* p = __shfl_sync(0xffffffffu, row, 8 * i + rr);
      e[j] = static_cast<const uint16_t*>(p)[cc];
    }
    r[i] = uint32_t(e[0]) | (uint32_t(e[1]) << 16);
  }
}
}  // namespace mma_emu
#endif

// Four 8 x 8 b16 matrices from shared memory into A or B fragments (see the header).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#ifdef AICFC_EMULATOR
  mma_emu::ldmatrix(r, row, false);
#else
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}

// As ldmatrix_x4, each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#ifdef AICFC_EMULATOR
  mma_emu::ldmatrix(r, row, true);
#else
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}

}  // namespace aicfc
