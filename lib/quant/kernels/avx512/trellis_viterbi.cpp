// AVX-512 Viterbi steps for the bitshift trellis (see quant/trellis/kernels.h).
//
// Layout that makes it SIMD-friendly: the predecessors of states (r << K) | b
// are r + j * 2^(L-K), j < 2^K, so for 16 consecutive groups r the min over
// predecessors is an element-wise min of 2^K contiguous vectors; the 16 minima
// then feed 16 * 2^K consecutive successor states through one permute each.
//
// Two steps at once (viterbi_two_steps_avx512): the 16 * 2^(2K) states of
// step t+2 in [u0 << 2K, (u0 + 16) << 2K) descend from the step-(t+1) states
// (u0 << K) + j' * 2^(L-K) + i, i < 16 * 2^K, j' < 2^K, which descend from
// 16 * 2^(2K) states of step t. Each such block's middle step lives in a 16 KB
// buffer instead of a 256 KB array, so per two steps the costs cross the
// cache once instead of twice (the step is bound by that traffic, not by its
// arithmetic). Each value is computed by the same operations as in one step,
// so the results are bit-identical.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {
namespace {

#ifndef EQ_MIDDLE
#define EQ_MIDDLE 4096
#endif
constexpr uint32_t kMiddleFloats = EQ_MIDDLE;

struct StepConstants {
  __m512 linear, weight;
};

StepConstants step_constants(float target, float weight) {
  return {_mm512_set1_ps(-2.0f * weight * target), _mm512_set1_ps(weight)};
}

// The expansion permutes: lane l of output vector q takes the minimum of group (16q + l) >> K.
void make_expand(int K, __m512i* expand) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (uint32_t q = 0; q < (1u << K); ++q)
    expand[q] = _mm512_srli_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * q))), K);
}

// Groups r0 .. r0 + 15: their predecessors are pred[j * pred_stride + lane];
// writes the argmin bit planes of those groups and the 16 * 2^K successor
// costs out[0 .. 16 * 2^K) from codes[0 .. 16 * 2^K).
inline void step_groups(const float* pred, size_t pred_stride, int K, uint8_t* planes, size_t plane_bytes, uint32_t r0,
                        const float* codes, const __m512i* expand, const StepConstants& sc, float* out) {
  const uint32_t fan = 1u << K;
  __m512 best = _mm512_loadu_ps(pred);
  __m512i arg = _mm512_setzero_si512();
  for (uint32_t j = 1; j < fan; ++j) {
    const __m512 c = _mm512_loadu_ps(pred + j * pred_stride);
    const __mmask16 lower = _mm512_cmp_ps_mask(c, best, _CMP_LT_OQ);
    best = _mm512_mask_mov_ps(best, lower, c);
    arg = _mm512_mask_mov_epi32(arg, lower, _mm512_set1_epi32(static_cast<int>(j)));
  }
  for (int b = 0; b < K; ++b) {
    const uint16_t bits = _mm512_test_epi32_mask(arg, _mm512_set1_epi32(1 << b));
    std::memcpy(planes + b * plane_bytes + r0 / 8, &bits, 2);
  }
  for (uint32_t q = 0; q < fan; ++q) {
    const __m512 m = _mm512_permutexvar_ps(expand[q], best);
    const __m512 code = _mm512_loadu_ps(codes + 16 * q);
    _mm512_storeu_ps(out + 16 * q, _mm512_fmadd_ps(code, _mm512_fmadd_ps(code, sc.weight, sc.linear), m));
  }
}

}  // namespace

void viterbi_step_avx512(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                         float target, float weight) {
  const uint32_t groups = 1u << (L - K);
  if (groups < 16 || K > kMaxSimdSymbolBits) return viterbi_step_generic(prev, next, planes, codes, L, K, target, weight);
  __m512i expand[1u << kMaxSimdSymbolBits];
  make_expand(K, expand);
  const StepConstants sc = step_constants(target, weight);
  for (uint32_t r0 = 0; r0 < groups; r0 += 16)
    step_groups(prev + r0, groups, K, planes, groups / 8, r0, codes + (r0 << K), expand, sc, next + (r0 << K));
}

void viterbi_two_steps_avx512(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                              int L, int K, float target0, float weight0, float target1, float weight1) {
  if (!two_steps_fused(L, K)) {
    two_single_steps(viterbi_step_avx512, prev, next, planes0, planes1, codes, L, K, target0, weight0, target1,
                     weight1);
    return;
  }
  const uint32_t groups = 1u << (L - K), fan = 1u << K;
  const uint32_t u_count = 1u << (L - 2 * K);  // step-(t+2) states per 2^(2K), the blocks' index
  // Blocks of `width` consecutive u: 256 floats of each predecessor stream, so
  // the hardware prefetchers see long runs (16 KB of middle costs at most).
  const uint32_t width = std::min<uint32_t>(u_count, kMiddleFloats >> (2 * K)), block = width << K;
  const size_t plane_bytes = groups / 8;
  __m512i expand[1u << kMaxSimdSymbolBits];
  make_expand(K, expand);
  const StepConstants sc0 = step_constants(target0, weight0), sc1 = step_constants(target1, weight1);
  alignas(64) float middle[kMiddleFloats];  // [j'][i]: step t+1's costs of the block
  for (uint32_t u0 = 0; u0 < u_count; u0 += width) {
    for (uint32_t jp = 0; jp < fan; ++jp)
      for (uint32_t v = 0; v < width; v += 16) {
        const uint32_t r0 = u0 + v + jp * u_count;
        step_groups(prev + r0, groups, K, planes0, plane_bytes, r0, codes + (r0 << K), expand, sc0,
                    middle + jp * block + (v << K));
      }
    for (uint32_t i = 0; i < block; i += 16) {
      const uint32_t r0 = (u0 << K) + i;
      step_groups(middle + i, block, K, planes1, plane_bytes, r0, codes + (r0 << K), expand, sc1, next + (r0 << K));
    }
  }
}

}  // namespace eq::quant::trellis
