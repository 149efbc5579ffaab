// AVX-512 VNNI decode (gemv) kernels. Bit-stream formats: one zmm holds one
// 32-bit word of 16 columns; a shift and a byte mask leave one code per byte
// (E2M1 codes go through a 16-entry byte table, vpshufb), and vpdpbusd
// multiplies the 4 codes of each column by 4 int8 x broadcast from the
// reordered copy (GemvInput::q_nib / q_crumb). Units of min(group, 32) k keep
// int32 sums; each unit ends with one convert and one FMA per 16 columns.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/gemv_kernels.h"

namespace eq::quant::kernels {

namespace {

inline __m512i broadcast_dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512 load_scales(const StreamGemvArgs& a, int64_t g, int64_t col, __mmask16 m) {
  if (a.scales_f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.scales_f16 + g * a.ld + col));
  const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a.scales_u8 + g * a.ld + col));
  return _mm512_i32gather_ps(idx, a.scale_table, 4);
}

// Software prefetch distance in units: the hardware prefetchers do not
// follow the many short strided runs (one per word row) far enough.
#ifndef EQ_GEMV_PREFETCH_UNITS
#define EQ_GEMV_PREFETCH_UNITS 4
#endif
constexpr int kPrefetchUnits = EQ_GEMV_PREFETCH_UNITS;

// Bits in {2, 4, 8}; Unit = k per int32 sum (16 or 32).
template <int Bits, bool E2M1, int Unit>
void stream_kernel(const StreamGemvArgs& a) {
  constexpr int kRows = Unit * Bits / 32;  // word rows per unit
  constexpr int kBroadcasts = Unit / 4;    // x dwords per unit
  const GemvInput& in = *a.in;
  const int8_t* xq = Bits == 4 ? in.q_nib : Bits == 2 ? in.q_crumb : in.q;
  const int64_t panels = (a.nb + 15) / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (a.nb - (panels - 1) * 16)) - 1u);
  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(panels * 16), 0.0f);
  float* acc = acc_buf.data();
  const __m512i low_mask = _mm512_set1_epi8(static_cast<char>((1 << Bits) - 1));
  const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));

  for (int64_t k0 = 0; k0 < a.cols; k0 += Unit) {
    const int64_t g = k0 / a.group;
    int32_t q_sum = in.q_sum16[k0 / 16];
    float x_sum = in.x_sum16[k0 / 16];
    if (Unit == 32) q_sum += in.q_sum16[k0 / 16 + 1], x_sum += in.x_sum16[k0 / 16 + 1];
    const __m512i offset = _mm512_set1_epi32(E2M1 ? 12 * q_sum : 0);
    const __m512 x_scale = _mm512_set1_ps(a.scale_mul * in.q_scale[k0 / kGemvBlock]);
    const __m512 x_sum_v = _mm512_set1_ps(x_sum);
    __m512i xb[kBroadcasts];
    for (int i = 0; i < kBroadcasts; ++i) xb[i] = broadcast_dword(xq + k0 + 4 * i);
    const uint32_t* rows = a.qweight + (k0 * Bits / 32) * a.ld;

    for (int64_t p = 0; p < panels; ++p) {
      const __mmask16 m = p == panels - 1 ? tail : static_cast<__mmask16>(0xFFFF);
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int r = 0; r < kRows; ++r) {
        if (k0 + kPrefetchUnits * Unit < a.cols)
          _mm_prefetch(reinterpret_cast<const char*>(rows + (kPrefetchUnits * kRows + r) * a.ld + p * 16), _MM_HINT_T0);
        const __m512i w = _mm512_maskz_loadu_epi32(m, rows + r * a.ld + p * 16);
        if constexpr (Bits == 4) {
          __m512i lo = _mm512_and_si512(w, low_mask);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), low_mask);
          if constexpr (E2M1) {
            lo = _mm512_shuffle_epi8(lut, lo);
            hi = _mm512_shuffle_epi8(lut, hi);
          }
          s0 = _mm512_dpbusd_epi32(s0, lo, xb[2 * r]);
          s1 = _mm512_dpbusd_epi32(s1, hi, xb[2 * r + 1]);
        } else if constexpr (Bits == 2) {
          for (int s = 0; s < 4; ++s) {
            const __m512i c = _mm512_and_si512(_mm512_srli_epi32(w, 2 * s), low_mask);
            if (s & 1) s1 = _mm512_dpbusd_epi32(s1, c, xb[4 * r + s]);
            else s0 = _mm512_dpbusd_epi32(s0, c, xb[4 * r + s]);
          }
        } else {
          if (r & 1) s1 = _mm512_dpbusd_epi32(s1, w, xb[r]);
          else s0 = _mm512_dpbusd_epi32(s0, w, xb[r]);
        }
      }
      const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), offset);
      const __m512 scale = _mm512_mul_ps(load_scales(a, g, p * 16, m), x_scale);
      __m512 sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, _mm512_loadu_ps(acc + p * 16));
      if (a.biases_f16) {
        const __m512 bias = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.biases_f16 + g * a.ld + p * 16));
        sum = _mm512_fmadd_ps(bias, x_sum_v, sum);
      }
      _mm512_storeu_ps(acc + p * 16, sum);
    }
  }
  std::copy(acc, acc + a.nb, a.y);
}

}  // namespace

