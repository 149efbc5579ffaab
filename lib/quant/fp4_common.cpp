#include "quant/fp4_common.h"

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
      for (int i = 0; i < group; ++i) stream_put(qweight, rows, 4, g * group + i, n, e2m1_ops::code(wg[i] / s));
    }
  }
}

}  // namespace eq::quant
