// Elementwise and layout kernels (reference.add, sub, mul, bias_add, every activation and
// its gradient; exec.copy, reshape, transpose, broadcast_to).
//
// All are grid-stride loops over n elements (grid from the launcher: enough blocks
// of 256 threads to fill the device, at most one element per thread per pass).
// ABIs:
//   aicfc_{add,sub,mul}_{f32,i32,i64}: (a, b, out, int64 n)         same shapes
//   (add, sub, mul, bias_add and every activation and its gradient also _bf16, _f16:
//   fp32 math inside, one rounding on the store)
//   aicfc_bias_add_f32:                (x, bias, out, int64 n, int64 C)  bias along the last dim
//   aicfc_<act>_f32:                   (x, out, int64 n)             y = act(x)
//   aicfc_<act>_grad_f32:              (dy, s, dx, int64 n)          dx = dy act'(.), s the
//       input or output the activation's gradient saves; one pair per row of
//       AICFC_ACTIVATIONS (common.cuh: relu, gelu, tanh, ...)
//   aicfc_copy_bytes:                  (src, dst, int64 nbytes)      16-byte words when aligned
//   aicfc_permute_b{16,32,64}:            (x, out, const int64* meta, int32 rank, int64 n)
//       out[i] = x[sum_d idx_d(i) * meta[rank + d]] with idx_d the digits of i in the
//       output shape meta[0:rank]; the strides say where each output axis comes from
//       (a transpose permutes the input strides, a broadcast sets them to 0).
//   aicfc_permute_rows_b32:            (x, out, const int64* meta, int32 rank, int64 n)
//       aicfc_permute_b32 in 16-byte words, where the launcher found the last axis
//       contiguous in both, its size and every source stride multiples of 4 and both
//       buffers 16-byte aligned (a transpose that moves whole rows: heads split or merged);
//       n counts words, meta's strides are in elements.
//   aicfc_strided_copy_b{16,32,64}:      (x, out, const int64* meta, int32 rank, int64 n)
//       out[meta[3 rank + 1] + sum_d idx_d(i) meta[2 rank + d]] =
//       x[meta[3 rank] + sum_d idx_d(i) meta[rank + d]], idx_d the digits of i in the
//       shape meta[0:rank]: a strided view copied into another (graph.split reads one
//       slice of its input, graph.concat writes each input into its slice).
//   aicfc_scale_f32:                   (x, out, int64 n, float factor)    out = factor x
//   aicfc_causal_mask_f32:             (x, out, int64 T, int64 S, int64 n, float fill)
//       x [..., T, S]: out = fill where the column j exceeds the row i, else x
//       (graph.causal_mask, top-left aligned as torch.tril).
#include "common.cuh"
#include "lowp.cuh"

AICFC_EXPORT_ABI_VERSION

#define AICFC_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
       i += (int64_t)gridDim.x * blockDim.x)

#define AICFC_BINARY(NAME, T, SUFFIX, EXPR)                                                \
  extern "C" __global__ void aicfc_##NAME##_##SUFFIX(const T* a,            \
                                                     const T* b,            \
                                                     T* out, int64_t n) {   \
    AICFC_GRID_STRIDE(i, n) {                                                            \
      T x = a[i], y = b[i];                                                              \
      out[i] = EXPR;                                                                     \
    }                                                                                    \
  }

#define AICFC_BINARY_ALL(NAME, EXPR)      \
  AICFC_BINARY(NAME, float, f32, EXPR)    \
  AICFC_BINARY(NAME, int32_t, i32, EXPR)  \
  AICFC_BINARY(NAME, int64_t, i64, EXPR)

AICFC_BINARY_ALL(add, x + y)
AICFC_BINARY_ALL(sub, x - y)
AICFC_BINARY_ALL(mul, x * y)

extern "C" __global__ void aicfc_bias_add_f32(const float* x,
                                              const float* bias,
                                              float* out, int64_t n, int64_t C) {
  AICFC_GRID_STRIDE(i, n) { out[i] = x[i] + __ldg(bias + i % C); }
}

#define AICFC_UNARY(NAME, EXPR)                                                            \
  extern "C" __global__ void aicfc_##NAME##_f32(const float* in,              \
                                                float* out, int64_t n) {      \
    AICFC_GRID_STRIDE(i, n) {                                                              \
      float x = in[i];                                                                     \
      out[i] = EXPR;                                                                       \
    }                                                                                      \
  }


// An activation's kernels: y = act(x), and its gradient as a binary kernel of (dy, s).
#define AICFC_ACTIVATION_KERNELS(NAME, CODE) \
  AICFC_UNARY(NAME, aicfc::NAME(x))          \
  AICFC_BINARY(NAME##_grad, float, f32, aicfc::NAME##_grad(x, y))

AICFC_ACTIVATIONS(AICFC_ACTIVATION_KERNELS)

// The same arithmetic on bf16 and f16 storage (suffixes _bf16, _f16): load widens to
// float, the expression runs in float, the store rounds once; 8 elements a thread where
// aligned (kernels/lowp.cuh map1, map2).
#define AICFC_LOW_BINARY(NAME, SUFFIX, T, EXPR)                                          \
  extern "C" __global__ void aicfc_##NAME##_##SUFFIX(const T* a, const T* b, T* out,     \
                                                     int64_t n) {                        \
    aicfc::map2(a, b, out, n, [](float x, float y) { return EXPR; });                    \
  }
