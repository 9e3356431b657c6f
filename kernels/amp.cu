// Dynamic loss scaling (torch.amp.GradScaler) on the device: reference.unscale_grad,
// amp_select and update_scale. The scale, growth tracker and found-inf flag are scalar
// f32 buffers, so a replayed graph needs no host sync.
//
// aicfc_amp_clear_f32:     (found float [])                   found = 0 (one thread; the
//                           unscale launcher runs it first)
// aicfc_unscale_grad_f32:  (g, scale float [], out, found float [], int64 n)
//                           out = g * (1 / scale); found = 1 where an element is inf or NaN
//                           (a benign race: every writer stores 1)
// aicfc_amp_select_f32:    (found float [], updated, previous, out, int64 n)
//                           out = found != 0 ? previous : updated
// aicfc_update_scale_f32:  (scale, tracker, found, new_scale, new_tracker, float growth,
//                           float backoff, int64 interval)  one thread: torch's
//                           _amp_update_scale_
#include "common.cuh"

AICFC_EXPORT_ABI_VERSION

#define AICFC_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
       i += (int64_t)gridDim.x * blockDim.x)

extern "C" __global__ void aicfc_amp_clear_f32(float* found) {
  if (blockIdx.x == 0 && threadIdx.x == 0) found[0] = 0.0f;
}

extern "C" __global__ void aicfc_unscale_grad_f32(const float* g, const float* scale, float* out,
                                                  float* found, int64_t n) {
  float inv = 1.0f / scale[0];
  AICFC_GRID_STRIDE(i, n) {
    float v = g[i];
    if (!isfinite(v)) found[0] = 1.0f;
    out[i] = v * inv;
  }
}

extern "C" __global__ void aicfc_amp_select_f32(const float* found, const float* updated,
                                                const float* previous, float* out, int64_t n) {
  bool skip = found[0] != 0.0f;
  AICFC_GRID_STRIDE(i, n) { out[i] = skip ? previous[i] : updated[i]; }
}

extern "C" __global__ void aicfc_update_scale_f32(const float* scale, const float* tracker,
                                                  const float* found, float* new_scale,
                                                  float* new_tracker, float growth,
                                                  float backoff, int64_t interval) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float s = scale[0], t = tracker[0];
  if (found[0] != 0.0f) {
    s *= backoff;
    t = 0.0f;
  } else {
    t += 1.0f;
    if (t >= (float)interval) {  // torch keeps the scale where growing it overflows
      float grown = s * growth;
      if (isfinite(grown)) s = grown;
      t = 0.0f;
    }
  }
  new_scale[0] = s;
  new_tracker[0] = t;
}
