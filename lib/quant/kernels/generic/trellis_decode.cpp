// Scalar decode, Hadamard and matmul kernels of the trellis format, and the
// generic kernel table.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/int8_panels.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

namespace {

// Value (r, c) of a tile goes to out[r * row_stride + c * col_stride].
void decode_tile_strided(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t row_stride,
                         int64_t col_stride) {
  uint32_t states[kTileSize];
  tile_states(tile, K, states);
  for (int t = 0; t < kTileSize; ++t)
    out[(t >> 4) * row_stride + (t & 15) * col_stride] = static_cast<float>(code_1mad(states[t])) * row_factor[t >> 4];
}

}  // namespace

void decode_tile_generic(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  decode_tile_strided(tile, K, row_factor, out, out_stride, 1);
}

void decode_tile_panel_generic(const uint8_t* tile, int K, const float* row_factor, float* out) {
  decode_tile_strided(tile, K, row_factor, out, 1, kTileDim);
}

void decode_tile_int8_generic(const uint8_t* tile, int K, uint8_t* out) {
  static const float kOnes[kTileDim] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  float y[kTileDim * kTileDim];
  decode_tile_panel_generic(tile, K, kOnes, y);
  kernels::int8_trellis_codes_generic(y, 1, kTileDim * kTileDim, kTileDim, out, kTileDim * kTileDim);
}

void hadamard_rows_generic(float* x, int64_t rows, int64_t dim, int64_t block) {
  const float norm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block)));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    for (int64_t base = 0; base < dim; base += block) {
      float* v = row + base;
      for (int64_t h = 1; h < block; h *= 2)
        for (int64_t i = 0; i < block; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            float a = v[j], b = v[j + h];
            v[j] = a + b;
            v[j + h] = a - b;
          }
      for (int64_t j = 0; j < block; ++j) v[j] *= norm;
    }
  }
}

void hadamard_columns_generic(float* x, int64_t rows, int64_t cols, int64_t block) {
  const float norm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block)));
  for (int64_t base = 0; base < rows; base += block) {
    float* m = x + base * cols;
    for (int64_t h = 1; h < block; h *= 2)
      for (int64_t i = 0; i < block; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          float* a = m + j * cols;
          float* b = m + (j + h) * cols;
          for (int64_t c = 0; c < cols; ++c) {
            float u = a[c], w = b[c];
            a[c] = u + w;
            b[c] = u - w;
          }
        }
    for (int64_t i = 0; i < block * cols; ++i) m[i] *= norm;
  }
}

void strip_matmul_generic(const float* x, int64_t m_rows, int64_t cols, const float* strip, float* z,
                          int64_t z_stride) {
  for (int64_t m = 0; m < m_rows; ++m)
    for (int r = 0; r < kTileDim; ++r) {
      float acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += x[m * cols + k] * strip[r * cols + k];
      z[m * z_stride + r] = acc;
    }
}

const Kernels& generic_kernels() {
  static const Kernels table{viterbi_step_generic,     decode_tile_generic,      decode_tile_panel_generic,
                             hadamard_rows_generic,    hadamard_columns_generic, strip_matmul_generic,
                             decode_tile_int8_generic, decode_tile_lut_generic,
                             decode_tile_panel_lut_generic, decode_tile_int8_lut_generic,
                             viterbi_two_steps_generic};
  return table;
}

}  // namespace eq::quant::trellis
