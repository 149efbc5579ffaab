// The one finiteness rule for weights: every float value a command reads from
// a checkpoint or a packed folder (plain float tensors, fp8 and mxfp4 tensors
// as decoded, router biases, attention sinks, copied non-expert tensors) is
// finite, or the read is refused naming the tensor and the flat index of the
// first non-finite value. What counts is the decoded float32: a stored
// NaN/Inf, an F16 or BF16 infinity, and a finite code times a finite scale
// whose product overflows float32 (an fp8 block scale too large for its
// codes, an E8M0 scale of 0xFE with a large E2M1 code) are all non-finite.
// A non-finite weight only poisons every product it enters, so it is refused
// before any work rather than surfacing as garbage text or a "nan" figure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace eq::io {

// "[i, j, k]" of flat element `flat` of a row-major tensor of `shape`.
std::string flat_position(uint64_t flat, const std::vector<int64_t>& shape);

// Index of the first non-finite value of v[0, n), or n when all are finite.
size_t first_non_finite(const float* v, size_t n);

// Throws eq::Error (invalid input, exit 2) when v[0, n) holds a non-finite
// value: "<where>: tensor '<tensor>' holds a non-finite value (nan) at flat
// index <first_flat + i> [i, j, k]", the position taken from `shape` (the
// whole tensor's; v is its elements from flat index `first_flat` on).
void require_finite(const float* v, size_t n, const std::string& where, std::string_view tensor,
                    const std::vector<int64_t>& shape, uint64_t first_flat = 0);

// The same rule for a stored float tensor of a file, converted a bounded
// chunk at a time (never the whole tensor in float32). Integer dtypes are
// not weights and pass.
void require_finite_stored(const TensorView& view, const std::string& where);

}  // namespace eq::io
