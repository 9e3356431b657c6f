// Where the heads of an attention operand lie: the rows of head bh = b H + h of a
// [B, H, T, d] view start at base(bh) and lie `rs` floats apart. Two layouts:
//   plain()   q, k, v, out [B, H, T, d] contiguous: H = 1 (bh counts the rows' blocks),
//             batch stride T d, row stride d;
//   packed()  the heads of [N, T, W] at column h d of each row: q, k, v inside c_attn's
//             output qkv [N, T, 3D] (W = 3D, k and v at column offsets D and 2D), out
//             and dout [N, T, D] (W = D, heads merged); batch stride T W, head stride d.
#pragma once

// size_t: built in under NVRTC, which has no standard header (kernels/common.cuh)
#ifndef __CUDACC_RTC__
#include <cstddef>
#endif

namespace aicfc {

struct Heads {
  int H;
  size_t bstride, hstride;
  int rs;
  __device__ __forceinline__ size_t base(int bh) const {
    return (size_t)(bh / H) * bstride + (size_t)(bh % H) * hstride;
  }
  __device__ __forceinline__ size_t at(int bh, int i) const {
    return base(bh) + (size_t)i * rs;
  }
  static __device__ __forceinline__ Heads plain(int T, int d) {
    return Heads{1, (size_t)T * d, 0, d};
  }
  static __device__ __forceinline__ Heads packed(int H, int T, int d, int W) {
    return Heads{H, (size_t)T * W, (size_t)d, W};
  }
};

}  // namespace aicfc
