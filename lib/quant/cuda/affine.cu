// intB_gG on the GPU: one thread per (group, output row), each running
// affine.cpp's search_affine_group op for op (same float and double
// operations in the same order, -fmad=false; its two steps are one source,
// affine_group_ops.h), so scales, biases and codes equal the CPU's bit for
// bit.
#include "quant/affine_group_ops.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/quantize_common.h"

namespace eq::quant::cuda {

namespace {

constexpr int kMaxGroup = 128;

__device__ float to_f16(float v) {
  const float c = v < -65504.0f ? -65504.0f : (65504.0f < v ? 65504.0f : v);
  return f16_to_f32_device(f32_to_f16_device(c));
}

using affine_ops::assign_codes;
using affine_ops::clamp_code;
using affine_ops::fit;

struct Search {
  const float* w;
  const float* h;
  int n, nmax;
  float lo, hi;
  uint8_t* codes;
  uint8_t trial[kMaxGroup];
  uint8_t current[kMaxGroup];
  float best_scale = 0.0f, best_bias = 0.0f, best_err = INFINITY;

  __device__ void score(float scale, float bias) {
    const float s = to_f16(scale), b = to_f16(bias);
    const float err = assign_codes(w, h, n, nmax, s, b, trial);
    if (err < best_err) {
      best_scale = s;
      best_bias = b;
      best_err = err;
      for (int i = 0; i < n; ++i) codes[i] = trial[i];
    }
  }
  __device__ void alternate(int max_iter) {
    for (int i = 0; i < n; ++i) current[i] = codes[i];
    for (int iter = 0; iter < max_iter; ++iter) {
      const float before = best_err;
      float s, b;
      if (!fit(w, h, n, current, &s, &b)) break;
      score(s, b);
      if (!(best_err < before)) break;
      for (int i = 0; i < n; ++i) current[i] = codes[i];
    }
  }
  __device__ void grid(float t0, float t1, int steps, bool both_ends) {
    for (int i = 0; i <= steps; ++i) {
      const float iscale = (static_cast<float>(nmax) + t0 + (t1 - t0) * static_cast<float>(i) / steps) / (hi - lo);
      if (!(iscale > 0.0f)) continue;
      float s, b;
      for (int j = 0; j < n; ++j)
        trial[j] = static_cast<uint8_t>(clamp_code(static_cast<int>(nearbyintf(iscale * (w[j] - lo))), nmax));
      if (fit(w, h, n, trial, &s, &b)) score(s, b);
      if (!both_ends) continue;
      for (int j = 0; j < n; ++j)
        trial[j] = static_cast<uint8_t>(clamp_code(nmax - static_cast<int>(nearbyintf(iscale * (hi - w[j]))), nmax));
      if (fit(w, h, n, trial, &s, &b)) score(s, b);
    }
  }
};

__global__ void quantize_affine_kernel(const float* w, const float* h, int64_t rows, int64_t cols, int group,
                                       int bits, uint32_t* qweight, uint16_t* scales, uint16_t* biases) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = cols / group;
  if (idx >= groups * rows) return;
  const int64_t g = idx / rows, n = idx % rows;
  const float* wg = w + n * cols + g * group;
  uint8_t codes[kMaxGroup] = {};  // zero where no candidate is finite, as on the CPU
  const int nmax = (1 << bits) - 1;
  float lo = wg[0], hi = wg[0];
  for (int i = 1; i < group; ++i) {
    lo = wg[i] < lo ? wg[i] : lo;  // std::min / std::max: the first of equals (+0 before -0)
    hi = hi < wg[i] ? wg[i] : hi;
  }
  float scale, bias;
  if (hi == lo) {
    for (int i = 0; i < group; ++i) codes[i] = 0;
    scale = 0.0f;
    bias = to_f16(lo);
  } else {
    Search s{wg, h + g * group, group, nmax, lo, hi, codes};
    s.score((hi - lo) / static_cast<float>(nmax), lo);
    s.grid(-1.0f, 1.0f, 20, false);
    s.alternate(4);
    s.grid(-2.0f, 2.0f, 20, true);
    s.alternate(8);
    scale = s.best_scale;
    bias = s.best_bias;
  }
  scales[idx] = f32_to_f16_device(scale);
  biases[idx] = f32_to_f16_device(bias);
  // The group's bits fill whole words (G * B is a multiple of 32: affine_row).
  const int64_t word0 = g * group * bits / 32;
  uint64_t acc = 0;
  int filled = 0, out = 0;
  for (int i = 0; i < group; ++i) {
    acc |= static_cast<uint64_t>(codes[i]) << filled;
    filled += bits;
    if (filled >= 32) {
      qweight[(word0 + out) * rows + n] = static_cast<uint32_t>(acc);
      ++out;
      acc >>= 32;
      filled -= 32;
    }
  }
}

}  // namespace

QuantizedMatrix quantize_affine(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  require_gpu();
  const int B = format.weight_bits, G = format.group_size;
  EQ_CHECK(G <= kMaxGroup && (G * B) % 32 == 0, "affine group " + std::to_string(G) + " on the GPU");
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  const std::vector<float> h = importance_by_group(options.importance, cols, G);
  DeviceBuffer<float> dw(w, static_cast<size_t>(rows * cols)), dh(h.data(), h.size());
  DeviceBuffer<uint8_t> dq(out.parts[0].bytes.size()), ds(out.parts[1].bytes.size()), db(out.parts[2].bytes.size());
  const int64_t threads = rows * (cols / G);
  constexpr int kBlock = 128;
  quantize_affine_kernel<<<static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0, cudaStreamPerThread>>>(
      dw.get(), dh.get(), rows, cols, G, B, reinterpret_cast<uint32_t*>(dq.get()), reinterpret_cast<uint16_t*>(ds.get()),
      reinterpret_cast<uint16_t*>(db.get()));
  check_launch("affine kernel");
  dq.download(out.parts[0].bytes.data());
  ds.download(out.parts[1].bytes.data());
  db.download(out.parts[2].bytes.data());
  return out;
}

}  // namespace eq::quant::cuda
