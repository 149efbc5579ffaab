// AVX2 unsigned-integer panel decoders: value = code * scale + bias, the 16
// columns as two ymm halves. Codes never straddle a group (groups >= 32).
#include <immintrin.h>

#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

namespace {

struct Emit {
  __m256 s, b;
  float* out;  // already offset to the half
  void operator()(__m256i code, int64_t k) const {
    _mm256_storeu_ps(out + k * kPanelWidth, _mm256_fmadd_ps(_mm256_cvtepi32_ps(code), s, b));
  }
};

__m256i load8(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

template <int kBits>
void decode_pow2(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales, const float* biases,
                 int group, float* out) {
  constexpr int kPerWord = 32 / kBits;
  const __m256i mask = _mm256_set1_epi32((1 << kBits) - 1);
  for (int64_t r = 0; r < k_count / kPerWord; ++r) {
    const int64_t k0 = r * kPerWord;
    const int64_t g = k0 / group;
    for (int half = 0; half < 2; ++half) {
      const Emit emit{_mm256_loadu_ps(scales + g * kPanelWidth + half * 8),
                      _mm256_loadu_ps(biases + g * kPanelWidth + half * 8), out + half * 8};
      __m256i w = load8(qweight + r * ld + half * 8);
      for (int i = 0; i < kPerWord; ++i) {
        emit(_mm256_and_si256(w, mask), k0 + i);
        w = _mm256_srli_epi32(w, kBits);
      }
    }
  }
}

void decode_3bit(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales, const float* biases,
                 int group, float* out) {
  const __m256i mask = _mm256_set1_epi32(7);
  for (int64_t u = 0; u < k_count / 32; ++u) {
    const int64_t k0 = u * 32;
    const int64_t g = k0 / group;
    for (int half = 0; half < 2; ++half) {
      const Emit emit{_mm256_loadu_ps(scales + g * kPanelWidth + half * 8),
                      _mm256_loadu_ps(biases + g * kPanelWidth + half * 8), out + half * 8};
      const __m256i w0 = load8(qweight + (3 * u) * ld + half * 8);
      const __m256i w1 = load8(qweight + (3 * u + 1) * ld + half * 8);
      const __m256i w2 = load8(qweight + (3 * u + 2) * ld + half * 8);
      __m256i t = w0;
      for (int i = 0; i < 10; ++i, t = _mm256_srli_epi32(t, 3)) emit(_mm256_and_si256(t, mask), k0 + i);
      emit(_mm256_and_si256(_mm256_or_si256(t, _mm256_slli_epi32(w1, 2)), mask), k0 + 10);
      t = _mm256_srli_epi32(w1, 1);
      for (int i = 11; i < 21; ++i, t = _mm256_srli_epi32(t, 3)) emit(_mm256_and_si256(t, mask), k0 + i);
      emit(_mm256_and_si256(_mm256_or_si256(t, _mm256_slli_epi32(w2, 1)), mask), k0 + 21);
      t = _mm256_srli_epi32(w2, 2);
      for (int i = 22; i < 32; ++i, t = _mm256_srli_epi32(t, 3)) emit(_mm256_and_si256(t, mask), k0 + i);
    }
  }
}

}  // namespace

void decode_uint2_avx2(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<2>(q, ld, k, s, b, g, o);
}
void decode_uint3_avx2(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_3bit(q, ld, k, s, b, g, o);
}
void decode_uint4_avx2(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<4>(q, ld, k, s, b, g, o);
}
void decode_uint8_avx2(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_pow2<8>(q, ld, k, s, b, g, o);
}

}  // namespace eq::quant::kernels
