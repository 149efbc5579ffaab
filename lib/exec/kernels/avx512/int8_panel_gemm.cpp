// AVX-512 VNNI integer batch micro-kernel (int8_panel_gemm.h): blocks of 6
// rows x 2 panels of 16 outputs (12 int32 + 12 fp32 accumulators; the best
// of 4x3, 4x2, 6x2, 7x2, 2x4, 3x4 and 8x1 measured at 32 rows, 8 panels,
// 256 k). Per unit of 32 k: 8 vpdpbusd per row and panel (4 k of 16 outputs
// each) into int32 sums that start at the zero-code correction, then one
// convert, multiply and FMA into the fp32 accumulators, which stay in
// registers across the whole k range. Edges use narrower blocks with the
// same per-element steps.
#include <immintrin.h>

#include <cstring>

#include "exec/int8_panel_gemm.h"

namespace eq::exec::kernels {

using quant::kInt8Unit;

namespace {

#ifndef EQ_INT8_GEMM_ROWS
#define EQ_INT8_GEMM_ROWS 6
#endif
#ifndef EQ_INT8_GEMM_PANELS
#define EQ_INT8_GEMM_PANELS 2
#endif
constexpr int kRows = EQ_INT8_GEMM_ROWS;
constexpr int kPanels = EQ_INT8_GEMM_PANELS;

inline __m512i broadcast_dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int R, int P, bool Bias>
void block(const Int8Rows& a, const uint8_t* codes, const float* wscale, const float* wbias, int offset, int64_t kc,
           float* c, int64_t ldc, bool accumulate) {
  const int64_t units = kc / kInt8Unit, pstride = kc * 16, sstride = units * 16;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = accumulate ? _mm512_loadu_ps(c + r * ldc + p * 16) : _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    // The sums start at -offset * qsum: the zero-code correction for free.
    __m512i s[R][P];
    for (int r = 0; r < R; ++r) {
      const __m512i corr = _mm512_set1_epi32(-offset * a.qsum[r * a.ldu + u]);
      for (int p = 0; p < P; ++p) s[r][p] = corr;
    }
    const uint8_t* cu = codes + u * 8 * 64;
    for (int t = 0; t < 8; ++t) {
      __m512i w[P];
      for (int p = 0; p < P; ++p) w[p] = _mm512_loadu_si512(cu + p * pstride + t * 64);
      for (int r = 0; r < R; ++r) {
        const __m512i x = broadcast_dword(a.q + r * a.ldq + u * kInt8Unit + 4 * t);
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w[p], x);
      }
    }
    __m512 ws[P];
    for (int p = 0; p < P; ++p) ws[p] = _mm512_loadu_ps(wscale + p * sstride + u * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xs = _mm512_set1_ps(a.scale[r * a.ldu + u]);
      for (int p = 0; p < P; ++p)
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][p]), _mm512_mul_ps(ws[p], xs), acc[r][p]);
    }
    if constexpr (Bias) {
      for (int r = 0; r < R; ++r) {
        const __m512 xsum = _mm512_set1_ps(a.xsum[r * a.ldu + u]);
        for (int p = 0; p < P; ++p)
          acc[r][p] = _mm512_fmadd_ps(_mm512_loadu_ps(wbias + p * sstride + u * 16), xsum, acc[r][p]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(c + r * ldc + p * 16, acc[r][p]);
}

inline Int8Rows rows_from(const Int8Rows& a, int64_t i) {
  Int8Rows b = a;
  b.q += i * a.ldq;
  b.scale += i * a.ldu;
  b.qsum += i * a.ldu;
  b.xsum += i * a.ldu;
  return b;
}

template <int P, bool Bias>
void panels(const Int8Rows& a, int64_t m, const uint8_t* codes, const float* wscale, const float* wbias, int offset,
            int64_t kc, float* c, int64_t ldc, bool accumulate) {
  static_assert(kRows == 6);
  // Blocks of 6 rows; a remainder of 7-11 rows as two near-equal blocks and
  // one of 1-5 as one block: each code load serves as many rows as possible
  // (10 rows, the e512 prefill's rows per expert, was 6 + 3 + 1).
  for (int64_t i = 0; i < m;) {
    const int64_t rem = m - i;
    const int take = static_cast<int>(rem >= 12 ? 6 : rem > 6 ? (rem + 1) / 2 : rem);
    const Int8Rows rows = rows_from(a, i);
    float* ci = c + i * ldc;
    switch (take) {
      case 6: block<6, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
      case 5: block<5, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
      case 4: block<4, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
      case 3: block<3, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
      case 2: block<2, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
      default: block<1, P, Bias>(rows, codes, wscale, wbias, offset, kc, ci, ldc, accumulate); break;
    }
    i += take;
  }
}

template <bool Bias>
void gemm(const Int8Rows& a, int64_t m, const uint8_t* codes, const float* wscale, const float* wbias, int offset,
          int64_t np, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  const int64_t pstride = kc * 16, sstride = kc / kInt8Unit * 16;
  int64_t p = 0;
  for (; p + kPanels <= np; p += kPanels)
    panels<kPanels, Bias>(a, m, codes + p * pstride, wscale + p * sstride, Bias ? wbias + p * sstride : nullptr,
                          offset, kc, c + p * 16, ldc, accumulate);
  for (; p < np; ++p)
    panels<1, Bias>(a, m, codes + p * pstride, wscale + p * sstride, Bias ? wbias + p * sstride : nullptr, offset, kc,
                    c + p * 16, ldc, accumulate);
}

}  // namespace

void quantize_rows_int8_avx512(const float* x, int64_t ldx, int64_t m, int64_t kc, quant::Int8KOrder order,
                               const Int8RowsBuffer& out) {
  // The unit's bytes into the format's k order (lane-local byte shuffle).
  const __m256i perm =
      order == quant::Int8KOrder::kNibble
          ? _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12,
                             14, 9, 11, 13, 15)
      : order == quant::Int8KOrder::kCrumb
          ? _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
                             14, 3, 7, 11, 15)
          : _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                             11, 12, 13, 14, 15);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t u = 0; u < kc / kInt8Unit; ++u) {
      const float* xu = x + i * ldx + u * kInt8Unit;
      const __m512 x0 = _mm512_loadu_ps(xu), x1 = _mm512_loadu_ps(xu + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      const float scale = amax / 127.0f;
      const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m512i q0 = _mm512_min_epi32(
          hi, _mm512_max_epi32(lo, _mm512_cvt_roundps_epi32(_mm512_mul_ps(x0, inv), kRound)));
      const __m512i q1 = _mm512_min_epi32(
          hi, _mm512_max_epi32(lo, _mm512_cvt_roundps_epi32(_mm512_mul_ps(x1, inv), kRound)));
      const __m256i bytes = _mm256_set_m128i(_mm512_cvtepi32_epi8(q1), _mm512_cvtepi32_epi8(q0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + i * out.ldq + u * kInt8Unit),
                          _mm256_shuffle_epi8(bytes, perm));
      const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
      out.scale[i * out.ldu + u] = scale;
      out.qsum[i * out.ldu + u] = sum;
      out.xsum[i * out.ldu + u] = static_cast<float>(sum) * scale;
    }
}

void int8_panel_gemm_avx512(const Int8Rows& a, int64_t m, const uint8_t* codes, const float* wscale,
                            const float* wbias, int offset, int64_t np, int64_t kc, float* c, int64_t ldc,
                            bool accumulate) {
  if (wbias)
    gemm<true>(a, m, codes, wscale, wbias, offset, np, kc, c, ldc, accumulate);
  else
    gemm<false>(a, m, codes, wscale, nullptr, offset, np, kc, c, ldc, accumulate);
}

}  // namespace eq::exec::kernels
