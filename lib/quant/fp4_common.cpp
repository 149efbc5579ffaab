#include "quant/fp4_common.h"

#include <algorithm>
#include <vector>

#include "quant/packed_stream.h"
#include "quant/quantize_common.h"

namespace eq::quant {

namespace {
float e2m1_value(uint32_t code) { return kE2M1Values[code]; }
DecodePanelFn e2m1_panel_decoder(const QuantKernels& k, int) { return k.decode_table4; }
// 2 * value + 12 by code: small unsigned integers (zero at 12), read with half the scale.
constexpr uint8_t kE2M1Doubled[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
}  // namespace

const StreamCodes kE2M1StreamCodes{.value = e2m1_value,
                                   .panel_decoder = e2m1_panel_decoder,
                                   .values = kE2M1Values,
                                   .int8_bytes = kE2M1Doubled,
                                   .int8_offset = 12,
                                   .int8_scale = 0.5f};
const StreamEncoding kFp4Stream{.codes = &kE2M1StreamCodes, .scale_kind = ScaleKind::kF16};
const StreamEncoding kMxfp4Stream{.codes = &kE2M1StreamCodes, .scale_kind = ScaleKind::kE8M0};
const StreamEncoding kNvfp4Stream{.codes = &kE2M1StreamCodes, .scale_kind = ScaleKind::kE4M3, .has_tensor_scale = true};

float search_e2m1_scale(const float* w, const float* h, int n, const ScaleRounder& round_scale) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
  if (amax == 0.0f) return 0.0f;
  bool one_magnitude = true;
  for (int i = 0; i < n; ++i) one_magnitude &= (w[i] == 0.0f || std::fabs(w[i]) == amax);

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
    for (int c = 7; c >= 1; --c) consider(amax / kE2M1Values[c]);
  constexpr int kSteps = 28;
  for (int i = 0; i <= kSteps; ++i) consider(amax / (4.5f + 3.5f * static_cast<float>(i) / kSteps));
  // Least-squares refit of the scale for the chosen codes, then re-round.
  for (int iter = 0; iter < 2 && best_s > 0.0f; ++iter) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double v = kE2M1Values[e2m1_code(w[i] / best_s)];
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

void quantize_e2m1_stream(const float* w, int64_t rows, int64_t cols, int group, const QuantizeOptions& options,
                          QuantizedMatrix& out,
                          const std::function<float(const float* wg, const float* h, int64_t g, int64_t n)>& choose_scale) {
  uint32_t* qweight = reinterpret_cast<uint32_t*>(out.parts[0].bytes.data());
  std::vector<float> h(static_cast<size_t>(group));
  const int64_t groups = cols / group;
  for (int64_t g = 0; g < groups; ++g) {
    group_importance(options.importance, g * group, group, h.data());
    for (int64_t n = 0; n < rows; ++n) {
      const float* wg = w + n * cols + g * group;
      const float s = choose_scale(wg, h.data(), g, n);
      if (s == 0.0f) continue;  // codes stay 0
      for (int i = 0; i < group; ++i) stream_put(qweight, rows, 4, g * group + i, n, e2m1_code(wg[i] / s));
    }
  }
}

}  // namespace eq::quant
