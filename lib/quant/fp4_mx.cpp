// mxfp4 (OCP Microscaling v1.0): blocks of 32 E2M1 codes sharing an E8M0
// scale 2^(byte - 127).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/fp4.h"
#include "quant/fp4_common.h"
#include "quant/quantize_common.h"

namespace eq::quant {

namespace {

constexpr int kMxGroup = 32;
constexpr int kEmptyScaleByte = 127;  // an all-zero block stores 2^0 and codes 0


QuantizedMatrix quantize_mx(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                            const QuantizeOptions& options, bool search_neighbours) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint8_t* scales = out.parts[1].bytes.data();
  quantize_e2m1_stream(w, rows, cols, kMxGroup, options, out, [&](const float* wg, const float* h, int64_t g, int64_t n) {
    int e = 0;
    if (!e2m1_ops::mx_exponent(wg, h, search_neighbours, &e)) {
      scales[g * rows + n] = kEmptyScaleByte;
      return 0.0f;
    }
    scales[g * rows + n] = static_cast<uint8_t>(e + 127);
    return std::ldexp(1.0f, e);
  });
  return out;
}

}  // namespace

QuantizedMatrix quantize_mxfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options) {
  return quantize_mx(format, w, rows, cols, options, true);
}

QuantizedMatrix quantize_mxfp4_floor_rule(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options) {
  return quantize_mx(format_by_name("mxfp4"), w, rows, cols, options, false);
}

std::vector<PartSpec> mxfp4_part_specs(const FormatTraits&, int64_t rows, int64_t cols) {
  return {{"qweight", DType::kU32, {cols / 8, rows}}, {"scales", DType::kF8_E8M0, {cols / kMxGroup, rows}}};
}

// Release block (r, g) holds elements 32g .. 32g+31 of row r, two per byte,
// low nibble first; our stream word (k/8, r) holds elements 8w .. 8w+7, one
// per nibble, low nibble first. So stream word 4g + q is exactly bytes
// 4q .. 4q+3 of block (r, g) read little-endian: a transpose, no recoding.
QuantizedMatrix import_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t cols,
                             std::string_view tensor_name) {
  static const FormatTraits& format = format_by_name("mxfp4");
  const std::string name = tensor_name.empty() ? std::string("<unnamed>") : std::string(tensor_name);
  if (rows <= 0 || cols <= 0 || cols % kMxGroup != 0)
    invalid("tensor '" + name + "': cannot import [" + std::to_string(rows) + ", " + std::to_string(cols) +
            "] as mxfp4: needs a non-empty shape with columns a multiple of 32");
  const int64_t groups = cols / kMxGroup;
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint32_t* qweight = reinterpret_cast<uint32_t*>(out.parts[0].bytes.data());
  uint8_t* our_scales = out.parts[1].bytes.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t s = scales[r * groups + g];
      if (s == 0xFF)
        invalid("tensor '" + name + "': mxfp4 scale byte 0xff (NaN) at row " + std::to_string(r) + ", group " +
                std::to_string(g) + " cannot be imported");
      our_scales[g * rows + r] = s;
      const uint8_t* b = blocks + (r * groups + g) * 16;
      for (int64_t q = 0; q < 4; ++q) {
        const uint8_t* w = b + 4 * q;
        qweight[(4 * g + q) * rows + r] = static_cast<uint32_t>(w[0]) | static_cast<uint32_t>(w[1]) << 8 |
                                          static_cast<uint32_t>(w[2]) << 16 | static_cast<uint32_t>(w[3]) << 24;
      }
    }
  }
  return out;
}

}  // namespace eq::quant
