// AVX2 panel micro-kernel: 4 rows x 2 panels (16 ymm accumulators, 32 output
// features) per k step. Edges use narrower blocks with the same per-element
// FMA chain.
#include <immintrin.h>

#include "exec/panel_gemm.h"

namespace eq::exec::kernels {
namespace {

template <int R, int P>
inline void block(const float* a, int64_t lda, const float* panels, int64_t pstride, int64_t kc, float* c,
                  int64_t ldc, bool accumulate) {
  __m256 acc[R][2 * P];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * P; ++h)
      acc[r][h] = accumulate ? _mm256_loadu_ps(c + r * ldc + h * 8) : _mm256_setzero_ps();
  const float* pp[P];
  for (int p = 0; p < P; ++p) pp[p] = panels + p * pstride;
  for (int64_t k = 0; k < kc; ++k) {
    __m256 w[2 * P];
    for (int p = 0; p < P; ++p) {
      w[2 * p] = _mm256_loadu_ps(pp[p] + k * 16);
      w[2 * p + 1] = _mm256_loadu_ps(pp[p] + k * 16 + 8);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
      for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_fmadd_ps(x, w[h], acc[r][h]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * P; ++h) _mm256_storeu_ps(c + r * ldc + h * 8, acc[r][h]);
}

template <int P>
inline void rows(const float* a, int64_t lda, int64_t m, const float* panels, int64_t pstride, int64_t kc, float* c,
                 int64_t ldc, bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) block<4, P>(a + i * lda, lda, panels, pstride, kc, c + i * ldc, ldc, accumulate);
  for (; i < m; ++i) block<1, P>(a + i * lda, lda, panels, pstride, kc, c + i * ldc, ldc, accumulate);
}

}  // namespace

void panel_gemm_avx2(const float* a, int64_t lda, int64_t m, const float* panels, int64_t np, int64_t pstride,
                     int64_t kc, float* c, int64_t ldc, bool accumulate) {
  int64_t p = 0;
  for (; p + 2 <= np; p += 2) rows<2>(a, lda, m, panels + p * pstride, pstride, kc, c + p * 16, ldc, accumulate);
  for (; p < np; ++p) rows<1>(a, lda, m, panels + p * pstride, pstride, kc, c + p * 16, ldc, accumulate);
}

}  // namespace eq::exec::kernels
