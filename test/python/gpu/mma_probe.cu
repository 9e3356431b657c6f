// One warp's products through kernels/mma.cuh, for test_mma_fragments.py: the fragments
// are loaded from global memory by the layout formulas of mma.cuh's header (or through
// ldmatrix from shared memory) and D is stored by the same formulas, so the test's NumPy
// product checks both the layouts and the arithmetic, on the emulator and on the GPU.
#include "common.cuh"
#include "mma.cuh"

AICFC_EXPORT_ABI_VERSION

using namespace aicfc;

// The C / D fragment of a 16 x 8 float matrix d (row-major): loaded, or stored back.
__device__ void c_fragment(float* d, int g, int t, float (&c)[4], bool store) {
  float* at[4] = {d + g * 8 + 2 * t, d + g * 8 + 2 * t + 1, d + (g + 8) * 8 + 2 * t,
                  d + (g + 8) * 8 + 2 * t + 1};
  for (int i = 0; i < 4; ++i) {
    if (store)
      *at[i] = c[i];
    else
      c[i] = *at[i];
  }
}

// a [16][16] row-major, b [16][8] row-major (element (k, n)), d [16][8] float; 32 threads.
// bf16 != 0: bf16 inputs, else f16. via_ldmatrix != 0: fragments through ldmatrix.
extern "C" __global__ void aicfc_probe_mma_m16n8k16(const uint16_t* a, const uint16_t* b,
                                                    float* d, int bf16_in, int via_ldmatrix) {
  __align__(16) __shared__ uint16_t as[16][16];
  __align__(16) __shared__ uint16_t bs[16][8];
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32) as[i / 16][i % 16] = a[i];
  for (int i = lane; i < 128; i += 32) bs[i / 8][i % 8] = b[i];
  __syncthreads();
  uint32_t af[4], bf[2];
  if (via_ldmatrix) {
    ldmatrix_x4(af, &as[(lane % 8) + 8 * ((lane / 8) % 2)][8 * (lane / 16)]);
    uint32_t r[4];
    ldmatrix_x4_trans(r, &bs[(lane % 8) + 8 * ((lane / 8) % 2)][0]);
    bf[0] = r[0];
    bf[1] = r[1];
  } else {
    auto pair = [&](int row, int col) { return uint32_t(as[row][col]) | (uint32_t(as[row][col + 1]) << 16); };
    af[0] = pair(g, 2 * t);
    af[1] = pair(g + 8, 2 * t);
    af[2] = pair(g, 2 * t + 8);
    af[3] = pair(g + 8, 2 * t + 8);
    bf[0] = uint32_t(bs[2 * t][g]) | (uint32_t(bs[2 * t + 1][g]) << 16);
    bf[1] = uint32_t(bs[2 * t + 8][g]) | (uint32_t(bs[2 * t + 9][g]) << 16);
  }
  float c[4];
  c_fragment(d, g, t, c, false);
  if (bf16_in)
    mma_m16n8k16_bf16(c, af, bf);
  else
    mma_m16n8k16_f16(c, af, bf);
  __syncwarp();
  c_fragment(d, g, t, c, true);
}

// a [16][8], b [8][8] (element (k, n)) float32 rounded to tf32 here; d [16][8] += a b.
extern "C" __global__ void aicfc_probe_mma_m16n8k8_tf32(const float* a, const float* b, float* d) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  uint32_t af[4] = {to_tf32(a[g * 8 + t]), to_tf32(a[(g + 8) * 8 + t]), to_tf32(a[g * 8 + t + 4]),
                    to_tf32(a[(g + 8) * 8 + t + 4])};
  uint32_t bf[2] = {to_tf32(b[t * 8 + g]), to_tf32(b[(t + 4) * 8 + g])};
  float c[4];
  c_fragment(d, g, t, c, false);
  mma_m16n8k8_tf32(c, af, bf);
  __syncwarp();
  c_fragment(d, g, t, c, true);
}

// x [n] float -> words [n]: to_tf32, and packs [n / 2] of pack_bf16x2 / pack_f16x2.
extern "C" __global__ void aicfc_probe_pack(const float* x, uint32_t* tf32, uint32_t* bf16x2,
                                           uint32_t* f16x2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tf32[i] = to_tf32(x[i]);
  if (2 * i + 1 < n) {
    bf16x2[i] = pack_bf16x2(x[2 * i], x[2 * i + 1]);
    f16x2[i] = pack_f16x2(x[2 * i], x[2 * i + 1]);
  }
}
