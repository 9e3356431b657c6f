// Optimizer updates and the training loop's bookkeeping, with PyTorch's semantics
// (runtime/reference.py: adam_step, sgd_step, lr_schedule, clip_grad_norm,
// accumulation_step, accumulate_grad).
//
// Every hyperparameter (lr, betas, eps, weight decay, momentum: double, the train
// step's f64 state), the gradient scale (float) and the apply flag (float, 0 or 1) is
// read from device memory at each launch, so a replayed graph follows any value the
// host or another kernel writes there (docs/design.md#hyperparameters-as-device-state).
// With apply == 0 an update writes its inputs' values to its outputs (nothing, where
// they are the same buffers), so params and state stay bit-identical.
//
// aicfc_adam_multi_tensor_f32: every parameter's Adam update in one launch (the
//   multi-tensor apply of torch.optim.Adam(foreach/fused)). The buffers travel in a
//   device tensor list, per tensor in ABI order: inputs (param, grad, exp_avg,
//   exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay, grad_scale, apply), then
//   outputs (param', exp_avg', exp_avg_sq', step'), then the low-precision copy and its
//   next value (low_copy, low_copy': bf16 or f16, null without a copy), the copy's dtype
//   code (kLowNone, kLowBf16, kLowF16), then its element count; outputs may be the same
//   buffers as the inputs (alias policy adam_triplet). The copy's next value is param'
//   rounded to nearest even (lowp.cuh's store, graph.cast's rounding), written from
//   the register that holds param', so no cast of the master runs before the next
//   forward (passes/aicfc_fold_weight_casts.py). The gradient is
//   multiplied by grad_scale as it is read (the clipping coefficient). Bias correction
//   is computed on the device from each tensor's step counter (t = step + 1).
//   ABI: (workspace, const int64 meta*, int32 ntensors, int32 nchunks, int32 chunk,
//         int32 decoupled_weight_decay)
//   meta: [ntensors x 20] pointers, codes and counts, then [nchunks x 2] (tensor, start).
//   Grid: nchunks blocks of 256 threads, each updating `chunk` elements of one tensor.
//   The step counters are read by every block and written by the last block to
//   finish (common.cuh's ticket counter in the workspace), so step' may alias step.
//   The workspace is a backend-owned scratch buffer passed after the outputs (here
//   the tensor list holds them); it starts zeroed and the kernel leaves it zeroed.
// aicfc_sgd_f32: (param, grad, lr, momentum, weight_decay, grad_scale, apply,
//   buf|null, param', buf'|null, int32 nesterov, int64 n).
// aicfc_lr_schedule: (const int64 last_epoch*, const float apply*, int64
//   new_last_epoch*, const int64 meta*, int32 ngroups, int32 nsegments); one thread.
//   meta: [ngroups x 2] (initial_lr, lr) double pointers, then [nsegments x 6] (kind
//   code, first step, 4 coefficients as the bits of doubles). The closed forms of
//   dialects/schedule_table.py, in double, in the reference's order of operations.
// aicfc_clip_grad_norm_f32: (float total_norm*, float clip_coef*, workspace,
//   const int64 meta*, int32 ntensors, int32 nchunks, int32 chunk, double max_norm).
//   meta: [ntensors x 2] (gradient, count), then [nchunks x 2] (tensor, start). Each
//   block sums the squares of its chunk in double into the workspace; the last block
//   adds the partials in chunk order (deterministic: the same bits every replay) and
//   writes the norm and min(1, max_norm / (norm + 1e-6)).
// aicfc_accumulation_step: (const int64 count*, int64 count'*, float apply*, int64
//   every); one thread. aicfc_accumulate_grad_f32: (grad, accum, reset, mean, accum',
//   int64 every, int64 n), grid-stride.
#include "common.cuh"
#include "lowp.cuh"

AICFC_EXPORT_ABI_VERSION

#define AICFC_SCHEDULE_CONSTANT 0
#define AICFC_SCHEDULE_LINEAR 1
#define AICFC_SCHEDULE_STEP 2
#define AICFC_SCHEDULE_EXPONENTIAL 3
#define AICFC_SCHEDULE_COSINE 4

