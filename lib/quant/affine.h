// Affine integer formats intB_gG (B in {2, 3, 4, 8}, G in {32, 64, 128}):
// unsigned B-bit codes q in the column bit-stream layout (packed_stream.h),
// value = q * scale + bias with an fp16 scale and fp16 bias per group of G
// along K. Layout: docs/formats.md, "affine int".
#pragma once

#include <cstdint>
#include <vector>

#include "quant/format.h"
#include "quant/packed_stream.h"

namespace eq::quant {

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
