// fp4_gG, mxfp4 and nvfp4 on the GPU: one thread per (group, output row),
// each running fp4_common.cpp / fp4_mx.cpp / fp4_nv.cpp's search op for op
// (same float and double operations in the same order, no contraction:
// -fmad=false), so scales and codes equal the CPU's bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/quantize_common.h"

namespace eq::quant::cuda {

namespace {

constexpr int kMaxGroup = 128;  // the largest fp4 group (fp4_g128)

__constant__ float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
__constant__ float kEdges[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

__device__ uint32_t e2m1_code(float x) {
  const float a = fabsf(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return (x < 0.0f && c != 0) ? (c | 8u) : c;
}

__device__ float e2m1_group_error(const float* w, const float* h, int n, float s) {
  float err = 0.0f;
  if (s == 0.0f) {
    for (int i = 0; i < n; ++i) err += h[i] * w[i] * w[i];
    return err;
  }
  for (int i = 0; i < n; ++i) {
    const float d = w[i] - kValues[e2m1_code(w[i] / s)] * s;
    err += h[i] * d * d;
  }
  return err;
}

enum class ScaleMode { kF16, kE8M0, kE4M3 };

struct Rounder {
  ScaleMode mode;
  float ts;  // nvfp4's tensor scale
  __device__ float operator()(float s) const {
    if (mode == ScaleMode::kF16) return f16_to_f32_device(f32_to_f16_device(fminf(s, 65504.0f)));
    return fp8_e4m3_to_f32_device(f32_to_fp8_e4m3_device(s / ts)) * ts;
  }
};

struct Event {
  float s;
  int i, order;
};
// The CPU's sort order (fp4_common.cpp): s descending, ties by position; a total order.
__device__ bool before(const Event& a, const Event& b) { return a.s > b.s || (a.s == b.s && a.order < b.order); }

// In-place heap sort by before(): any correct sort gives the same sequence under a total order.
__device__ void sort_events(Event* ev, int n) {
  auto sift = [&](int root, int end) {
    while (true) {
      int child = 2 * root + 1;
      if (child >= end) return;
      // a max-heap under "after": the element that sorts last at the root
      if (child + 1 < end && before(ev[child], ev[child + 1])) ++child;
      if (!before(ev[root], ev[child])) return;
      const Event t = ev[root];
      ev[root] = ev[child];
      ev[child] = t;
      root = child;
    }
  };
  for (int i = n / 2 - 1; i >= 0; --i) sift(i, n);
  for (int end = n - 1; end > 0; --end) {
    const Event t = ev[0];
    ev[0] = ev[end];
    ev[end] = t;
    sift(0, end);
  }
}

constexpr int kIntervalOptima = 4;

// fp4_common.cpp's e2m1_interval_optima; returns the count written to out.
__device__ int e2m1_interval_optima(const float* w, const float* h, int n, float* out) {
  Event ev[7 * kMaxGroup];
  int level[kMaxGroup];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (w[i] != 0.0f && h[i] > 0.0f)
      for (int k = 0; k < 7; ++k) {
        ev[m] = {fabsf(w[i]) / kEdges[k], i, m};
        ++m;
      }
  sort_events(ev, m);
  for (int i = 0; i < n; ++i) level[i] = 0;
  double num = 0.0, den = 0.0;
  // The best kIntervalOptima (error, s) pairs in ascending order (std::partial_sort's result).
  double best_err[kIntervalOptima];
  float best_s[kIntervalOptima];
  int found = 0;
  for (int k = 0; k < m; ++k) {
    const Event& e = ev[k];
    const double a = fabs(static_cast<double>(w[e.i])), he = h[e.i];
    const double v0 = kValues[level[e.i]], v1 = kValues[level[e.i] + 1];
    ++level[e.i];
    num += he * a * (v1 - v0);
    den += he * (v1 * v1 - v0 * v0);
    const double upper = e.s, lower = k + 1 < m ? ev[k + 1].s : 0.0;
    if (!(den > 0.0) || upper <= lower) continue;
    const double q = num / den;
    const double s = q < lower ? lower : (upper < q ? upper : q);
    const double err = s * s * den - 2.0 * s * num;
    const float sf = static_cast<float>(s);
    // insert (err, sf) into the sorted top list
    int pos = found;
    while (pos > 0 && (err < best_err[pos - 1] || (err == best_err[pos - 1] && sf < best_s[pos - 1]))) --pos;
    if (pos >= kIntervalOptima) continue;
    const int last = found < kIntervalOptima ? found : kIntervalOptima - 1;
    for (int j = last; j > pos; --j) {
      best_err[j] = best_err[j - 1];
      best_s[j] = best_s[j - 1];
    }
    best_err[pos] = err;
    best_s[pos] = sf;
    if (found < kIntervalOptima) ++found;
  }
  for (int k = 0; k < found; ++k) out[k] = best_s[k];
  return found;
}

// fp4_common.cpp's search_e2m1_scale.
__device__ float search_e2m1_scale(const float* w, const float* h, int n, const Rounder& round_scale) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(w[i]));
  if (amax == 0.0f) return 0.0f;
  bool one_magnitude = true;
  for (int i = 0; i < n; ++i) one_magnitude &= (w[i] == 0.0f || fabsf(w[i]) == amax);

  float best_s = 0.0f;
  float best_err = e2m1_group_error(w, h, n, 0.0f);
  auto consider = [&](float s) {
    const float r = round_scale(s);
    if (!(r > 0.0f)) return;
    const float e = e2m1_group_error(w, h, n, r);
    if (e < best_err) {
      best_err = e;
      best_s = r;
    }
  };
  if (one_magnitude)
    for (int c = 7; c >= 1; --c) consider(amax / kValues[c]);
  constexpr int kSteps = 28;
  for (int i = 0; i <= kSteps; ++i) consider(amax / (4.5f + 3.5f * static_cast<float>(i) / kSteps));
  for (int iter = 0; iter < 2 && best_s > 0.0f; ++iter) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double v = kValues[e2m1_code(w[i] / best_s)];
      num += static_cast<double>(h[i]) * w[i] * v;
      den += static_cast<double>(h[i]) * v * v;
    }
    if (den <= 0.0) break;
    const float before_err = best_err;
    consider(static_cast<float>(num / den));
    if (!(best_err < before_err)) break;
  }
  float optima[kIntervalOptima];
  const int count = e2m1_interval_optima(w, h, n, optima);
  for (int k = 0; k < count; ++k) {
    const float s = optima[k];
    consider(s);
    const float r = round_scale(s);
    if (r > 0.0f && r != s) consider(2.0f * s - r);
  }
  return best_s;
}

