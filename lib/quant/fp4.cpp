// fp4_gG: E2M1 codes with an fp16 scale per group of G along K.
#include "quant/fp4.h"

#include <algorithm>
#include <string>

#include "core/numeric.h"
#include "core/error.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/fp4_common.h"
#include "quant/gemv.h"
#include "quant/int8_panels.h"
#include "quant/packed_stream.h"
#include "quant/quantize_common.h"

namespace eq::quant {

FormatTraits fp4_row(int G, std::string_view name, std::string_view description) {
  EQ_CHECK(G > 0 && G % 8 == 0, "fp4 row " + std::string(name) + ": group " + std::to_string(G) + " is not a multiple of 8");
  return {.name = name,
          .family = "fp4",
          .description = description,
          .weight_bits = 4,
          .bits_per_weight = 4.0 + 16.0 / G,
          .group_size = G,
          .row_multiple = 1,
          .col_multiple = G,
          .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}},
          .quantizer = quantize_fp4,
          .dequantize = stream_dequantize,
          .matmul = stream_matmul,
          .part_specs_of = fp4_part_specs,
          .gemv = &kStreamGemvInt8,
          .stream = &kFp4Stream,
          .dequantize_block = stream_dequantize_block,
          // Integer batch path: scales per 32 k (smaller groups stay on fp32).
          .int8_panels = G % 32 == 0 ? &kFp4Int8Panels : nullptr,
          .device_quantizer = cuda::quantize_fp4,
          .device_gemv = &cuda::kStreamDeviceGemv, .device_gemm = &cuda::kStreamDeviceGemm};
}

std::vector<PartSpec> fp4_part_specs(const FormatTraits& f, int64_t rows, int64_t cols) {
  return {{"qweight", DType::kU32, {cols / 8, rows}}, {"scales", DType::kF16, {cols / f.group_size, rows}}};
}

namespace {
// The nearest fp16 scale, kept finite (weights beyond 6 * 65504 saturate).
float round_to_f16(float s) { return f16_to_f32(f32_to_f16(std::min(s, 65504.0f))); }
}  // namespace

QuantizedMatrix quantize_fp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint16_t* scales = reinterpret_cast<uint16_t*>(out.parts[1].bytes.data());
  const int G = format.group_size;
  EQ_CHECK(G <= e2m1_ops::kMaxGroup, "fp4 group " + std::to_string(G));
  quantize_e2m1_stream(w, rows, cols, G, options, out, [&](const float* wg, const float* h, int64_t g, int64_t n) {
    const float s = e2m1_ops::search_scale(wg, h, G, round_to_f16);
    scales[g * rows + n] = f32_to_f16(s);
    return s;
  });
  return out;
}

}  // namespace eq::quant
