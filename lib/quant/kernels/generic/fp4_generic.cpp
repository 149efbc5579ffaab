// Scalar E2M1 panel decoder (the fallback kernel; also handles any CPU).
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void decode_e2m1_generic(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales,
                         const float* /*biases*/, int group, float* out) {
  for (int64_t r = 0; r < k_count / 8; ++r) {
    const float* s = scales + ((r * 8) / group) * kPanelWidth;
    for (int j = 0; j < kPanelWidth; ++j) {
      uint32_t word = qweight[r * ld + j];
      for (int i = 0; i < 8; ++i, word >>= 4) out[(r * 8 + i) * kPanelWidth + j] = kE2M1Values[word & 15u] * s[j];
    }
  }
}

}  // namespace eq::quant::kernels
