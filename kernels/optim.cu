// Optimizer updates with PyTorch's semantics (reference.adam_step, reference.sgd_step).
//
// aicfc_adam_multi_tensor_f32: every parameter's Adam update in one launch (the
//   multi-tensor apply of torch.optim.Adam(foreach/fused)). The buffers travel in a
//   device tensor list, per tensor in ABI order: inputs (param, grad, exp_avg,
//   exp_avg_sq, step), then outputs (param', exp_avg', exp_avg_sq', step'), then its
//   element count; outputs may be the same buffers as the inputs (alias policy
//   adam_triplet). Bias correction is computed on the device from each tensor's step
//   counter (t = step + 1), so a replayed graph needs no host-fed scalar.
//   ABI: (workspace, const int64 meta*, int32 ntensors, int32 nchunks, int32 chunk,
//         double lr, double beta1, double beta2, double eps, double weight_decay,
//         int32 decoupled_weight_decay)
//   meta: [ntensors x 10] pointers and counts, then [nchunks x 2] (tensor, start).
//   Grid: nchunks blocks of 256 threads, each updating `chunk` elements of one tensor.
//   The step counters are read by every block and written by the last block to
//   finish (common.cuh's ticket counter in the workspace), so step' may alias step.
//   The workspace is a backend-owned scratch buffer passed after the outputs (here
//   the tensor list holds them); it starts zeroed and the kernel leaves it zeroed.
// aicfc_sgd_f32: (param, grad, buf|null, param', buf'|null, double lr,
//   double momentum, double weight_decay, int32 nesterov, int64 n).
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

namespace {

constexpr int kTensorFields = 10;

struct AdamTensor {
  float *p, *g, *m, *v, *s, *p_out, *m_out, *v_out, *s_out;
  int64_t n;
};

__device__ __forceinline__ AdamTensor adam_tensor(const int64_t* meta, int t) {
  const int64_t* f = meta + (int64_t)t * kTensorFields;
  return {reinterpret_cast<float*>(f[0]), reinterpret_cast<float*>(f[1]),
          reinterpret_cast<float*>(f[2]), reinterpret_cast<float*>(f[3]),
          reinterpret_cast<float*>(f[4]), reinterpret_cast<float*>(f[5]),
          reinterpret_cast<float*>(f[6]), reinterpret_cast<float*>(f[7]),
          reinterpret_cast<float*>(f[8]), f[9]};
}

struct AdamScalars {
  float step_size, bc2_sqrt, b1c, b2, b2c, wd, eps, decay;
  bool decoupled, coupled;
};

// One element of reference.adam_step, in float32 at the same points (torch's order of
// operations); the _rn intrinsics keep nvcc from contracting into FMAs, so the
// rounding is NumPy's. Updates p, m, v in registers (g only for weight decay).
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v,
                                            const AdamScalars& c) {
  if (c.decoupled)
    p = __fmul_rn(p, c.decay);
  else if (c.coupled)
    g = __fadd_rn(g, __fmul_rn(c.wd, p));
  m = __fadd_rn(m, __fmul_rn(c.b1c, __fsub_rn(g, m)));
  v = __fadd_rn(__fmul_rn(v, c.b2), __fmul_rn(__fmul_rn(c.b2c, g), g));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt), c.eps);
  p = __fsub_rn(p, __fmul_rn(c.step_size, __fdiv_rn(m, denom)));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    aicfc_adam_multi_tensor_f32(void* workspace, const int64_t* __restrict__ meta,
                                int32_t ntensors, int32_t nchunks, int32_t chunk, double lr,
                                double beta1, double beta2, double eps, double weight_decay,
                                int32_t decoupled) {
  const int64_t* chunks = meta + (int64_t)ntensors * kTensorFields;
  int t = (int)chunks[2 * blockIdx.x];
  int64_t start = chunks[2 * blockIdx.x + 1];
  AdamTensor a = adam_tensor(meta, t);
  int64_t end = min(start + (int64_t)chunk, a.n);

  // Bias corrections in double from the device step counter, cast where torch casts.
  double step = (double)a.s[0] + 1.0;
  float step_size = (float)(lr / (1.0 - pow(beta1, step)));
  float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, step));
  float b1c = (float)(1.0 - beta1), b2 = (float)beta2, b2c = (float)(1.0 - beta2);
  float wd = (float)weight_decay, epsf = (float)eps;
  float decay = (float)(1.0 - lr * weight_decay);

  AdamScalars c{step_size, bc2_sqrt, b1c, b2, b2c, wd, epsf, decay,
                weight_decay != 0.0 && decoupled, weight_decay != 0.0 && !decoupled};
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
    }
    i = vec_end;
  }
  for (i += threadIdx.x; i < end; i += blockDim.x) {
    float p = a.p[i], g = a.g[i], m = a.m[i], v = a.v[i];
    adam_update(p, g, m, v, c);
    a.p_out[i] = p;
    a.m_out[i] = m;
    a.v_out[i] = v;
  }

  if (aicfc::last_block_done(reinterpret_cast<uint32_t*>(workspace))) {
    for (int k = threadIdx.x; k < ntensors; k += blockDim.x) {
      AdamTensor b = adam_tensor(meta, k);
      b.s_out[0] = b.s[0] + 1.0f;
    }
  }
}

// Grid-stride over n; 256 threads per block.
extern "C" __global__ void __launch_bounds__(256)
    aicfc_sgd_f32(const float* param, const float* grad,
                  const float* buf, float* param_out, float* buf_out, double lr, double momentum,
                  double weight_decay, int32_t nesterov, int64_t n) {
  float lrf = (float)lr, mom = (float)momentum, wd = (float)weight_decay;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float p = param[i], g = grad[i];
    if (weight_decay != 0.0) g = __fadd_rn(g, __fmul_rn(wd, p));
    if (buf) {
      float b = __fadd_rn(__fmul_rn(mom, buf[i]), g);
      buf_out[i] = b;
      g = nesterov ? __fadd_rn(g, __fmul_rn(mom, b)) : b;
    }
    param_out[i] = __fsub_rn(p, __fmul_rn(lrf, g));
  }
}
