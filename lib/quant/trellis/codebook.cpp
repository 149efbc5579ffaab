#include "quant/trellis/codebook.h"

#include <cstddef>
#include <vector>

namespace eq::quant::trellis {

// Generated once (Gaussian quantiles (i + 0.5) / 128 times 22, rounded, shuffled
// by a fixed seed; P a shuffled identity) and frozen here and in docs/formats.md.
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
const uint8_t kLutP[128] = {
    120, 89, 37, 16, 96, 41, 88, 44, 2, 69, 60, 95, 26, 82, 17, 28,
    56, 66, 126, 111, 115, 49, 14, 93, 78, 53, 108, 72, 124, 51, 11, 31,
    99, 110, 47, 6, 46, 105, 22, 73, 21, 39, 38, 116, 54, 118, 45, 33,
    29, 8, 25, 23, 52, 55, 117, 114, 92, 81, 86, 109, 61, 40, 35, 5,
    103, 27, 87, 67, 0, 80, 74, 97, 32, 10, 101, 122, 50, 48, 94, 77,
    12, 70, 113, 42, 121, 64, 100, 84, 24, 98, 68, 119, 30, 107, 43, 57,
    19, 91, 123, 127, 15, 4, 62, 65, 34, 85, 112, 13, 7, 125, 106, 83,
    9, 79, 20, 71, 59, 76, 18, 75, 58, 3, 36, 90, 102, 1, 104, 63};

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
