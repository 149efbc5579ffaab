// 16 x 16 float transposes in registers (unpack ps, unpack pd, two rounds of
// 128-bit lane shuffles), then a scalar tail for count % 16 columns.
// GCC 12 warns falsely inside its own unpack intrinsics (_mm512_undefined_*, GCC PR105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "quant/panel_transpose.h"

namespace eq::quant::kernels {
namespace {

inline __m512 lo_pd(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 hi_pd(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

void transpose16(const float* in, int64_t ld, float* out) {
  __m512 r[16], t[16];
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(in + j * ld);
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 16; j += 4) {
    r[j] = lo_pd(t[j], t[j + 2]);
    r[j + 1] = hi_pd(t[j], t[j + 2]);
    r[j + 2] = lo_pd(t[j + 1], t[j + 3]);
    r[j + 3] = hi_pd(t[j + 1], t[j + 3]);
  }
  for (int h = 0; h < 16; h += 8) {
    for (int j = 0; j < 4; ++j) {
      t[h + j] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0x88);
      t[h + j + 4] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
  for (int j = 0; j < 16; ++j) _mm512_storeu_ps(out + j * 16, r[j]);
}

}  // namespace

void rows_to_panel_avx512(const float* rows, int64_t ld, int64_t count, float* out) {
  int64_t c = 0;
  for (; c + 16 <= count; c += 16) transpose16(rows + c, ld, out + c * 16);
  for (; c < count; ++c)
    for (int64_t j = 0; j < 16; ++j) out[c * 16 + j] = rows[j * ld + c];
}

}  // namespace eq::quant::kernels
