// FormatTraits::dequantize_block: every format that has it, on every ISA this
// machine supports, gives the 16-row panels of W[r0:r1, c0:c1] equal bit for
// bit to dequantize() of the whole matrix, for interior, edge and whole
// blocks of odd-sized matrices; misaligned blocks are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/cpu_features.h"
#include "core/error.h"
#include "quant/format.h"
#include "quant/hadamard.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::normal_matrix;

class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) { set_active_isa_for_testing(isa); }
  ~IsaGuard() { set_active_isa_for_testing(detected_isa()); }
};

// A shape the format accepts that is not a multiple of 128 where it can avoid it.
std::pair<int64_t, int64_t> odd_shape(const FormatTraits& f) {
  if (f.family == "trellis") return {80, 48};        // Hadamard blocks 16 x 16
  if (f.group_size > 0) return {37, 3 * f.group_size};  // a partial last panel
  return {37, 29};
}

int64_t col_align(const FormatTraits& f, int64_t cols) {
  if (f.family == "trellis") return hadamard_block_size(cols);
  return f.group_size > 0 ? f.group_size : 1;
}
int64_t row_align(const FormatTraits& f, int64_t rows) { return f.family == "trellis" ? hadamard_block_size(rows) : 16; }

TEST(DequantizeBlock, PanelsEqualWholeDequantize) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    ASSERT_NE(f.dequantize_block, nullptr) << f.name;
    const auto [rows, cols] = odd_shape(f);
    const std::vector<float> w = normal_matrix(rows, cols, 7 + f.name.size(), 0.05f);
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
    const std::vector<float> whole = test::dequantized(q);
    const int64_t ra = row_align(f, rows), ca = col_align(f, cols);
    // (r0, r1, c0, c1): whole matrix, an interior block, the bottom-right edge.
    const int64_t blocks[3][4] = {{0, rows, 0, cols},
                                  {ra, std::min(rows, 2 * ra), ca, std::min(cols, 2 * ca)},
                                  {rows / ra * ra == rows ? rows - ra : rows / ra * ra, rows, cols - ca, cols}};
    for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
      if (isa > detected_isa()) continue;
      IsaGuard guard(isa);
      for (const auto& b : blocks) {
        const int64_t r0 = b[0], r1 = b[1], c0 = b[2], c1 = b[3], kc = c1 - c0;
        const int64_t panels = (r1 - r0 + 15) / 16;
        std::vector<float> out(static_cast<size_t>(panels * 16 * kc), NAN);
        f.dequantize_block(q.view(), r0, r1, c0, c1, out.data());
        int bad = 0;
        for (int64_t r = r0; r < r0 + panels * 16; ++r)
          for (int64_t c = c0; c < c1; ++c) {
            const float got = out[static_cast<size_t>((r - r0) / 16 * 16 * kc + (c - c0) * 16 + (r - r0) % 16)];
            const float want = r < r1 ? whole[static_cast<size_t>(r * cols + c)] : 0.0f;
            if (std::memcmp(&got, &want, sizeof(float)) != 0 && !(got == 0.0f && want == 0.0f)) ++bad;
          }
        EXPECT_EQ(bad, 0) << f.name << " isa " << isa_name(isa) << " block [" << r0 << ", " << r1 << ") x [" << c0
                          << ", " << c1 << ")";
      }
    }
  }
}

TEST(DequantizeBlock, RefusesMisalignedBlocks) {
  for (std::string_view name : {"fp4_g32", "int4_g64", "trellis3"}) {
    const FormatTraits& f = format_by_name(name);
    const int64_t rows = 128, cols = 256;
    const std::vector<float> w = normal_matrix(rows, cols, 3, 0.05f);
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
    std::vector<float> out(static_cast<size_t>(rows * cols));
    EXPECT_THROW(f.dequantize_block(q.view(), 8, 128, 0, 256, out.data()), Error) << name;   // rows not at 16
    EXPECT_THROW(f.dequantize_block(q.view(), 0, 128, 16, 256, out.data()), Error) << name;  // columns inside a group
    EXPECT_THROW(f.dequantize_block(q.view(), 0, 144, 0, 256, out.data()), Error) << name;   // past the end
  }
}

}  // namespace
}  // namespace eq::quant
