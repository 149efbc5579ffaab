#include "quant/trellis/codebook.h"

#include <cstddef>
#include <vector>

namespace eq::quant::trellis {

// Generated once (Gaussian quantiles (i + 0.5) / 128 times 22, rounded, in an
// order shuffled by a fixed seed) and frozen here and in docs/formats.md.
const int8_t kLutA[128] = {
    38, 32, 5, -4, 17, -6, 28, -16, 11, 40, 34, -11, -1, 2, -8, -7,
    42, -5, -7, -19, 26, 8, 30, -15, -1, -19, 1, 5, 36, 50, 7, -21,
    -10, -26, 0, -16, 15, 18, -2, -3, -5, -38, 3, 59, 9, 11, 2, -24,
    -2, 24, 19, -36, -28, 31, 33, -23, 13, 20, 23, -32, 28, 11, -20, 4,
    4, -50, -42, 0, -2, -9, -25, 7, -3, -28, 6, -27, -40, 21, -23, -10,
    27, -6, 12, -17, 15, -9, -22, 9, 20, -59, 12, -11, -12, -20, -14, 19,
    -4, 45, -34, -13, -17, -14, -18, 25, 14, 14, 22, 3, 10, 8, -31, -45,
    10, 17, -5, 16, 6, -12, 23, -33, -11, -8, -30, 2, 16, 5, 1, -15};
const int8_t kLutB[128] = {
    -4, 5, 2, -12, -4, -16, -23, 6, -42, -38, -17, 8, -6, -26, 4, -9,
    11, 3, 5, -7, 33, 20, -22, 59, -2, 34, -14, 28, 16, -24, -15, -10,
    -34, -50, -7, 19, 22, -11, 11, -27, 0, 3, 30, 12, 36, 32, -8, -40,
    0, -59, 7, -1, -28, 1, -23, -11, -5, 31, 38, 10, -14, -32, 27, -20,
    -10, 16, 21, -8, 7, 11, -18, -36, 9, 20, -17, 28, 24, 8, 5, 50,
    15, -16, 12, -5, 15, -1, -2, -21, 23, 6, 26, -19, -12, -11, -45, -33,
    14, 2, 40, 2, 14, -2, -19, -25, 18, -9, 19, 4, 23, 42, 17, 45,
    -28, 13, 1, -20, -30, -31, 9, 25, -6, -3, -3, -5, 10, -15, -13, 17};

Code code_of_format(std::string_view name) { return name.ends_with("_lut") ? Code::kLut : Code::k1mad; }

const float* code_table(Code code) {
  if (code == Code::k1mad) return code_table_1mad();
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << kStateBits);
    for (uint32_t s = 0; s < t.size(); ++s) t[s] = static_cast<float>(code_lut(s));
    return t;
  }();
  return table.data();
}

const float* code_table_1mad() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << kStateBits);
    for (uint32_t s = 0; s < t.size(); ++s) t[s] = static_cast<float>(code_1mad(s));
    return t;
  }();
  return table.data();
}

}  // namespace eq::quant::trellis
