// AVX2 Viterbi step for the bitshift trellis; same layout argument as the
// AVX-512 kernel, 8 groups per vector.
#include <immintrin.h>

#include <cstdint>

#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

void viterbi_step_avx2(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                       float target, float weight) {
  const uint32_t groups = 1u << (L - K);
  if (groups < 8 || K > kMaxSimdSymbolBits) return viterbi_step_generic(prev, next, planes, codes, L, K, target, weight);
  const uint32_t fan = 1u << K;
  const size_t plane_bytes = groups / 8;
  const __m256 vlinear = _mm256_set1_ps(-2.0f * weight * target);
  const __m256 vweight = _mm256_set1_ps(weight);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i expand[1u << kMaxSimdSymbolBits];
  for (uint32_t q = 0; q < fan; ++q)
    expand[q] = _mm256_srli_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(static_cast<int>(8 * q))), K);

  for (uint32_t r0 = 0; r0 < groups; r0 += 8) {
    __m256 best = _mm256_loadu_ps(prev + r0);
    __m256i arg = _mm256_setzero_si256();
    for (uint32_t j = 1; j < fan; ++j) {
      __m256 c = _mm256_loadu_ps(prev + r0 + j * groups);
      __m256 lower = _mm256_cmp_ps(c, best, _CMP_LT_OQ);
      best = _mm256_blendv_ps(best, c, lower);
      arg = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(arg), _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(j))), lower));
    }
    for (int b = 0; b < K; ++b) {
      __m256i bit = _mm256_slli_epi32(arg, 31 - b);
      planes[b * plane_bytes + r0 / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_castsi256_ps(bit)));
    }
    const uint32_t s0 = r0 << K;
    for (uint32_t q = 0; q < fan; ++q) {
      __m256 m = _mm256_permutevar8x32_ps(best, expand[q]);
      __m256 code = _mm256_loadu_ps(codes + s0 + 8 * q);
      _mm256_storeu_ps(next + s0 + 8 * q, _mm256_fmadd_ps(code, _mm256_fmadd_ps(code, vweight, vlinear), m));
    }
  }
}

}  // namespace eq::quant::trellis
