// nl4_gG: 4-bit codes on a fixed non-uniform 16-level grid, an fp16 scale per
// group of G along K, in the column bit-stream layout of fp4 (packed_stream.h).
// Layout and the grid's derivation: docs/formats.md "nl4".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "quant/format.h"
#include "quant/packed_stream.h"

namespace eq::quant {

// The grid as int8 levels, ascending; code c has value kNl4Grid[c] / 128.
// Fitted to group-scaled expert weights (docs/formats.md "nl4"): denser near
// zero, asymmetric (the scale's sign picks which end reaches 127).
inline constexpr int8_t kNl4Grid[16] = {-127, -100, -78, -61, -47, -33, -21, -9, 2, 13, 24, 36, 49, 64, 82, 106};

// nl4 codes in the column bit stream (StreamCodes): the float table for the
// panel decoders, and for the int8 kernels the bytes level + 128 (zero at
// 128) with the scale divided by 128.
extern const StreamCodes kNl4StreamCodes;
extern const StreamEncoding kNl4Stream;

// The nl4 code whose value is nearest to x (x = weight / scale); ties to the
// lower code.
uint32_t nl4_code(float x);

// The fp16 scale (decoded, possibly negative: the grid is asymmetric, so a
// group may use it either way up) minimizing the importance-weighted squared
// error of one group; 0 for an all-zero group. Candidates +-amax / (t * 127
// / 128) for t in [0.7, 1.3] (clipping the largest weights can pay), for
// groups whose nonzero weights share one magnitude a each +-a / value, then
// least-squares refits of the best.
float search_nl4_scale(const float* w, const float* h, int n);

// The registry row nl4_gG (G a multiple of 8).
FormatTraits nl4_row(int G, std::string_view name, std::string_view description);

// nl4_gG: qweight U32 [K/8, N], scales F16 [K/G, N].
QuantizedMatrix quantize_nl4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options);
std::vector<PartSpec> nl4_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

}  // namespace eq::quant