#define AICFC_LOW_UNARY(NAME, SUFFIX, T, EXPR)                                           \
  extern "C" __global__ void aicfc_##NAME##_##SUFFIX(const T* in, T* out, int64_t n) {   \
    aicfc::map1(in, out, n, [](float x) { return EXPR; });                               \
  }
#define AICFC_LOW_KERNELS(SUFFIX, T)                                                     \
  AICFC_LOW_BINARY(add, SUFFIX, T, x + y)                                                \
  AICFC_LOW_BINARY(sub, SUFFIX, T, x - y)                                                \
  AICFC_LOW_BINARY(mul, SUFFIX, T, x * y)                                                \
  extern "C" __global__ void aicfc_bias_add_##SUFFIX(const T* x, const T* bias, T* out,  \
                                                     int64_t n, int64_t C) {             \
    AICFC_GRID_STRIDE(i, n) {                                                            \
      out[i] = aicfc::store<T>(aicfc::load<T>(x[i]) + aicfc::load<T>(bias[i % C]));      \
    }                                                                                    \
  }
#define AICFC_LOW_ACTIVATION(NAME, CODE)                                                 \
  AICFC_LOW_UNARY(NAME, bf16, aicfc::bf16, aicfc::NAME(x))                               \
  AICFC_LOW_UNARY(NAME, f16, aicfc::f16, aicfc::NAME(x))                                 \
  AICFC_LOW_BINARY(NAME##_grad, bf16, aicfc::bf16, aicfc::NAME##_grad(x, y))             \
  AICFC_LOW_BINARY(NAME##_grad, f16, aicfc::f16, aicfc::NAME##_grad(x, y))

AICFC_LOW_KERNELS(bf16, aicfc::bf16)
AICFC_LOW_KERNELS(f16, aicfc::f16)
AICFC_ACTIVATIONS(AICFC_LOW_ACTIVATION)

extern "C" __global__ void aicfc_copy_bytes(const void* src, void* dst,
                                            int64_t nbytes) {
  bool aligned = ((reinterpret_cast<uint64_t>(src) | reinterpret_cast<uint64_t>(dst) |
                   (uint64_t)nbytes) & 15) == 0;
  if (aligned) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    AICFC_GRID_STRIDE(i, nbytes / 16) { d[i] = s[i]; }
  } else {
    const unsigned char* s = reinterpret_cast<const unsigned char*>(src);
    unsigned char* d = reinterpret_cast<unsigned char*>(dst);
    AICFC_GRID_STRIDE(i, nbytes) { d[i] = s[i]; }
  }
}

template <typename T>
__device__ __forceinline__ void permute(const T* x, T* out,
                                        const int64_t* meta, int rank, int64_t n) {
  AICFC_GRID_STRIDE(i, n) {
    int64_t rest = i, src = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t dim = meta[d];
      src += (rest % dim) * meta[rank + d];
      rest /= dim;
    }
    out[i] = x[src];
  }
}

extern "C" __global__ void aicfc_permute_b32(const uint32_t* x, uint32_t* out, const int64_t* meta,
                                             int32_t rank, int64_t n) {
  permute<uint32_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_permute_b16(const uint16_t* x, uint16_t* out, const int64_t* meta,
                                             int32_t rank, int64_t n) {
  permute<uint16_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_permute_b64(const uint64_t* x, uint64_t* out, const int64_t* meta,
                                             int32_t rank, int64_t n) {
  permute<uint64_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_permute_rows_b32(const uint4* x, uint4* out,
                                                  const int64_t* meta, int32_t rank, int64_t n) {
  AICFC_GRID_STRIDE(i, n) {
    int64_t rest = i * 4, src = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t dim = meta[d];
      src += (rest % dim) * meta[rank + d];
      rest /= dim;
    }
    out[i] = x[src / 4];
  }
}

template <typename T>
__device__ __forceinline__ void strided_copy(const T* x, T* out, const int64_t* meta, int rank,
                                             int64_t n) {
  AICFC_GRID_STRIDE(i, n) {
    int64_t rest = i, src = meta[3 * rank], dst = meta[3 * rank + 1];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t dim = meta[d], c = rest % dim;
      src += c * meta[rank + d];
      dst += c * meta[2 * rank + d];
      rest /= dim;
    }
    out[dst] = x[src];
  }
}

extern "C" __global__ void aicfc_strided_copy_b32(const uint32_t* x, uint32_t* out,
                                                  const int64_t* meta, int32_t rank, int64_t n) {
  strided_copy<uint32_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_strided_copy_b16(const uint16_t* x, uint16_t* out,
                                                  const int64_t* meta, int32_t rank, int64_t n) {
  strided_copy<uint16_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_strided_copy_b64(const uint64_t* x, uint64_t* out,
                                                  const int64_t* meta, int32_t rank, int64_t n) {
  strided_copy<uint64_t>(x, out, meta, rank, n);
}

extern "C" __global__ void aicfc_scale_f32(const float* x, float* out, int64_t n, float factor) {
  AICFC_GRID_STRIDE(i, n) { out[i] = factor * x[i]; }
}

extern "C" __global__ void aicfc_causal_mask_f32(const float* x, float* out, int64_t T,
                                                 int64_t S, int64_t n, float fill) {
  AICFC_GRID_STRIDE(i, n) {
    int64_t j = i % S, r = (i / S) % T;
    out[i] = j > r ? fill : x[i];
  }
}
