// AVX-512 unsigned-integer panel decoders: value = code * scale + bias, 16
// columns per zmm. Codes never straddle a group (groups are >= 32 elements).
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

namespace {

struct Emit {
  __m512 s, b;
  float* out;
  void operator()(__m512i code, int64_t k) const {
    _mm512_storeu_ps(out + k * kPanelWidth, _mm512_fmadd_ps(_mm512_cvtepi32_ps(code), s, b));
  }
};

// 2, 4 or 8 bits: whole codes per word.
template <int kBits>
void decode_pow2(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales, const float* biases,
                 int group, float* out) {
  constexpr int kPerWord = 32 / kBits;
  const __m512i mask = _mm512_set1_epi32((1 << kBits) - 1);
  for (int64_t r = 0; r < k_count / kPerWord; ++r) {
    const int64_t k0 = r * kPerWord;
    const int64_t g = k0 / group;
    const Emit emit{_mm512_loadu_ps(scales + g * kPanelWidth), _mm512_loadu_ps(biases + g * kPanelWidth), out};
    __m512i w = _mm512_loadu_si512(qweight + r * ld);
    for (int i = 0; i < kPerWord; ++i) {
      emit(_mm512_and_si512(w, mask), k0 + i);
      w = _mm512_srli_epi32(w, kBits);
    }
  }
}

// 3 bits: 32 codes in 3 words; codes 10 and 21 straddle words.
void decode_3bit(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales, const float* biases,
                 int group, float* out) {
  const __m512i mask = _mm512_set1_epi32(7);
  for (int64_t u = 0; u < k_count / 32; ++u) {
    const int64_t k0 = u * 32;
    const int64_t g = k0 / group;
    const Emit emit{_mm512_loadu_ps(scales + g * kPanelWidth), _mm512_loadu_ps(biases + g * kPanelWidth), out};
    const __m512i w0 = _mm512_loadu_si512(qweight + (3 * u) * ld);
    const __m512i w1 = _mm512_loadu_si512(qweight + (3 * u + 1) * ld);
    const __m512i w2 = _mm512_loadu_si512(qweight + (3 * u + 2) * ld);
    __m512i t = w0;
    for (int i = 0; i < 10; ++i, t = _mm512_srli_epi32(t, 3)) emit(_mm512_and_si512(t, mask), k0 + i);
    emit(_mm512_and_si512(_mm512_or_si512(t, _mm512_slli_epi32(w1, 2)), mask), k0 + 10);
    t = _mm512_srli_epi32(w1, 1);
    for (int i = 11; i < 21; ++i, t = _mm512_srli_epi32(t, 3)) emit(_mm512_and_si512(t, mask), k0 + i);
    emit(_mm512_and_si512(_mm512_or_si512(t, _mm512_slli_epi32(w2, 1)), mask), k0 + 21);
    t = _mm512_srli_epi32(w2, 2);
    for (int i = 22; i < 32; ++i, t = _mm512_srli_epi32(t, 3)) emit(_mm512_and_si512(t, mask), k0 + i);
  }
}

}  // namespace

void decode_uint2_avx512(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<2>(q, ld, k, s, b, g, o);
}
void decode_uint3_avx512(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_3bit(q, ld, k, s, b, g, o);
}
void decode_uint4_avx512(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<4>(q, ld, k, s, b, g, o);
}
void decode_uint8_avx512(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<8>(q, ld, k, s, b, g, o);
}

}  // namespace eq::quant::kernels
