// fp4_gG: E2M1 codes with an fp16 scale per group of G along K.
#include "quant/fp4.h"

#include <algorithm>
#include <string>

#include "core/numeric.h"
#include "quant/fp4_common.h"
#include "quant/quantize_common.h"

namespace eq::quant {

template <int G>
std::vector<PartSpec> fp4_part_specs(int64_t rows, int64_t cols) {
  return {{"qweight", DType::kU32, {cols / 8, rows}}, {"scales", DType::kF16, {cols / G, rows}}};
}

template <int G>
size_t fp4_packed_bytes(int64_t rows, int64_t cols) {
  return specs_nbytes(fp4_part_specs<G>(rows, cols));
}

namespace {
// The nearest fp16 scale, kept finite (weights beyond 6 * 65504 saturate).
float round_to_f16(float s) { return f16_to_f32(f32_to_f16(std::min(s, 65504.0f))); }
}  // namespace

template <int G>
QuantizedMatrix quantize_fp4(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options) {
  static const FormatTraits& format = format_by_name("fp4_g" + std::to_string(G));
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint16_t* scales = reinterpret_cast<uint16_t*>(out.parts[1].bytes.data());
  quantize_e2m1_stream(w, rows, cols, G, options, out, [&](const float* wg, const float* h, int64_t g, int64_t n) {
    const float s = search_e2m1_scale(wg, h, G, round_to_f16);
    scales[g * rows + n] = f32_to_f16(s);
    return s;
  });
  return out;
}

#define EQ_INSTANTIATE_FP4(G)                                                                                \
  template QuantizedMatrix quantize_fp4<G>(const float*, int64_t, int64_t, const QuantizeOptions&);         \
  template std::vector<PartSpec> fp4_part_specs<G>(int64_t, int64_t);                                        \
  template size_t fp4_packed_bytes<G>(int64_t, int64_t);
EQ_INSTANTIATE_FP4(16)
EQ_INSTANTIATE_FP4(32)
EQ_INSTANTIATE_FP4(64)
EQ_INSTANTIATE_FP4(128)
#undef EQ_INSTANTIATE_FP4

}  // namespace eq::quant