namespace {

constexpr int kAdamFields = 20;
constexpr int64_t kLowNone = 0, kLowBf16 = 1, kLowF16 = 2;

struct AdamTensor {
  float *p, *g, *m, *v, *s;
  const double *lr, *beta1, *beta2, *eps, *wd;
  const float *scale, *apply;
  float *p_out, *m_out, *v_out, *s_out;
  void *low, *low_out;
  int64_t low_kind, n;
};

template <typename T>
__device__ __forceinline__ T* field(const int64_t* f, int k) {
  return reinterpret_cast<T*>(f[k]);
}

__device__ __forceinline__ AdamTensor adam_tensor(const int64_t* meta, int t) {
  const int64_t* f = meta + (int64_t)t * kAdamFields;
  return {field<float>(f, 0),         field<float>(f, 1),         field<float>(f, 2),
          field<float>(f, 3),         field<float>(f, 4),         field<const double>(f, 5),
          field<const double>(f, 6),  field<const double>(f, 7),  field<const double>(f, 8),
          field<const double>(f, 9),  field<const float>(f, 10),  field<const float>(f, 11),
          field<float>(f, 12),        field<float>(f, 13),        field<float>(f, 14),
          field<float>(f, 15),        field<void>(f, 16),         field<void>(f, 17),
          f[18],                      f[19]};
}

struct AdamScalars {
  float step_size, bc2_sqrt, b1c, b2, b2c, wd, eps, decay, scale;
  bool decoupled, coupled;
};

// One element of reference.adam_step, in float32 at the same points (torch's order of
// operations); the _rn intrinsics keep nvcc from contracting into FMAs, so the
// rounding is NumPy's. Updates p, m, v in registers (g only for weight decay).
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v,
                                            const AdamScalars& c) {
  g = __fmul_rn(g, c.scale);
  if (c.decoupled)
    p = __fmul_rn(p, c.decay);
  else if (c.coupled)
    g = __fadd_rn(g, __fmul_rn(c.wd, p));
  m = __fadd_rn(m, __fmul_rn(c.b1c, __fsub_rn(g, m)));
  v = __fadd_rn(__fmul_rn(v, c.b2), __fmul_rn(__fmul_rn(c.b2c, g), g));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt), c.eps);
  p = __fsub_rn(p, __fmul_rn(c.step_size, __fdiv_rn(m, denom)));
}

// Bias corrections in double from the device step counter and hyperparameters, cast
// where torch casts.
__device__ __forceinline__ AdamScalars adam_scalars(const AdamTensor& a, bool decoupled) {
  double lr = *a.lr, beta1 = *a.beta1, beta2 = *a.beta2, weight_decay = *a.wd;
  double step = (double)a.s[0] + 1.0;
  AdamScalars c;
  c.step_size = (float)(lr / (1.0 - pow(beta1, step)));
  c.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, step));
  c.b1c = (float)(1.0 - beta1);
  c.b2 = (float)beta2;
  c.b2c = (float)(1.0 - beta2);
  c.wd = (float)weight_decay;
  c.eps = (float)*a.eps;
  c.decay = (float)(1.0 - lr * weight_decay);
  c.scale = *a.scale;
  c.decoupled = weight_decay != 0.0 && decoupled;
  c.coupled = weight_decay != 0.0 && !decoupled;
  return c;
}

// out[i] = in[i] over [start, end), unless out is in (a skipped update in place).
__device__ __forceinline__ void keep(const float* in, float* out, int64_t start, int64_t end) {
  if (in == out) return;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) out[i] = in[i];
}

// out[i] = in[i] over [start, end) for a 2-byte copy, unless out is in.
__device__ __forceinline__ void keep_low(const void* in, void* out, int64_t start,
                                         int64_t end) {
  if (in == out) return;
  const uint16_t* src = static_cast<const uint16_t*>(in);
  uint16_t* dst = static_cast<uint16_t*>(out);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) dst[i] = src[i];
}

// The low-precision copy of param' (Low: lowp.cuh's bf16/f16; void: no copy).
template <class Low>
__device__ __forceinline__ void store_low(void* low, int64_t i, float p) {
  static_cast<Low*>(low)[i] = aicfc::store<Low>(p);
}
template <>
__device__ __forceinline__ void store_low<void>(void*, int64_t, float) {}

