#include "quant/trellis/codebook.h"

#include <cstddef>
#include <vector>

namespace eq::quant::trellis {

// Generated once (Gaussian quantiles (i + 0.5) / 64 times 22, rounded, in an
// order shuffled by a fixed seed) and frozen here and in docs/formats.md.
const int8_t kLutA[kLutEntries] = {
    -20, -10, -32, 23, 3, 18, 20, -1, -53, 10, 6, 7, 39, 32, 13, 15,
    -26, 22, 14, -6, 11, 7, -12, 0, 44, -7, -35, -4, 12, -44, 8, -9,
    9, -15, 28, -2, -39, 1, 30, 26, 19, -30, -14, 0, 24, 2, 53, -13,
    35, -22, -5, -28, -19, 4, -24, -11, 5, -8, 17, -23, -17, -3, -7, -18};
const int8_t kLutB[kLutEntries] = {
    23, 3, 35, 5, 24, -1, -11, -6, -35, -30, -3, -2, 18, -15, -39, 10,
    -9, -28, -4, 14, 0, 32, -10, 7, 30, 17, 1, -14, 12, -13, 0, 9,
    -26, -44, 15, -7, 11, 6, -8, -17, 53, -5, -20, -18, 28, 20, 13, -32,
    8, -53, -24, 39, -19, 22, -12, 7, 19, -22, 26, 44, 2, -23, 4, -7};


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
