// nl4_gG: codes on a fixed non-uniform 16-level grid with an fp16 scale per
// group of G along K. The codes go through the same table kernels as E2M1
// (a float table for the panel decoders, a byte table for the int8 ones).
#include "quant/nl4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/gemv.h"
#include "quant/int8_panels.h"
#include "quant/quant_kernels.h"
#include "quant/quantize_common.h"

namespace eq::quant {

namespace {

constexpr std::array<float, 16> kValues = [] {
  std::array<float, 16> v{};
  for (int c = 0; c < 16; ++c) v[c] = static_cast<float>(kNl4Grid[c]) / 128.0f;
  return v;
}();

constexpr std::array<uint8_t, 16> kBytes = [] {
  std::array<uint8_t, 16> b{};
  for (int c = 0; c < 16; ++c) b[c] = static_cast<uint8_t>(kNl4Grid[c] + 128);
  return b;
}();

// Midpoints between consecutive values: code = number of midpoints below x.
constexpr std::array<float, 15> kMidpoints = [] {
  std::array<float, 15> m{};
  for (int c = 0; c < 15; ++c) m[c] = 0.5f * (kValues[c] + kValues[c + 1]);
  return m;
}();

float nl4_value(uint32_t code) { return kValues[code]; }
DecodePanelFn nl4_panel_decoder(const QuantKernels& k, int) { return k.decode_table4; }

// The nearest fp16 scale, kept finite and signed.
float round_signed_to_f16(float s) { return f16_to_f32(f32_to_f16(std::clamp(s, -65504.0f, 65504.0f))); }

// Weighted squared error of one group quantized with decoded scale s.
float group_error(const float* w, const float* h, int n, float s) {
  float err = 0.0f;
  if (s == 0.0f) {
    for (int i = 0; i < n; ++i) err += h[i] * w[i] * w[i];
    return err;
  }
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i) {
    const float d = w[i] - kValues[nl4_code(w[i] * inv)] * s;
    err += h[i] * d * d;
  }
  return err;
}

}  // namespace

const StreamCodes kNl4StreamCodes{.value = nl4_value,
                                  .panel_decoder = nl4_panel_decoder,
                                  .values = kValues.data(),
                                  .int8_bytes = kBytes.data(),
                                  .int8_offset = 128,
                                  .int8_scale = 1.0f / 128.0f};
const StreamEncoding kNl4Stream{.codes = &kNl4StreamCodes, .scale_kind = ScaleKind::kF16};

uint32_t nl4_code(float x) {
  uint32_t c = 0;
  for (float m : kMidpoints) c += static_cast<uint32_t>(x > m);
  return c;
}

float search_nl4_scale(const float* w, const float* h, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
  if (amax == 0.0f) return 0.0f;
  bool one_magnitude = true;
  for (int i = 0; i < n; ++i) one_magnitude &= (w[i] == 0.0f || std::fabs(w[i]) == amax);

  float best_s = 0.0f;
  float best_err = group_error(w, h, n, 0.0f);
  auto consider = [&](float s) {
    const float r = round_signed_to_f16(s);
    if (r == 0.0f || !std::isfinite(r)) return;
    const float e = group_error(w, h, n, r);
    if (e < best_err) {
      best_err = e;
      best_s = r;
    }
  };
  if (one_magnitude)
    for (float v : kValues) consider(amax / v), consider(-amax / v);
  constexpr int kSteps = 24;
  constexpr float kTop = 127.0f / 128.0f;
  for (int i = 0; i <= kSteps; ++i) {
    const float t = 0.7f + 0.6f * static_cast<float>(i) / kSteps;
    consider(amax / (t * kTop));
    consider(-amax / (t * kTop));
  }
  // Least-squares refit of the scale for the chosen codes, then re-round.
  for (int iter = 0; iter < 3 && best_s != 0.0f; ++iter) {
    double num = 0.0, den = 0.0;
    const float inv = 1.0f / best_s;
    for (int i = 0; i < n; ++i) {
      const double v = kValues[nl4_code(w[i] * inv)];
      num += static_cast<double>(h[i]) * w[i] * v;
      den += static_cast<double>(h[i]) * v * v;
    }
    if (den <= 0.0) break;
    const float before = best_err;
    consider(static_cast<float>(num / den));
    if (!(best_err < before)) break;
  }
  return best_s;
}

FormatTraits nl4_row(int G, std::string_view name, std::string_view description) {
  EQ_CHECK(G > 0 && G % 8 == 0,
           "nl4 row " + std::string(name) + ": group " + std::to_string(G) + " is not a multiple of 8");
  return {.name = name,
          .family = "nl4",
          .description = description,
          .weight_bits = 4,
          .bits_per_weight = 4.0 + 16.0 / G,
          .group_size = G,
          .row_multiple = 1,
          .col_multiple = G,
          .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}},
          .quantizer = quantize_nl4,
          .dequantize = stream_dequantize,
          .matmul = stream_matmul,
          .part_specs_of = nl4_part_specs,
          .gemv = &kStreamGemvInt8,
          .stream = &kNl4Stream,
          .dequantize_block = stream_dequantize_block,
          // Integer batch path: scales per 32 k (smaller groups stay on fp32).
          .int8_panels = G % 32 == 0 ? &kOffset128Table4Int8Panels : nullptr,
          .device_gemv = &cuda::kStreamDeviceGemv, .device_gemm = &cuda::kStreamDeviceGemm};
}

std::vector<PartSpec> nl4_part_specs(const FormatTraits& f, int64_t rows, int64_t cols) {
  return {{"qweight", DType::kU32, {cols / 8, rows}}, {"scales", DType::kF16, {cols / f.group_size, rows}}};
}

QuantizedMatrix quantize_nl4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint32_t* qweight = reinterpret_cast<uint32_t*>(out.parts[0].bytes.data());
  uint16_t* scales = reinterpret_cast<uint16_t*>(out.parts[1].bytes.data());
  const int G = format.group_size;
  std::vector<float> h(static_cast<size_t>(G));
  for (int64_t g = 0; g < cols / G; ++g) {
    group_importance(options.importance, g * G, G, h.data());
    for (int64_t n = 0; n < rows; ++n) {
      const float* wg = w + n * cols + g * G;
      const float s = search_nl4_scale(wg, h.data(), G);
      scales[g * rows + n] = f32_to_f16(s);
      if (s == 0.0f) continue;  // codes stay 0: value 0 under a zero scale
      const float inv = 1.0f / s;
      for (int i = 0; i < G; ++i) stream_put(qweight, rows, 4, g * G + i, n, nl4_code(wg[i] * inv));
    }
  }
  return out;
}

}  // namespace eq::quant
