// AVX2 decode, Hadamard and matmul kernels of the trellis format, and the AVX2
// kernel table. Results equal the generic kernels bit for bit except
// strip_matmul (a different summation order).
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

void viterbi_step_avx2(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                       float target, float weight);

namespace {
void viterbi_two_steps_avx2(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                            int L, int K, float target0, float weight0, float target1, float weight1) {
  two_single_steps(viterbi_step_avx2, prev, next, planes0, planes1, codes, L, K, target0, weight0, target1, weight1);
}
}  // namespace

namespace {

inline __m256 code_1mad_x8(__m256i state) {
  __m256i x = _mm256_add_epi32(_mm256_mullo_epi32(state, _mm256_set1_epi32(static_cast<int>(k1madMul))),
                               _mm256_set1_epi32(static_cast<int>(k1madAdd)));
  const __m256i byte_mask = _mm256_set1_epi32(0x00FF00FF);
  __m256i pairs = _mm256_add_epi32(_mm256_and_si256(x, byte_mask), _mm256_and_si256(_mm256_srli_epi32(x, 8), byte_mask));
  __m256i y = _mm256_add_epi32(_mm256_and_si256(pairs, _mm256_set1_epi32(0xFFFF)), _mm256_srli_epi32(pairs, 16));
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(y, _mm256_set1_epi32(510)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace

void decode_tile_avx2(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  // Lanes l < 8 of tile row g start at bit 8 * (6 + 2gK) + (l+1)K; lanes 8..15
  // at the same pattern K bytes later.
  const int nbytes = tile_bytes(K);
  alignas(32) uint8_t ext[8 + 128 + 24] = {};
  std::memcpy(ext, tile + nbytes - 8, 8);
  std::memcpy(ext + 8, tile, nbytes);
  // vpshufb / vpsrlvd controls per K, built once (not on every tile).
  struct Controls {
    alignas(32) uint8_t shuffle[32];
    alignas(32) int32_t shift[8];
  };
  static const auto controls = [] {
    std::array<Controls, 5> c{};
    for (int k = 2; k <= 4; ++k)
      for (int l = 0; l < 8; ++l) {
        int bit = (l + 1) * k;
        for (int i = 0; i < 4; ++i) c[k].shuffle[4 * l + i] = static_cast<uint8_t>((bit >> 3) + 3 - i);
        c[k].shift[l] = 16 - (bit & 7);
      }
    return c;
  }();
  const Controls& ctl = controls[K];
  const __m256i vshuffle = _mm256_load_si256(reinterpret_cast<const __m256i*>(ctl.shuffle));
  const __m256i vshift = _mm256_load_si256(reinterpret_cast<const __m256i*>(ctl.shift));
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  for (int g = 0; g < kTileDim; ++g) {
    const __m256 factor = _mm256_set1_ps(row_factor[g]);
    for (int half = 0; half < 2; ++half) {
      __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ext + 6 + 2 * g * K + half * K));
      __m256i words = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), vshuffle);
      __m256i state = _mm256_and_si256(_mm256_srlv_epi32(words, vshift), low16);
      _mm256_storeu_ps(out + g * out_stride + 8 * half, _mm256_mul_ps(code_1mad_x8(state), factor));
    }
  }
}

// Rows through an L1 buffer, then transposed (a data move: same bits).
void decode_tile_panel_avx2(const uint8_t* tile, int K, const float* row_factor, float* out) {
  alignas(32) float rows[kTileSize];
  decode_tile_avx2(tile, K, row_factor, rows, kTileDim);
  for (int r = 0; r < kTileDim; ++r)
    for (int c = 0; c < kTileDim; ++c) out[c * kTileDim + r] = rows[r * kTileDim + c];
}

namespace {

inline __m256 butterfly_in_vector(__m256 v) {
  __m256 p = _mm256_permute_ps(v, 0xB1);  // h = 1
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
  p = _mm256_permute_ps(v, 0x4E);  // h = 2
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
  p = _mm256_permute2f128_ps(v, v, 0x01);  // h = 4
  return _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0);
}

}  // namespace

