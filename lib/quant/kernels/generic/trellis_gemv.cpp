// Scalar reference of the trellis decode inner loop (quant/trellis/gemv.h):
// the definition the AVX2 and AVX-512 variants are tested against bit for bit.
#include <cmath>
#include <cstring>

#include "quant/trellis/gemv.h"

namespace eq::quant::trellis {

namespace {

// y(state_t) + code_bias(code) (for 1MAD the plain sum of the 4 bytes of the
// hash) of every weight t = 16r + c of one tile.
void tile_codes_biased(const uint8_t* tile, int bits, Code code, int32_t* codes) {
  uint32_t states[kTileSize];
  tile_states(tile, bits, states);
  for (int t = 0; t < kTileSize; ++t) codes[t] = code_value(code, states[t]) + code_bias(code);
}

}  // namespace

void tile_gemv_generic(const TileGemvArgs& a) {
  const GemvInput& in = *a.in;
  const int64_t tiles_per_block = in.rep_block / kTileDim;
  const int64_t tb = tile_bytes(a.bits);
  int32_t codes[kTileSize];
  for (int64_t nt = a.nt_begin; nt < a.nt_end; ++nt) {
    float* z = a.z + (nt - a.nt_begin) * kTileDim;
    for (int r = 0; r < kTileDim; ++r) z[r] = 0.0f;
    for (int64_t b = 0; b < a.tiles_k / tiles_per_block; ++b) {
      int32_t sum[kTileDim] = {};
      for (int64_t kt = b * tiles_per_block; kt < (b + 1) * tiles_per_block; ++kt) {
        tile_codes_biased(a.tiles + (kt * a.tiles_n + nt) * tb, a.bits, a.code, codes);
        const int8_t* q = in.q + kt * kTileDim;  // set_replicated always fills q (q_rep4 only for 1MAD)
        for (int r = 0; r < kTileDim; ++r)
          for (int c = 0; c < kTileDim; ++c) sum[r] += codes[r * kTileDim + c] * q[c];
      }
      const float scale = in.rep_scale[b];
      const int32_t offset = code_bias(a.code) * in.rep_sum[b];
      for (int r = 0; r < kTileDim; ++r) z[r] = std::fma(static_cast<float>(sum[r] - offset), scale, z[r]);
    }
  }
}

}  // namespace eq::quant::trellis
