// AVX2 panel accumulation (4 rows of x share each panel load) and dots.
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void panel_fma_avx2(const float* panel, int64_t k_count, const float* x, int64_t ldx, int64_t m_rows, float* acc) {
  int64_t i = 0;
  for (; i + 4 <= m_rows; i += 4) {
    const float* xr[4] = {x + i * ldx, x + (i + 1) * ldx, x + (i + 2) * ldx, x + (i + 3) * ldx};
    float* a = acc + i * kPanelWidth;
    __m256 lo0 = _mm256_loadu_ps(a), hi0 = _mm256_loadu_ps(a + 8);
    __m256 lo1 = _mm256_loadu_ps(a + 16), hi1 = _mm256_loadu_ps(a + 24);
    __m256 lo2 = _mm256_loadu_ps(a + 32), hi2 = _mm256_loadu_ps(a + 40);
    __m256 lo3 = _mm256_loadu_ps(a + 48), hi3 = _mm256_loadu_ps(a + 56);
    for (int64_t k = 0; k < k_count; ++k) {
      const __m256 plo = _mm256_loadu_ps(panel + k * kPanelWidth);
      const __m256 phi = _mm256_loadu_ps(panel + k * kPanelWidth + 8);
      __m256 xv = _mm256_set1_ps(xr[0][k]);
      lo0 = _mm256_fmadd_ps(xv, plo, lo0);
      hi0 = _mm256_fmadd_ps(xv, phi, hi0);
      xv = _mm256_set1_ps(xr[1][k]);
      lo1 = _mm256_fmadd_ps(xv, plo, lo1);
      hi1 = _mm256_fmadd_ps(xv, phi, hi1);
      xv = _mm256_set1_ps(xr[2][k]);
      lo2 = _mm256_fmadd_ps(xv, plo, lo2);
      hi2 = _mm256_fmadd_ps(xv, phi, hi2);
      xv = _mm256_set1_ps(xr[3][k]);
      lo3 = _mm256_fmadd_ps(xv, plo, lo3);
      hi3 = _mm256_fmadd_ps(xv, phi, hi3);
    }
    _mm256_storeu_ps(a, lo0);
    _mm256_storeu_ps(a + 8, hi0);
    _mm256_storeu_ps(a + 16, lo1);
    _mm256_storeu_ps(a + 24, hi1);
    _mm256_storeu_ps(a + 32, lo2);
    _mm256_storeu_ps(a + 40, hi2);
    _mm256_storeu_ps(a + 48, lo3);
    _mm256_storeu_ps(a + 56, hi3);
  }
  for (; i < m_rows; ++i) {
    const float* xi = x + i * ldx;
    float* a = acc + i * kPanelWidth;
    __m256 lo = _mm256_loadu_ps(a), hi = _mm256_loadu_ps(a + 8);
    for (int64_t k = 0; k < k_count; ++k) {
      const __m256 xv = _mm256_set1_ps(xi[k]);
      lo = _mm256_fmadd_ps(xv, _mm256_loadu_ps(panel + k * kPanelWidth), lo);
      hi = _mm256_fmadd_ps(xv, _mm256_loadu_ps(panel + k * kPanelWidth + 8), hi);
    }
    _mm256_storeu_ps(a, lo);
    _mm256_storeu_ps(a + 8, hi);
  }
}

float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  const __m256 s = _mm256_add_ps(s0, s1);
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  float total = _mm_cvtss_f32(r);
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

void int8_to_f32_avx2(const int8_t* q, float scale, float* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), s));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace eq::quant::kernels

namespace eq::quant::kernels {

// Column j of the panel is a stride-16 gather.
void panel_to_rows_avx2(const float* panel, int64_t k_count, int64_t nb, float* out, int64_t ldo) {
  const __m256i stride = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  int64_t k = 0;
  for (; k + 8 <= k_count; k += 8)
    for (int64_t j = 0; j < nb; ++j)
      _mm256_storeu_ps(out + j * ldo + k, _mm256_i32gather_ps(panel + k * kPanelWidth + j, stride, 4));
  for (; k < k_count; ++k)
    for (int64_t j = 0; j < nb; ++j) out[j * ldo + k] = panel[k * kPanelWidth + j];
}

}  // namespace eq::quant::kernels
