// Helpers shared by the quantizers of every format: input checks with
// messages naming the tensor and position, allocation of parts from a
// format's part_specs, and per-group importance weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/format.h"

namespace eq::quant {

// Throws eq::Error (invalid input) when W has a NaN/Inf, naming the tensor,
// the format and the (row, col); when the shape is empty or not a multiple of
// the format's row/col multiples; when importance has a negative or
// non-finite entry. Never truncates.
void check_quantize_input(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                          const QuantizeOptions& options);

// A QuantizedMatrix with zero-filled parts laid out by format.part_specs.
QuantizedMatrix allocate_quantized(const FormatTraits& format, int64_t rows, int64_t cols);

// Byte size of parts as declared by part_specs (for FormatTraits::packed_bytes).
size_t specs_nbytes(const std::vector<PartSpec>& specs);

// Importance weights of one group of input channels [k0, k0 + n): the given
// ones, or all ones when importance is null or sums to zero over the group (an
// all-zero group leaves the error indifferent, so fall back to plain MSE).
void group_importance(const float* importance, int64_t k0, int n, float* out);

// The tensor name for messages ("<unnamed>" when empty).
std::string tensor_label(const QuantizeOptions& options);

}  // namespace eq::quant