template <class Low>
__device__ __forceinline__ void adam_chunk(const AdamTensor& a, const AdamScalars& c,
                                           int64_t start, int64_t end) {
  // 16-byte path: 4 elements per load, so each thread keeps 7 x 16 bytes in flight.
  uint64_t bits = reinterpret_cast<uint64_t>(a.p) | reinterpret_cast<uint64_t>(a.g) |
                  reinterpret_cast<uint64_t>(a.m) | reinterpret_cast<uint64_t>(a.v) |
                  reinterpret_cast<uint64_t>(a.p_out) | reinterpret_cast<uint64_t>(a.m_out) |
                  reinterpret_cast<uint64_t>(a.v_out);
  int64_t i = start;
  if ((bits & 15) == 0 && (start & 3) == 0) {
    int64_t vec_end = start + ((end - start) & ~(int64_t)3);
    for (int64_t j = start + 4 * threadIdx.x; j < vec_end; j += 4 * blockDim.x) {
      float4 p = *reinterpret_cast<const float4*>(a.p + j);
      float4 g = *reinterpret_cast<const float4*>(a.g + j);
      float4 m = *reinterpret_cast<const float4*>(a.m + j);
      float4 v = *reinterpret_cast<const float4*>(a.v + j);
      adam_update(p.x, g.x, m.x, v.x, c);
      adam_update(p.y, g.y, m.y, v.y, c);
      adam_update(p.z, g.z, m.z, v.z, c);
      adam_update(p.w, g.w, m.w, v.w, c);
      *reinterpret_cast<float4*>(a.p_out + j) = p;
      *reinterpret_cast<float4*>(a.m_out + j) = m;
      *reinterpret_cast<float4*>(a.v_out + j) = v;
      store_low<Low>(a.low_out, j, p.x);
      store_low<Low>(a.low_out, j + 1, p.y);
      store_low<Low>(a.low_out, j + 2, p.z);
      store_low<Low>(a.low_out, j + 3, p.w);
    }
    i = vec_end;
  }
  for (i += threadIdx.x; i < end; i += blockDim.x) {
    float p = a.p[i], g = a.g[i], m = a.m[i], v = a.v[i];
    adam_update(p, g, m, v, c);
    a.p_out[i] = p;
    a.m_out[i] = m;
    a.v_out[i] = v;
    store_low<Low>(a.low_out, i, p);
  }
}

