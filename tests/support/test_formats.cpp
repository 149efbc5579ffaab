#include "support/test_formats.h"

#include <mutex>

#include "quant/affine.h"
#include "quant/fp4.h"

namespace eq::test {

namespace {

// Each line is what the row would be in registry_rows() (lib/quant/registry.cpp),
// passed to add_format_for_testing instead.
void add_test_rows() {
  quant::add_format_for_testing(
      quant::affine_row(4, 16, "int4_g16", "4-bit affine, fp16 scale+bias per 16 weights (6 bits)"));
  quant::add_format_for_testing(quant::fp4_row(8, "fp4_g8", "FP4 E2M1, fp16 scale per 8 weights along K (6 bits)"));
}

}  // namespace

std::span<const quant::FormatTraits> all_rows() {
  static std::once_flag once;
  std::call_once(once, add_test_rows);
  return quant::all_formats();
}

}  // namespace eq::test
