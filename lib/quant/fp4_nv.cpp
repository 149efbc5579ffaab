// nvfp4: blocks of 16 E2M1 codes sharing an fp8 E4M3 scale, times one fp32
// scale per tensor.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/numeric.h"
#include "quant/fp4.h"
#include "quant/fp4_common.h"
#include "quant/quantize_common.h"

namespace eq::quant {

namespace {

constexpr int kNvGroup = 16;

}  // namespace

QuantizedMatrix quantize_nvfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  float amax = 0.0f;
  for (int64_t i = 0; i < rows * cols; ++i) amax = std::max(amax, std::fabs(w[i]));
  const float ts = e2m1_ops::nvfp4_tensor_scale(amax);
  std::memcpy(out.parts[2].bytes.data(), &ts, sizeof(float));
  uint8_t* scales = out.parts[1].bytes.data();
  const auto round_to_e4m3 = [ts](float s) { return fp8_e4m3_to_f32(f32_to_fp8_e4m3(s / ts, true)) * ts; };
  quantize_e2m1_stream(w, rows, cols, kNvGroup, options, out, [&](const float* wg, const float* h, int64_t g, int64_t n) {
    const float s = e2m1_ops::search_scale(wg, h, kNvGroup, round_to_e4m3);
    scales[g * rows + n] = f32_to_fp8_e4m3(s / ts, true);  // exact: s / ts is an E4M3 value
    return s;
  });
  return out;
}

std::vector<PartSpec> nvfp4_part_specs(const FormatTraits&, int64_t rows, int64_t cols) {
  return {{"qweight", DType::kU32, {cols / 8, rows}},
          {"scales", DType::kF8_E4M3, {cols / kNvGroup, rows}},
          {"tensor_scale", DType::kF32, {1}}};
}

}  // namespace eq::quant
