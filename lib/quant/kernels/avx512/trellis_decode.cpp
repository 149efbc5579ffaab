// AVX-512 decode, Hadamard and matmul kernels of the trellis format, and the
// AVX-512 kernel table. Results equal the generic kernels bit for bit except
// strip_matmul (a different summation order).
// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsic
// headers as uninitialized (GCC bug 105593); the warning is about the header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

void viterbi_step_avx512(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                         float target, float weight);

namespace {

// y(state) of the 1MAD code for 16 states.
inline __m512 code_1mad_x16(__m512i state) {
  __m512i x = _mm512_add_epi32(_mm512_mullo_epi32(state, _mm512_set1_epi32(static_cast<int>(k1madMul))),
                               _mm512_set1_epi32(static_cast<int>(k1madAdd)));
  const __m512i byte_mask = _mm512_set1_epi32(0x00FF00FF);
  __m512i pairs = _mm512_add_epi32(_mm512_and_si512(x, byte_mask), _mm512_and_si512(_mm512_srli_epi32(x, 8), byte_mask));
  __m512i y = _mm512_add_epi32(_mm512_and_si512(pairs, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(pairs, 16));
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(y, _mm512_set1_epi32(510)));
}

}  // namespace

void decode_tile_avx512(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  // As in the generic kernel: the stream with its last 8 bytes in front; the 16
  // states of tile row g start at bit 48 + (16g + l + 1)K = 8 * (6 + 2gK) + (l+1)K.
  const int nbytes = tile_bytes(K);
  alignas(64) uint8_t ext[8 + 128 + 16] = {};
  std::memcpy(ext, tile + nbytes - 8, 8);
  std::memcpy(ext + 8, tile, nbytes);
  alignas(64) uint8_t shuffle[64];
  alignas(64) int32_t shift[16];
  for (int l = 0; l < 16; ++l) {
    int bit = (l + 1) * K;
    for (int i = 0; i < 4; ++i) shuffle[4 * l + i] = static_cast<uint8_t>((bit >> 3) + 3 - i);  // big-endian word
    shift[l] = 16 - (bit & 7);
  }
  const __m512i vshuffle = _mm512_load_si512(shuffle);
  const __m512i vshift = _mm512_load_si512(shift);
  for (int g = 0; g < kTileDim; ++g) {
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ext + 6 + 2 * g * K));
    __m512i words = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(bytes), vshuffle);
    __m512i state = _mm512_and_si512(_mm512_srlv_epi32(words, vshift), _mm512_set1_epi32(0xFFFF));
    _mm512_storeu_ps(out + g * out_stride, _mm512_mul_ps(code_1mad_x16(state), _mm512_set1_ps(row_factor[g])));
  }
}

namespace {

// Butterflies with h < 16 inside one vector: lanes with bit h clear get v + partner,
// lanes with bit h set get partner - v (the same operations as the scalar loop).
inline __m512 butterfly_in_vector(__m512 v) {
  __m512 p = _mm512_permute_ps(v, 0xB1);  // h = 1
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xAAAA, p, v);
  p = _mm512_permute_ps(v, 0x4E);  // h = 2
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xCCCC, p, v);
  p = _mm512_shuffle_f32x4(v, v, 0xB1);  // h = 4
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xF0F0, p, v);
  p = _mm512_shuffle_f32x4(v, v, 0x4E);  // h = 8
  return _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xFF00, p, v);
}

}  // namespace

void hadamard_rows_avx512(float* x, int64_t rows, int64_t dim, int64_t block) {
  if (block < 16) return hadamard_rows_generic(x, rows, dim, block);
  const __m512 norm = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t base = 0; base < dim; base += block) {
      float* v = x + r * dim + base;
      for (int64_t j = 0; j < block; j += 16) _mm512_storeu_ps(v + j, butterfly_in_vector(_mm512_loadu_ps(v + j)));
      for (int64_t h = 16; h < block; h *= 2)
        for (int64_t i = 0; i < block; i += 2 * h)
          for (int64_t j = i; j < i + h; j += 16) {
            __m512 a = _mm512_loadu_ps(v + j), b = _mm512_loadu_ps(v + j + h);
            _mm512_storeu_ps(v + j, _mm512_add_ps(a, b));
            _mm512_storeu_ps(v + j + h, _mm512_sub_ps(a, b));
          }
      for (int64_t j = 0; j < block; j += 16) _mm512_storeu_ps(v + j, _mm512_mul_ps(_mm512_loadu_ps(v + j), norm));
    }
  }
}

void hadamard_columns_avx512(float* x, int64_t rows, int64_t cols, int64_t block) {
  const int64_t vec_cols = cols / 16 * 16;
  if (vec_cols != cols) return hadamard_columns_generic(x, rows, cols, block);
  const __m512 norm = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  constexpr int64_t kChunk = 64;  // columns per pass: block x 64 floats stay in L1
  for (int64_t base = 0; base < rows; base += block) {
    float* m = x + base * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
      const int64_t c1 = c0 + kChunk < cols ? c0 + kChunk : cols;
      for (int64_t h = 1; h < block; h *= 2)
        for (int64_t i = 0; i < block; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            float* a = m + j * cols;
            float* b = m + (j + h) * cols;
            for (int64_t c = c0; c < c1; c += 16) {
              __m512 u = _mm512_loadu_ps(a + c), w = _mm512_loadu_ps(b + c);
              _mm512_storeu_ps(a + c, _mm512_add_ps(u, w));
              _mm512_storeu_ps(b + c, _mm512_sub_ps(u, w));
            }
          }
      for (int64_t j = 0; j < block; ++j)
        for (int64_t c = c0; c < c1; c += 16)
          _mm512_storeu_ps(m + j * cols + c, _mm512_mul_ps(_mm512_loadu_ps(m + j * cols + c), norm));
    }
  }
}

void strip_matmul_avx512(const float* x, int64_t m_rows, int64_t cols, const float* strip, float* z,
                         int64_t z_stride) {
  if (cols % 16 != 0) return strip_matmul_generic(x, m_rows, cols, strip, z, z_stride);
  for (int64_t m = 0; m < m_rows; ++m) {
    const float* xm = x + m * cols;
    __m512 acc[kTileDim];
    for (int r = 0; r < kTileDim; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols; k += 16) {
      __m512 xv = _mm512_loadu_ps(xm + k);
      for (int r = 0; r < kTileDim; ++r) acc[r] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(strip + r * cols + k), acc[r]);
    }
    for (int r = 0; r < kTileDim; ++r) z[m * z_stride + r] = _mm512_reduce_add_ps(acc[r]);
  }
}

const Kernels& avx512_kernels() {
  static const Kernels table{viterbi_step_avx512, decode_tile_avx512, hadamard_rows_avx512,
                             hadamard_columns_avx512, strip_matmul_avx512};
  return table;
}

}  // namespace eq::quant::trellis