// fp4_mx.cpp's choice for one block: the floor-rule exponent or a neighbour.
__device__ float mx_scale(const float* wg, const float* h, uint8_t* byte) {
  constexpr int kGroup = 32;
  float amax = 0.0f;
  for (int i = 0; i < kGroup; ++i) amax = fmaxf(amax, fabsf(wg[i]));
  if (amax == 0.0f) {
    *byte = 127;
    return 0.0f;
  }
  int e;
  frexpf(amax, &e);
  const int e0 = e - 1 - 2;
  int best_e = e0 < -127 ? -127 : (e0 > 127 ? 127 : e0);
  float best_err = e2m1_group_error(wg, h, kGroup, ldexpf(1.0f, best_e));
  for (int ne : {e0 - 1, e0 + 1}) {
    if (ne < -127 || ne > 127) continue;
    const float err = e2m1_group_error(wg, h, kGroup, ldexpf(1.0f, ne));
    if (err < best_err) {
      best_err = err;
      best_e = ne;
    }
  }
  *byte = static_cast<uint8_t>(best_e + 127);
  return ldexpf(1.0f, best_e);
}

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
    s = mx_scale(wg, hg, static_cast<uint8_t*>(scales) + idx);
  } else {
    const Rounder r{mode, ts};
    s = search_e2m1_scale(wg, hg, group, r);
    if (mode == ScaleMode::kF16)
      static_cast<uint16_t*>(scales)[idx] = f32_to_f16_device(s);
    else
      static_cast<uint8_t*>(scales)[idx] = f32_to_fp8_e4m3_device(s / ts);
  }
  const int64_t word0 = g * group / 8;
  for (int q = 0; q < group / 8; ++q) {
    uint32_t word = 0;
    if (s != 0.0f)
      for (int i = 0; i < 8; ++i) word |= e2m1_code(wg[q * 8 + i] / s) << (4 * i);
    qweight[(word0 + q) * rows + n] = word;
  }
}

QuantizedMatrix quantize_e2m1(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                              const QuantizeOptions& options, ScaleMode mode) {
  check_quantize_input(format, w, rows, cols, options);
  require_gpu();
  const int G = format.group_size;
  EQ_CHECK(G % 8 == 0 && G <= kMaxGroup, "fp4 group " + std::to_string(G) + " on the GPU");
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  float ts = 1.0f;
  if (mode == ScaleMode::kE4M3) {
    // fp4_nv.cpp's tensor scale, on the host (one pass).
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * cols; ++i) amax = std::max(amax, std::fabs(w[i]));
    if (amax != 0.0f) {
      const float x = amax / (6.0f * 448.0f);
      int e;
      const float m = std::frexp(x, &e);
      ts = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
    }
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