void hadamard_rows_avx2(float* x, int64_t rows, int64_t dim, int64_t block) {
  if (block < 8) return hadamard_rows_generic(x, rows, dim, block);
  const __m256 norm = _mm256_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t base = 0; base < dim; base += block) {
      float* v = x + r * dim + base;
      for (int64_t j = 0; j < block; j += 8) _mm256_storeu_ps(v + j, butterfly_in_vector(_mm256_loadu_ps(v + j)));
      for (int64_t h = 8; h < block; h *= 2)
        for (int64_t i = 0; i < block; i += 2 * h)
          for (int64_t j = i; j < i + h; j += 8) {
            __m256 a = _mm256_loadu_ps(v + j), b = _mm256_loadu_ps(v + j + h);
            _mm256_storeu_ps(v + j, _mm256_add_ps(a, b));
            _mm256_storeu_ps(v + j + h, _mm256_sub_ps(a, b));
          }
      for (int64_t j = 0; j < block; j += 8) _mm256_storeu_ps(v + j, _mm256_mul_ps(_mm256_loadu_ps(v + j), norm));
    }
  }
}

void hadamard_columns_avx2(float* x, int64_t rows, int64_t cols, int64_t block) {
  if (cols % 8 != 0) return hadamard_columns_generic(x, rows, cols, block);
  const __m256 norm = _mm256_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  constexpr int64_t kChunk = 64;
  for (int64_t base = 0; base < rows; base += block) {
    float* m = x + base * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
      const int64_t c1 = c0 + kChunk < cols ? c0 + kChunk : cols;
      for (int64_t h = 1; h < block; h *= 2)
        for (int64_t i = 0; i < block; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            float* a = m + j * cols;
            float* b = m + (j + h) * cols;
            for (int64_t c = c0; c < c1; c += 8) {
              __m256 u = _mm256_loadu_ps(a + c), w = _mm256_loadu_ps(b + c);
              _mm256_storeu_ps(a + c, _mm256_add_ps(u, w));
              _mm256_storeu_ps(b + c, _mm256_sub_ps(u, w));
            }
          }
      for (int64_t j = 0; j < block; ++j)
        for (int64_t c = c0; c < c1; c += 8)
          _mm256_storeu_ps(m + j * cols + c, _mm256_mul_ps(_mm256_loadu_ps(m + j * cols + c), norm));
    }
  }
}

void strip_matmul_avx2(const float* x, int64_t m_rows, int64_t cols, const float* strip, float* z,
                       int64_t z_stride) {
  if (cols % 8 != 0) return strip_matmul_generic(x, m_rows, cols, strip, z, z_stride);
  for (int64_t m = 0; m < m_rows; ++m) {
    const float* xm = x + m * cols;
    for (int r0 = 0; r0 < kTileDim; r0 += 8) {  // 8 accumulators at a time (16 YMM registers)
      __m256 acc[8];
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
      for (int64_t k = 0; k < cols; k += 8) {
        __m256 xv = _mm256_loadu_ps(xm + k);
        for (int r = 0; r < 8; ++r)
          acc[r] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(strip + (r0 + r) * cols + k), acc[r]);
      }
      for (int r = 0; r < 8; ++r) z[m * z_stride + r0 + r] = hsum(acc[r]);
    }
  }
}

const Kernels& avx2_kernels() {
  static const Kernels table{viterbi_step_avx2,  decode_tile_avx2,      decode_tile_panel_avx2,
                             hadamard_rows_avx2, hadamard_columns_avx2, strip_matmul_avx2,
                             decode_tile_int8_generic,   decode_tile_lut_generic,
                             decode_tile_panel_lut_generic, decode_tile_int8_lut_generic,  // no int8 batch kernel on AVX2 (int8_panel_gemm.h)
                             viterbi_two_steps_avx2};
  return table;
}

}  // namespace eq::quant::trellis