// Sum of `v` over the block in double (blockDim.x a multiple of 32, at most 1024), in a
// fixed order; every thread gets the result. `scratch` holds 32 doubles.
__device__ __forceinline__ double block_sum_double(double v, double* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double t = lane < nwarps ? scratch[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

__device__ __forceinline__ double bits_to_double(int64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

// One segment's closed form at local step t (reference.CLOSED_FORMS, same order).
__device__ double schedule_lr(int kind, double b, int64_t t, const double* c) {
  double td = (double)t;
  switch (kind) {
    case AICFC_SCHEDULE_CONSTANT:
      return __dmul_rn(b, td < c[1] ? c[0] : 1.0);
    case AICFC_SCHEDULE_LINEAR: {
      double steps = td < c[2] ? td : c[2];
      double f = __dadd_rn(c[0], __ddiv_rn(__dmul_rn(__dsub_rn(c[1], c[0]), steps), c[2]));
      return __dmul_rn(b, f);
    }
    case AICFC_SCHEDULE_STEP:
      return __dmul_rn(b, pow(c[1], (double)(t / (int64_t)c[0])));
    case AICFC_SCHEDULE_EXPONENTIAL:
      return __dmul_rn(b, pow(c[0], td));
    case AICFC_SCHEDULE_COSINE: {
      double angle = __ddiv_rn(__dmul_rn(3.141592653589793, td), c[0]);
      double half = __ddiv_rn(__dmul_rn(__dsub_rn(b, c[1]), __dadd_rn(1.0, cos(angle))), 2.0);
      return __dadd_rn(c[1], half);
    }
    default:
      return aicfc::quiet_nan();
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    aicfc_adam_multi_tensor_f32(void* workspace, const int64_t* __restrict__ meta,
                                int32_t ntensors, int32_t nchunks, int32_t chunk,
                                int32_t decoupled) {
  const int64_t* chunks = meta + (int64_t)ntensors * kAdamFields;
  int t = (int)chunks[2 * blockIdx.x];
  int64_t start = chunks[2 * blockIdx.x + 1];
  AdamTensor a = adam_tensor(meta, t);
  int64_t end = min(start + (int64_t)chunk, a.n);
  if (*a.apply != 0.0f) {
    AdamScalars c = adam_scalars(a, decoupled != 0);
    if (a.low_kind == kLowBf16)  // one tensor per block: the branch is uniform
      adam_chunk<aicfc::bf16>(a, c, start, end);
    else if (a.low_kind == kLowF16)
      adam_chunk<aicfc::f16>(a, c, start, end);
    else
      adam_chunk<void>(a, c, start, end);
  } else {
    keep(a.p, a.p_out, start, end);
    keep(a.m, a.m_out, start, end);
    keep(a.v, a.v_out, start, end);
    if (a.low_kind != kLowNone) keep_low(a.low, a.low_out, start, end);
  }
  if (aicfc::last_block_done(reinterpret_cast<uint32_t*>(workspace))) {
    for (int k = threadIdx.x; k < ntensors; k += blockDim.x) {
      AdamTensor b = adam_tensor(meta, k);
      b.s_out[0] = *b.apply != 0.0f ? b.s[0] + 1.0f : b.s[0];
    }
  }
}

// Grid-stride over n; 256 threads per block.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_sgd_f32(const float* param, const float* grad, const double* lr_p,
                  const double* momentum_p, const double* weight_decay_p, const float* scale_p,
                  const float* apply_p, const float* buf, float* param_out, float* buf_out,
                  int32_t nesterov, int64_t n) {
  int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  if (*apply_p == 0.0f) {
    for (int64_t i = first; i < n; i += stride) {
      if (param_out != param) param_out[i] = param[i];
      if (buf && buf_out != buf) buf_out[i] = buf[i];
    }
    return;
  }
  double weight_decay = *weight_decay_p;
  float lrf = (float)*lr_p, mom = (float)*momentum_p, wd = (float)weight_decay;
  float scale = *scale_p;
  for (int64_t i = first; i < n; i += stride) {
    float p = param[i], g = __fmul_rn(grad[i], scale);
    if (weight_decay != 0.0) g = __fadd_rn(g, __fmul_rn(wd, p));
    if (buf) {
      float b = __fadd_rn(__fmul_rn(mom, buf[i]), g);
      buf_out[i] = b;
      g = nesterov ? __fadd_rn(g, __fmul_rn(mom, b)) : b;
    }
    param_out[i] = __fsub_rn(p, __fmul_rn(lrf, g));
  }
}

extern "C" __global__ void aicfc_lr_schedule(const int64_t* last_epoch, const float* apply,
                                             int64_t* new_last_epoch,
                                             const int64_t* __restrict__ meta, int32_t ngroups,
                                             int32_t nsegments) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const int64_t* segments = meta + 2 * (int64_t)ngroups;
  int64_t epoch = last_epoch[0];
  float flag = apply[0];
  int s = 0;  // bisect_right(milestones, epoch): the last segment that has started
  while (s + 1 < nsegments && epoch >= segments[6 * (s + 1) + 1]) ++s;
  const int64_t* seg = segments + 6 * s;
  double c[4];
  for (int k = 0; k < 4; ++k) c[k] = bits_to_double(seg[2 + k]);
  for (int g = 0; g < ngroups; ++g) {
    const double* initial = reinterpret_cast<const double*>(meta[2 * g]);
    double* lr = reinterpret_cast<double*>(meta[2 * g + 1]);
    *lr = schedule_lr((int)seg[0], *initial, epoch - seg[1], c);
  }
  new_last_epoch[0] = epoch + (flag != 0.0f ? 1 : 0);
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_clip_grad_norm_f32(float* total_norm, float* clip_coef, void* workspace,
                             const int64_t* __restrict__ meta, int32_t ntensors,
                             int32_t nchunks, int32_t chunk, double max_norm) {
  __shared__ double scratch[32];
  uint32_t* ticket = reinterpret_cast<uint32_t*>(workspace);
  double* partials = reinterpret_cast<double*>(reinterpret_cast<char*>(workspace) + 16);
  const int64_t* chunks = meta + 2 * (int64_t)ntensors;
  int t = (int)chunks[2 * blockIdx.x];
  int64_t start = chunks[2 * blockIdx.x + 1];
  const float* g = reinterpret_cast<const float*>(meta[2 * t]);
  int64_t end = min(start + (int64_t)chunk, meta[2 * t + 1]);
  double sum = 0.0;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    double x = (double)g[i];
    sum = __dadd_rn(sum, __dmul_rn(x, x));
  }
  sum = block_sum_double(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
  if (aicfc::last_block_done(ticket)) {
    double total = 0.0;
    for (int k = threadIdx.x; k < nchunks; k += blockDim.x) total = __dadd_rn(total, partials[k]);
    total = block_sum_double(total, scratch);
    if (threadIdx.x == 0) {
      float norm = (float)sqrt(total);
      float coef = __fdiv_rn((float)max_norm, __fadd_rn(norm, 1e-6f));
      *total_norm = norm;
      *clip_coef = coef >= 1.0f ? 1.0f : coef;  // NaN stays NaN, as in the reference
    }
  }
}

extern "C" __global__ void aicfc_accumulation_step(const int64_t* count, int64_t* count_out,
                                                   float* apply, int64_t every) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int64_t c = count[0] + 1;
  *apply = c == every ? 1.0f : 0.0f;
  *count_out = c % every;
}

extern "C" __global__ void __launch_bounds__(256)
    aicfc_accumulate_grad_f32(const float* grad, const float* accum, const float* reset,
                              float* mean, float* accum_out, int64_t every, int64_t n) {
  bool restart = *reset != 0.0f;
  float k = (float)every;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float s = __fadd_rn(accum[i], grad[i]);
    mean[i] = __fdiv_rn(s, k);
    accum_out[i] = restart ? 0.0f : s;
  }
}
