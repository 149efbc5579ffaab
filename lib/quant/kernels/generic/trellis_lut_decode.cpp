// Scalar tile decoders of the LUT-code trellis formats (trellis{2,3,4}_lut):
// the definition (tile_state, code_lut) the VBMI decoders are tested against,
// and the decoders of every ISA without one.
#include <cstdint>

#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

namespace {

// y of every weight t = 16r + c of one tile.
void tile_lut_codes(const uint8_t* tile, int K, int* y) {
  uint32_t states[kTileSize];
  tile_states(tile, K, states);
  for (int t = 0; t < kTileSize; ++t) y[t] = code_lut(states[t]);
}

}  // namespace

void decode_tile_lut_generic(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  int y[kTileSize];
  tile_lut_codes(tile, K, y);
  for (int t = 0; t < kTileSize; ++t) out[(t >> 4) * out_stride + (t & 15)] = static_cast<float>(y[t]) * row_factor[t >> 4];
}

void decode_tile_panel_lut_generic(const uint8_t* tile, int K, const float* row_factor, float* out) {
  int y[kTileSize];
  tile_lut_codes(tile, K, y);
  for (int t = 0; t < kTileSize; ++t) out[(t & 15) * kTileDim + (t >> 4)] = static_cast<float>(y[t]) * row_factor[t >> 4];
}

void decode_tile_int8_lut_generic(const uint8_t* tile, int K, uint8_t* out) {
  int y[kTileSize];
  tile_lut_codes(tile, K, y);
  for (int t = 0; t < kTileSize; ++t) {
    const int r = t >> 4, c = t & 15;
    out[(c / 4) * 64 + r * 4 + c % 4] = static_cast<uint8_t>(y[t] + 128);  // |y| <= 126: exact, no rescale
  }
}

}  // namespace eq::quant::trellis
