// fp4_gG, mxfp4 and nvfp4 on the GPU: one thread per (group, output row),
// each running the CPU's scale search itself (e2m1_search.h, compiled without
// contraction: -fmad=false), so scales and codes equal the CPU's bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/e2m1_search.h"
#include "quant/quantize_common.h"

namespace eq::quant::cuda {

namespace {

enum class ScaleMode { kF16, kE8M0, kE4M3 };

struct Rounder {
  ScaleMode mode;
  float ts;  // nvfp4's tensor scale
  __device__ float operator()(float s) const {
    if (mode == ScaleMode::kF16) return f16_to_f32_device(f32_to_f16_device(fminf(s, 65504.0f)));
    return fp8_e4m3_to_f32_device(f32_to_fp8_e4m3_device(s / ts)) * ts;
  }
};

// One thread per (group g, row n), n fastest: scales[g, n] and the group's qweight words.
__global__ void quantize_e2m1_kernel(const float* w, const float* h, int64_t rows, int64_t cols, int group,
                                     ScaleMode mode, float ts, uint32_t* qweight, void* scales) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = cols / group;
  if (idx >= groups * rows) return;
  const int64_t g = idx / rows, n = idx % rows;
  const float* wg = w + n * cols + g * group;
  const float* hg = h + g * group;
  float s;
  if (mode == ScaleMode::kE8M0) {
    int e = 0;
    const bool nonzero = e2m1_ops::mx_exponent(wg, hg, /*search_neighbours=*/true, &e);
    static_cast<uint8_t*>(scales)[idx] = static_cast<uint8_t>(nonzero ? e + 127 : 127);
    s = nonzero ? ldexpf(1.0f, e) : 0.0f;
  } else {
    const Rounder r{mode, ts};
    s = e2m1_ops::search_scale(wg, hg, group, r);
    if (mode == ScaleMode::kF16)
      static_cast<uint16_t*>(scales)[idx] = f32_to_f16_device(s);
    else
      static_cast<uint8_t*>(scales)[idx] = f32_to_fp8_e4m3_device(s / ts);
  }
  const int64_t word0 = g * group / 8;
  for (int q = 0; q < group / 8; ++q) {
    uint32_t word = 0;
    if (s != 0.0f)
      for (int i = 0; i < 8; ++i) word |= e2m1_ops::code(wg[q * 8 + i] / s) << (4 * i);
    qweight[(word0 + q) * rows + n] = word;
  }
}

QuantizedMatrix quantize_e2m1(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                              const QuantizeOptions& options, ScaleMode mode) {
  check_quantize_input(format, w, rows, cols, options);
  require_gpu();
  const int G = format.group_size;
  EQ_CHECK(G % 8 == 0 && G <= e2m1_ops::kMaxGroup, "fp4 group " + std::to_string(G) + " on the GPU");
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  float ts = 1.0f;
  if (mode == ScaleMode::kE4M3) {
    // fp4_nv.cpp's tensor scale, on the host (one pass).
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * cols; ++i) amax = std::max(amax, std::fabs(w[i]));
    ts = e2m1_ops::nvfp4_tensor_scale(amax);
    std::memcpy(out.parts[2].bytes.data(), &ts, sizeof(float));
  }
  const std::vector<float> h = importance_by_group(options.importance, cols, G);
  DeviceBuffer<float> dw(w, static_cast<size_t>(rows * cols)), dh(h.data(), h.size());
  DeviceBuffer<uint8_t> dq(out.parts[0].bytes.size()), ds(out.parts[1].bytes.size());
  const int64_t threads = rows * (cols / G);
  constexpr int kBlock = 128;
  quantize_e2m1_kernel<<<static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0, cudaStreamPerThread>>>(
      dw.get(), dh.get(), rows, cols, G, mode, ts, reinterpret_cast<uint32_t*>(dq.get()), ds.get());
  check_launch("fp4 kernel");
  dq.download(out.parts[0].bytes.data());
  ds.download(out.parts[1].bytes.data());
  return out;
}

}  // namespace

QuantizedMatrix quantize_fp4(const FormatTraits& f, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& o) {
  return quantize_e2m1(f, w, rows, cols, o, ScaleMode::kF16);
}
QuantizedMatrix quantize_mxfp4(const FormatTraits& f, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& o) {
  return quantize_e2m1(f, w, rows, cols, o, ScaleMode::kE8M0);
}
QuantizedMatrix quantize_nvfp4(const FormatTraits& f, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& o) {
  return quantize_e2m1(f, w, rows, cols, o, ScaleMode::kE4M3);
}

}  // namespace eq::quant::cuda
