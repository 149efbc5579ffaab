// AVX2 panel decoder of 4-bit table codes: the 16 columns as two ymm halves;
// the 16-entry value table is two 8-entry vpermps lookups blended on bit 3
// of the code.
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void decode_table4_avx2(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales,
                        const float* /*biases*/, const float* values, int group, float* out) {
  const __m256 lut_low = _mm256_loadu_ps(values);
  const __m256 lut_high = _mm256_loadu_ps(values + 8);
  for (int64_t r = 0; r < k_count / 8; ++r) {
    const float* s = scales + ((r * 8) / group) * kPanelWidth;
    float* o = out + r * 8 * kPanelWidth;
    for (int half = 0; half < 2; ++half) {
      __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qweight + r * ld + half * 8));
      const __m256 sv = _mm256_loadu_ps(s + half * 8);
      for (int i = 0; i < 8; ++i) {
        // vpermps uses the low 3 bits; bit 3 moved to the sign selects the upper half of the table.
        const __m256 low = _mm256_permutevar8x32_ps(lut_low, w);
        const __m256 high = _mm256_permutevar8x32_ps(lut_high, w);
        const __m256 v = _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(w, 28)));
        _mm256_storeu_ps(o + i * kPanelWidth + half * 8, _mm256_mul_ps(v, sv));
        w = _mm256_srli_epi32(w, 4);
      }
    }
  }
}

}  // namespace eq::quant::kernels