void gemv_stream_int8_avx512(const StreamGemvArgs& a) {
  if (a.e2m1) {
    if (a.group < 32) return stream_kernel<4, true, 16>(a);
    return stream_kernel<4, true, 32>(a);
  }
  switch (a.bits) {
    case 2: return stream_kernel<2, false, 32>(a);
    case 4: return stream_kernel<4, false, 32>(a);
    case 8: return stream_kernel<8, false, 32>(a);
  }
  gemv_stream_int8_generic(a);
}

void gemv_int8_rows_avx512(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                           const GemvInput& in, float* y) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  constexpr int kRowBlock = 4;
  for (int64_t j0 = 0; j0 < rows; j0 += kRowBlock) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowBlock, rows - j0));
    __m512 acc[kRowBlock] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t k = 0; k < cols; k += 64) {
      const __mmask64 m = cols - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (cols - k)) - 1;
      const __m512i x = _mm512_loadu_si512(in.q + k);
      // w ^ 0x80 = w + 128 as an unsigned byte; subtract 128 * sum(q) per lane.
      const __m512i correction = _mm512_slli_epi32(_mm512_loadu_si512(in.q_sum4 + k / 4), 7);
      const __m512 lane_scale = _mm512_loadu_ps(in.lane_scale + k / 4);
      for (int r = 0; r < nr; ++r) {
        if (j0 + kRowBlock + r < rows)
          _mm_prefetch(reinterpret_cast<const char*>(w + (j0 + kRowBlock + r) * ld + k), _MM_HINT_T0);
        const __m512i wv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w + (j0 + r) * ld + k), flip);
        const __m512i dot = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, x), correction);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), lane_scale, acc[r]);
      }
    }
    for (int r = 0; r < nr; ++r) y[j0 + r] = _mm512_reduce_add_ps(acc[r]) * scales[j0 + r];
  }
}

void gemv_bf16_rows_avx512(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y) {
  constexpr int kRowBlock = 4;
  for (int64_t j0 = 0; j0 < rows; j0 += kRowBlock) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowBlock, rows - j0));
    __m512 acc[kRowBlock] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t k = 0; k < cols; k += 16) {
      const __mmask16 m = cols - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (cols - k)) - 1);
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
      for (int r = 0; r < nr; ++r) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, w + (j0 + r) * ld + k);
        const __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        acc[r] = _mm512_fmadd_ps(wv, xv, acc[r]);
      }
    }
    for (int r = 0; r < nr; ++r) y[j0 + r] = _mm512_reduce_add_ps(acc[r]);
  }
}

}  // namespace eq::quant::kernels
