// AVX-512 int8 panel codes (quant/int8_panels.h). Bit-stream words: one zmm
// load is one word of 16 columns; a shift and a byte mask leave one code per
// byte, already in the unit's k order (table codes through their 16-entry byte
// table, vpshufb). int8_row: 16 rows x 64 k are loaded and transposed as a 16 x 16
// matrix of dwords (4 k each), then biased by 128 (xor 0x80).
#include <immintrin.h>

#include "quant/int8_panels.h"

namespace eq::quant::kernels {

namespace {

// A software prefetch into L2 of the byte `delta` past p (integer address
// arithmetic: the target may lie outside p's array; prefetches never fault).
inline void prefetch_l2(const void* p, int64_t delta) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(delta);
  _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
}

inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[4g + e], lane L: element 4L + e of rows 4g .. 4g + 3.
  for (int e = 0; e < 4; ++e) {
    const __m512i a = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44), b = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
    const __m512i c = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE), d = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
    r[e] = _mm512_shuffle_i32x4(a, b, 0x88);
    r[4 + e] = _mm512_shuffle_i32x4(a, b, 0xDD);
    r[8 + e] = _mm512_shuffle_i32x4(c, d, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(c, d, 0xDD);
  }
}

}  // namespace

void int8_stream_codes_avx512(const uint32_t* qweight, int64_t ld, int64_t k_count, int bits, const uint8_t* table,
                              int64_t panels, uint8_t* out, int64_t out_stride, int64_t prefetch) {
  if (bits != 2 && bits != 4 && bits != 8)
    return int8_stream_codes_generic(qweight, ld, k_count, bits, table, panels, out, out_stride, prefetch);
  const int64_t word_rows = k_count * bits / 32;
  const int steps = 32 / bits / 4;  // dword steps (4 k each) per word: 2, 4 or 1
  const __m512i lut =
      table ? _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))) : _mm512_setzero_si512();
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(bits == 4 ? 0x0F : bits == 2 ? 0x03 : 0xFF));
  // Word row outer, panels inner: each word row is one contiguous run of
  // 64 * panels bytes.
  for (int64_t r = 0; r < word_rows; ++r) {
    const uint32_t* row = qweight + r * ld;
    uint8_t* dst = out + r * steps * 64;
    if (prefetch)
      for (int64_t p = 0; p < panels; ++p) prefetch_l2(row + p * 16, prefetch * 4);
    for (int64_t p = 0; p < panels; ++p) {
      const __m512i w = _mm512_loadu_si512(row + p * 16);
      uint8_t* o = dst + p * out_stride;
      if (bits == 4) {
        __m512i lo = _mm512_and_si512(w, mask), hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), mask);
        if (table) {
          lo = _mm512_shuffle_epi8(lut, lo);
          hi = _mm512_shuffle_epi8(lut, hi);
        }
        _mm512_storeu_si512(o, lo);
        _mm512_storeu_si512(o + 64, hi);
      } else if (bits == 2) {
        _mm512_storeu_si512(o, _mm512_and_si512(w, mask));
        _mm512_storeu_si512(o + 64, _mm512_and_si512(_mm512_srli_epi32(w, 2), mask));
        _mm512_storeu_si512(o + 128, _mm512_and_si512(_mm512_srli_epi32(w, 4), mask));
        _mm512_storeu_si512(o + 192, _mm512_and_si512(_mm512_srli_epi32(w, 6), mask));
      } else {
        _mm512_storeu_si512(o, w);
      }
    }
  }
}

// Per 4 k rows of 16 floats: to int32, trellis_int8_code by vpmulhrsw on the
// low 16-bit half (the high half of |y| <= 510 is 0 or -1 and becomes 0),
// then the low bytes merged into one dword per row (vpternlogd as a bit
// select), + 128.
void int8_trellis_codes_avx512(const float* panels, int64_t np, int64_t pstride, int64_t k_count, uint8_t* out,
                               int64_t out_stride) {
  const __m512i mul = _mm512_set1_epi16(kTrellisInt8Mul);
  const __m512i m1 = _mm512_set1_epi32(0x0000FF00), m2 = _mm512_set1_epi32(0x00FF0000),
                m3 = _mm512_set1_epi32(static_cast<int>(0xFF000000u)), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = 0; p < np; ++p) {
    const float* src = panels + p * pstride;
    uint8_t* dst = out + p * out_stride;
    for (int64_t k = 0; k < k_count; k += 4) {
      __m512i v[4];
      for (int i = 0; i < 4; ++i)
        v[i] = _mm512_mulhrs_epi16(_mm512_cvttps_epi32(_mm512_loadu_ps(src + (k + i) * 16)), mul);
      __m512i r = _mm512_ternarylogic_epi32(v[0], _mm512_slli_epi32(v[1], 8), m1, 0xD8);  // m1 ? v1 << 8 : v0
      r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v[2], 16), m2, 0xD8);
      r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v[3], 24), m3, 0xD8);
      _mm512_storeu_si512(dst + k * 16, _mm512_xor_si512(r, flip));
    }
  }
}

void int8_row_codes_avx512(const int8_t* w, int64_t ld, int64_t nrows, int64_t k_count, uint8_t* out,
                           int64_t prefetch) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t k0 = 0; k0 < k_count; k0 += 64) {
    const int64_t kn = k_count - k0 < 64 ? k_count - k0 : 64;
    const __mmask64 m = kn == 64 ? ~__mmask64{0} : (__mmask64{1} << kn) - 1;
    __m512i r[16];
    for (int j = 0; j < 16; ++j) {
      if (prefetch && j < nrows) prefetch_l2(w + j * ld + k0, prefetch);
      r[j] = j < nrows ? _mm512_maskz_loadu_epi8(m, w + j * ld + k0) : _mm512_setzero_si512();
    }
    transpose16(r);
    for (int64_t s = 0; s < kn / 4; ++s) _mm512_storeu_si512(out + (k0 / 4 + s) * 64, _mm512_xor_si512(r[s], flip));
  }
}

}  // namespace eq::quant::kernels
