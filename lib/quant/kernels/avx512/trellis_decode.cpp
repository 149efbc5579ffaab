// AVX-512 decode, Hadamard and matmul kernels of the trellis format, and the
// AVX-512 kernel table. Results equal the generic kernels bit for bit except
// strip_matmul (a different summation order). The tile decoders share the
// gemv kernel's state extraction (trellis_row_states.h); the VBMI ones are in
// trellis_decode_vbmi.cpp.
// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsic
// headers as uninitialized (GCC bug 105593); the warning is about the header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/int8_panels.h"
#include "quant/panel_transpose.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/gemv.h"
#include "quant/trellis/kernels.h"
#include "trellis_row_states.h"

namespace eq::quant::trellis {

void viterbi_step_avx512(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                         float target, float weight);
void viterbi_two_steps_avx512(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                              int L, int K, float target0, float weight0, float target1, float weight1);

void decode_tile_avx512(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  switch (K) {
    case 2: return decode_tile_rows<2>(tile, row_factor, out, out_stride, shift_and_mask<2>());
    case 3: return decode_tile_rows<3>(tile, row_factor, out, out_stride, shift_and_mask<3>());
    default: return decode_tile_rows<4>(tile, row_factor, out, out_stride, shift_and_mask<4>());
  }
}

// Without VBMI no byte permute spans the tile, so the rows go through an L1
// buffer and the 16 x 16 register transpose of the panel layout.
void decode_tile_panel_avx512(const uint8_t* tile, int K, const float* row_factor, float* out) {
  alignas(64) float rows[kTileSize];
  decode_tile_avx512(tile, K, row_factor, rows, kTileDim);
  quant::kernels::rows_to_panel_avx512(rows, kTileDim, kTileDim, out);
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

void decode_tile_int8_avx512(const uint8_t* tile, int K, uint8_t* out) {
  static const float kOnes[kTileDim] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  alignas(64) float y[kTileDim * kTileDim];
  decode_tile_panel_avx512(tile, K, kOnes, y);
  kernels::int8_trellis_codes_avx512(y, 1, kTileDim * kTileDim, kTileDim, out, kTileDim * kTileDim);
}

const Kernels& avx512_kernels() {
  static const bool vbmi = cpu_has_avx512_vbmi();
  static const Kernels table{viterbi_step_avx512,
                             vbmi ? decode_tile_avx512_vbmi : decode_tile_avx512,
                             vbmi ? decode_tile_panel_avx512_vbmi : decode_tile_panel_avx512,
                             hadamard_rows_avx512,
                             hadamard_columns_avx512,
                             strip_matmul_avx512,
                             vbmi ? decode_tile_int8_avx512_vbmi : decode_tile_int8_avx512,
                             vbmi ? decode_tile_lut_avx512_vbmi : decode_tile_lut_generic,
                             vbmi ? decode_tile_panel_lut_avx512_vbmi : decode_tile_panel_lut_generic,
                             vbmi ? decode_tile_int8_lut_avx512_vbmi : decode_tile_int8_lut_generic,
                             viterbi_two_steps_avx512};
  return table;
}

}  // namespace eq::quant::trellis
