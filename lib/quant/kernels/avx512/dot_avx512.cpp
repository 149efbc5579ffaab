// AVX-512 panel accumulation (4 rows of x share each panel load) and dots.
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void panel_fma_avx512(const float* panel, int64_t k_count, const float* x, int64_t ldx, int64_t m_rows,
                      float* acc) {
  int64_t i = 0;
  for (; i + 4 <= m_rows; i += 4) {
    const float* x0 = x + i * ldx;
    const float* x1 = x0 + ldx;
    const float* x2 = x1 + ldx;
    const float* x3 = x2 + ldx;
    float* a = acc + i * kPanelWidth;
    __m512 a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + 16), a2 = _mm512_loadu_ps(a + 32),
           a3 = _mm512_loadu_ps(a + 48);
    for (int64_t k = 0; k < k_count; ++k) {
      const __m512 p = _mm512_loadu_ps(panel + k * kPanelWidth);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(x0[k]), p, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(x1[k]), p, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(x2[k]), p, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(x3[k]), p, a3);
    }
    _mm512_storeu_ps(a, a0);
    _mm512_storeu_ps(a + 16, a1);
    _mm512_storeu_ps(a + 32, a2);
    _mm512_storeu_ps(a + 48, a3);
  }
  for (; i < m_rows; ++i) {
    const float* xi = x + i * ldx;
    float* a = acc + i * kPanelWidth;
    __m512 a0 = _mm512_loadu_ps(a);
    for (int64_t k = 0; k < k_count; ++k)
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(xi[k]), _mm512_loadu_ps(panel + k * kPanelWidth), a0);
    _mm512_storeu_ps(a, a0);
  }
}

float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  // Horizontal sum through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(s0, s1));
  float total = 0.0f;
  for (int j = 0; j < 8; ++j) lanes[j] += lanes[j + 8];
  for (int j = 0; j < 4; ++j) lanes[j] += lanes[j + 4];
  total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
  return total;
}

void int8_to_f32_avx512(const int8_t* q, float scale, float* out, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), s));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace eq::quant::kernels

namespace eq::quant::kernels {

// Column j of the panel is a stride-16 gather.
void panel_to_rows_avx512(const float* panel, int64_t k_count, int64_t nb, float* out, int64_t ldo) {
  const __m512i stride =
      _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  int64_t k = 0;
  for (; k + 16 <= k_count; k += 16)
    for (int64_t j = 0; j < nb; ++j)
      _mm512_storeu_ps(out + j * ldo + k, _mm512_i32gather_ps(stride, panel + k * kPanelWidth + j, 4));
  for (; k < k_count; ++k)  // a chunk of groups of 8 ends between 16s
    for (int64_t j = 0; j < nb; ++j) out[j * ldo + k] = panel[k * kPanelWidth + j];
}

}  // namespace eq::quant::kernels
