// Affine integer formats intB_gG (B in {2, 3, 4, 8}, G a multiple of 16):
// unsigned B-bit codes q in the column bit-stream layout (packed_stream.h),
// value = q * scale + bias with an fp16 scale and fp16 bias per group of G
// along K. Layout: docs/formats.md, "affine int".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "quant/format.h"
#include "quant/packed_stream.h"

namespace eq::quant {

// The registry row intB_gG: B-bit codes (2, 3, 4 or 8), an fp16 scale and
// bias per group of G along K (G a multiple of 16; of 32 for B = 3, whose
// panel decoders take 32 codes at a time). The kernels' own preconditions are
// the row's: int8 panels only for G a multiple of 32 and B in {2, 4, 8}; the
// decode kernel multiplies int8 codes except for B = 3 (codes straddle words).
FormatTraits affine_row(int B, int G, std::string_view name, std::string_view description);

// Unsigned B-bit codes (StreamCodes): value = code * scale + bias; and the
// affine rows' encoding (fp16 scales and biases).
extern const StreamCodes kUnsignedStreamCodes;
extern const StreamEncoding kAffineStream;

// Parts: qweight U32 [K*B/32, N], scales F16 [K/G, N], biases F16 [K/G, N].
QuantizedMatrix quantize_affine(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                const QuantizeOptions& options);
std::vector<PartSpec> affine_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

// The error-minimizing (scale, bias) of one group, both already rounded to
// fp16 (exposed for tests). codes (length n) receives the chosen codes.
struct AffineGroup {
  float scale = 0.0f, bias = 0.0f;
};
AffineGroup search_affine_group(const float* w, const float* h, int n, int bits, uint8_t* codes);

}  // namespace eq::quant
