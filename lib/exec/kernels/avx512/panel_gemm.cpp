// AVX-512 panel micro-kernel: 6 rows x 4 panels (24 zmm accumulators, 64
// output features) per k step: 4 panel loads and 6 broadcasts feed 24 FMAs.
// Edges use narrower blocks with the same per-element FMA chain.
#include <immintrin.h>

#include "exec/panel_gemm.h"

namespace eq::exec::kernels {
namespace {

template <int R, int P>
inline void block(const float* a, int64_t lda, const float* panels, int64_t pstride, int64_t kc, float* c,
                  int64_t ldc, bool accumulate) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      acc[r][p] = accumulate ? _mm512_loadu_ps(c + r * ldc + p * 16) : _mm512_setzero_ps();
  const float* pp[P];
  for (int p = 0; p < P; ++p) pp[p] = panels + p * pstride;
  for (int64_t k = 0; k < kc; ++k) {
    __m512 w[P];
    for (int p = 0; p < P; ++p) w[p] = _mm512_loadu_ps(pp[p] + k * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(x, w[p], acc[r][p]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(c + r * ldc + p * 16, acc[r][p]);
}

template <int P>
inline void rows(const float* a, int64_t lda, int64_t m, const float* panels, int64_t pstride, int64_t kc, float* c,
                 int64_t ldc, bool accumulate) {
  // Blocks of 6 rows; a remainder of 7-11 rows as two near-equal blocks and
  // one of 1-5 as one block, so each panel load serves as many rows as
  // possible (32 rows were 5 x 6 + 2, 10 rows 6 + 2 + 2).
  for (int64_t i = 0; i < m;) {
    const int64_t rem = m - i;
    const int take = static_cast<int>(rem >= 12 ? 6 : rem > 6 ? (rem + 1) / 2 : rem);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (take) {
      case 6: block<6, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
      case 5: block<5, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
      case 4: block<4, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
      case 3: block<3, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
      case 2: block<2, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
      default: block<1, P>(ai, lda, panels, pstride, kc, ci, ldc, accumulate); break;
    }
    i += take;
  }
}

}  // namespace

void panel_gemm_avx512(const float* a, int64_t lda, int64_t m, const float* panels, int64_t np, int64_t pstride,
                       int64_t kc, float* c, int64_t ldc, bool accumulate) {
  int64_t p = 0;
  for (; p + 4 <= np; p += 4) rows<4>(a, lda, m, panels + p * pstride, pstride, kc, c + p * 16, ldc, accumulate);
  for (; p < np; ++p) rows<1>(a, lda, m, panels + p * pstride, pstride, kc, c + p * 16, ldc, accumulate);
}

}  // namespace eq::exec::kernels
