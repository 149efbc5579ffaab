// Scalar panel decoder of 4-bit table codes (E2M1, nl4: value = values[code]
// * scale): the fallback kernel, also for any CPU.
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void decode_table4_generic(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales,
                           const float* /*biases*/, const float* values, int group, float* out) {
  for (int64_t r = 0; r < k_count / 8; ++r) {
    const float* s = scales + ((r * 8) / group) * kPanelWidth;
    for (int j = 0; j < kPanelWidth; ++j) {
      uint32_t word = qweight[r * ld + j];
      for (int i = 0; i < 8; ++i, word >>= 4) out[(r * 8 + i) * kPanelWidth + j] = values[word & 15u] * s[j];
    }
  }
}

}  // namespace eq::quant::kernels
