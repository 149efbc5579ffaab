// The per-ISA inner loop of the trellis decode kernel (kTrellisGemv,
// lib/quant/trellis/gemv.cpp): integer dot products of the tiles' 1MAD codes
// with the rotated int8 activation, combined per activation block in fp32.
// Every variant computes the same integers and combines them in the same
// order, so results are bit-identical across ISAs.
#pragma once

#include <cstdint>

#include "quant/gemv.h"
#include "quant/trellis/codebook.h"

namespace eq::quant::trellis {

struct TileGemvArgs {
  const uint8_t* tiles = nullptr;  // the `trellis` part: [K/16][N/16] tiles of tile_bytes(bits)
  int64_t tiles_n = 0;             // N / 16
  int64_t tiles_k = 0;             // K / 16
  int bits = 2;
  Code code = Code::k1mad;
  int64_t nt_begin = 0, nt_end = 0;  // 16-row blocks to compute
  const GemvInput* in = nullptr;     // set_replicated, rep_block a multiple of 16 dividing K
  // [16 * (nt_end - nt_begin)] written: for n = 16 * nt + r,
  //   z[n] = 0, then for each block b in order
  //          z[n] = fma(float(S_b[n] - bias * rep_sum[b]), rep_scale[b], z[n])   (one rounding:
  //          std::fma in the reference, so no compiler contraction can change the bits)
  //   S_b[n] = sum_{k in b} (y(state[n, k]) + bias) * q[k]        (exact int32)
  // with bias = code_bias(code) (510 for 1MAD, 128 for LUT).
  float* z = nullptr;
};

// Where the SIMD loops prefetch: the tiles of the iteration `distance` after
// (block b, n-tile nt) in the call's own walk (n-tiles inner, activation
// blocks outer), continuing into the next block at the call's first n-tile so
// a prefetch never touches another call's rows; its k-tile j is at
// + j * tiles_n * tile_bytes(bits). Null past the call's last iteration.
inline const uint8_t* tile_gemv_prefetch_column(const TileGemvArgs& a, int64_t tiles_per_block, int64_t b, int64_t nt,
                                                int64_t distance) {
  const int64_t nts = a.nt_end - a.nt_begin, blocks = a.tiles_k / tiles_per_block;
  int64_t ahead_b = b, ahead_nt = nt + distance;
  while (ahead_nt >= a.nt_end) ahead_nt -= nts, ++ahead_b;
  const int64_t bytes = tile_bytes(a.bits);
  return ahead_b < blocks ? a.tiles + (ahead_b * tiles_per_block * a.tiles_n + ahead_nt) * bytes : nullptr;
}

// Requests the cache lines of one tile (bytes = tile_bytes(bits): 64, 96 or
// 128, so 1-3 lines whatever its alignment); Locality as __builtin_prefetch
// (3: into L1, _MM_HINT_T0; 2: into L2, _MM_HINT_T1).
template <int Locality>
inline void prefetch_tile(const uint8_t* tile, int64_t bytes) {
  __builtin_prefetch(tile, 0, Locality);
  if (bytes > 64) __builtin_prefetch(tile + 64, 0, Locality);
  if (bytes > 32) __builtin_prefetch(tile + bytes - 1, 0, Locality);
}

void tile_gemv_generic(const TileGemvArgs& a);
void tile_gemv_avx2(const TileGemvArgs& a);
void tile_gemv_avx512(const TileGemvArgs& a);
void tile_gemv_avx512_vbmi(const TileGemvArgs& a);  // also needs AVX-512 VBMI (cpu_has_avx512_vbmi)
// n (1-4) inputs against the same tiles and rows: args[i] differ only in `in`
// and `z`; each z gets exactly what tile_gemv(args[i]) writes. AVX-512 decodes
// each state once for all inputs; the other ISAs loop over tile_gemv.
void tile_gemv_avx512_rows(const TileGemvArgs* args, int n);
void tile_gemv_avx512_vbmi_rows(const TileGemvArgs* args, int n);
// The LUT code's loop (needs VBMI: vpermb / vpermi2b / vpmultishiftqb). On
// other ISAs the LUT code runs tile_gemv_generic.
void tile_gemv_lut_avx512_vbmi(const TileGemvArgs& a);
// n (1-4) inputs, each state decoded once (as tile_gemv_avx512_vbmi_rows).
void tile_gemv_lut_avx512_vbmi_rows(const TileGemvArgs* args, int n);
// The variant for the active ISA (the VBMI one at the avx512 level when the CPU has it).
void tile_gemv(const TileGemvArgs& a);
void tile_gemv_rows(const TileGemvArgs* args, int n);
bool cpu_has_avx512_vbmi();

// Where SIMD kernels read the 16 states of tile row g (t = 16g + l): 16 bytes
// loaded at tile + row_load_offset(bits, g) (row 0: the stream's last 2 bytes
// then its first 14, the tail-biting wrap), and for state l the big-endian
// dword of bytes row_byte(bits, g, l, 0..3) of those 16 (0x80: a byte past the
// tile, always shifted out), shifted right by row_shift(bits, l) and masked to
// 16 bits. Loads never leave the tile.
constexpr int row_load_offset(int bits, int g) {
  if (g == 0) return -2;
  const int v = 2 * g * bits - 2, last = tile_bytes(bits) - 16;
  return v < last ? v : last;
}
constexpr uint8_t row_byte(int bits, int g, int l, int i) {
  const int v = g == 0 ? -2 : 2 * g * bits - 2;
  const int absolute = v + (((l + 1) * bits) >> 3) + 3 - i;  // byte index from the tile start
  if (absolute >= tile_bytes(bits)) return 0x80;
  return static_cast<uint8_t>(absolute - row_load_offset(bits, g));
}
constexpr int row_shift(int bits, int l) { return 16 - (((l + 1) * bits) & 7); }

}  // namespace eq::quant::trellis
