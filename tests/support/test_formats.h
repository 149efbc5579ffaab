// Format rows that only the tests register (docs/adding-a-format.md, "Trying
// a row in the tests"): rows whose shapes the registry's own rows never
// reach, run through every generic suite as if they were registered.
//   int4_g16: affine, groups of 16 (the int8 panels take multiples of 32:
//             the batch kernel falls back to fp32 panels).
//   fp4_g8:   E2M1, groups of 8 (the SIMD decode kernels take multiples of
//             16: the decode kernel falls back to the generic one).
#pragma once

#include <span>
#include <string_view>

#include "quant/format.h"

namespace eq::test {

inline constexpr std::string_view kTestRowNames[] = {"int4_g16", "fp4_g8"};

// Every row: the registry's, then the test rows (added on the first call).
// The generic suites iterate this instead of quant::all_formats().
std::span<const quant::FormatTraits> all_rows();

}  // namespace eq::test
