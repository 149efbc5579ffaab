// AVX-512 variant of quant/block_int8.h: the generic kernel's operations on
// 16 lanes (|x| max, one multiply, clamp, round half to even by the same
// add and subtract of 1.5 * 2^23), so the bits are the same.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 in _mm512_reduce_*, as in trellis_gemv.cpp
#endif
#include <immintrin.h>

#include "quant/block_int8.h"

namespace eq::quant::kernels {

int32_t quantize_block_int8_avx512(const float* x, int64_t n, float* scale, int8_t* q) {
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  const float amax = _mm512_reduce_max_ps(vmax);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  __m512i sum = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv), lo), hi);
    const __m512i r = _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_add_ps(v, magic), magic));  // exact integers
    sum = _mm512_add_epi32(sum, r);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(r));
  }
  return _mm512_reduce_add_epi32(sum);
}

}  // namespace eq::quant::kernels
