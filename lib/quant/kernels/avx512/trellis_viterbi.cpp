// AVX-512 Viterbi step for the bitshift trellis (see quant/trellis/kernels.h).
//
// Layout that makes it SIMD-friendly: the predecessors of states (r << K) | b
// are r + j * 2^(L-K), j < 2^K, so for 16 consecutive groups r the min over
// predecessors is an element-wise min of 2^K contiguous vectors; the 16 minima
// then feed 16 * 2^K consecutive successor states through one permute each.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

void viterbi_step_avx512(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                         float target, float weight) {
  const uint32_t groups = 1u << (L - K);
  if (groups < 16) return viterbi_step_generic(prev, next, planes, codes, L, K, target, weight);
  const uint32_t fan = 1u << K;
  const size_t plane_bytes = groups / 8;
  const __m512 vlinear = _mm512_set1_ps(-2.0f * weight * target);
  const __m512 vweight = _mm512_set1_ps(weight);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i expand[16];  // lane l of output vector q takes the minimum of group (16q + l) >> K
  for (uint32_t q = 0; q < fan; ++q)
    expand[q] = _mm512_srli_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * q))), K);

  for (uint32_t r0 = 0; r0 < groups; r0 += 16) {
    __m512 best = _mm512_loadu_ps(prev + r0);
    __m512i arg = _mm512_setzero_si512();
    for (uint32_t j = 1; j < fan; ++j) {
      __m512 c = _mm512_loadu_ps(prev + r0 + j * groups);
      __mmask16 lower = _mm512_cmp_ps_mask(c, best, _CMP_LT_OQ);
      best = _mm512_mask_mov_ps(best, lower, c);
      arg = _mm512_mask_mov_epi32(arg, lower, _mm512_set1_epi32(static_cast<int>(j)));
    }
    for (int b = 0; b < K; ++b) {
      uint16_t bits = _mm512_test_epi32_mask(arg, _mm512_set1_epi32(1 << b));
      std::memcpy(planes + b * plane_bytes + r0 / 8, &bits, 2);
    }
    const uint32_t s0 = r0 << K;
    for (uint32_t q = 0; q < fan; ++q) {
      __m512 m = _mm512_permutexvar_ps(expand[q], best);
      __m512 code = _mm512_loadu_ps(codes + s0 + 16 * q);
      _mm512_storeu_ps(next + s0 + 16 * q, _mm512_fmadd_ps(code, _mm512_fmadd_ps(code, vweight, vlinear), m));
    }
  }
}

}  // namespace eq::quant::trellis
