// AVX-512 panel decoder of 4-bit table codes: one zmm holds the 16 columns of
// a word row; vpermps looks the 16 values up by nibble.
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void decode_table4_avx512(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales,
                          const float* /*biases*/, const float* values, int group, float* out) {
  const __m512 lut = _mm512_loadu_ps(values);
  const __m512i nibble = _mm512_set1_epi32(15);
  for (int64_t r = 0; r < k_count / 8; ++r) {
    __m512i w = _mm512_loadu_si512(qweight + r * ld);
    const __m512 s = _mm512_loadu_ps(scales + ((r * 8) / group) * kPanelWidth);
    float* o = out + r * 8 * kPanelWidth;
    for (int i = 0; i < 8; ++i) {
      const __m512 v = _mm512_permutexvar_ps(_mm512_and_si512(w, nibble), lut);
      _mm512_storeu_ps(o + i * kPanelWidth, _mm512_mul_ps(v, s));
      w = _mm512_srli_epi32(w, 4);
    }
  }
}

}  // namespace eq::quant::kernels
