// AVX-512 VBMI tile decoders of the trellis formats (quant/trellis/kernels.h);
// avx512_kernels() holds them when the CPU has VBMI. Only this file is
// compiled for VBMI, as trellis_gemv_vbmi.cpp.
//  * decode_tile: the gemv kernel's rows (trellis_row_states.h) with
//    vpmultishiftqb for the state.
//  * decode_tile_panel: one zmm per tile *column* c, lane r = state 16r + c,
//    so each vector is one 16-float row of the panel layout and nothing is
//    transposed. The 16 windows of a column lie 2K bytes apart across the
//    whole tile (64 / 96 / 128 bytes), which one vpermb / vpermi2b reaches;
//    their bit offset within the dword, ((c+1)K) mod 8, is the same in every
//    lane, so one vpmultishiftqb control per column extracts the states.
// Both compute y exactly (vpdpbusd of the hash bytes onto -510), then the
// generic kernel's float(y) * row_factor: the same bits on every ISA.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC target("avx512vbmi")
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, as in trellis_decode.cpp
#endif
#define EQ_TRELLIS_VBMI  // trellis_row_states.h: MultiShift
#include "trellis_row_states.h"

#include "quant/int8_panels.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

namespace {

template <int Bits>
struct ColumnTables {
  alignas(64) uint8_t perm[kTileDim][64];  // vpermi2b index of byte i of lane r's big-endian dword
  int64_t multishift[kTileDim];            // per column: bytes 0, 1 of each dword of a qword
};

template <int Bits>
const ColumnTables<Bits>& column_tables() {
  static const ColumnTables<Bits> t = [] {
    ColumnTables<Bits> ct{};
    constexpr int n = tile_bytes(Bits);
    for (int c = 0; c < kTileDim; ++c) {
      // State t = 16r + c: stream bits [(t+1)K - 16, (t+1)K), wrapping; the
      // window's first byte is 2rK + ((c+1)K >> 3) - 2 (mod n).
      for (int r = 0; r < kTileDim; ++r) {
        const int first = 2 * r * Bits + (((c + 1) * Bits) >> 3) - 2;
        for (int i = 0; i < 4; ++i) ct.perm[c][4 * r + i] = static_cast<uint8_t>(((first + 3 - i) % n + n) % n);
      }
      const int64_t low = row_shift(Bits, c);  // ((c+1)K) mod 8 = the state's offset in every lane
      const int64_t dword = low | (low + 8) << 8, upper = dword + (32 | 32 << 8);
      ct.multishift[c] = dword | upper << 32;
    }
    return ct;
  }();
  return t;
}

// A tile's bytes [0, 64) and [64, n) (zero above n); no load leaves it.
template <int Bits>
struct TileBytes {
  __m512i lo, hi;
  explicit TileBytes(const uint8_t* tile) : lo(_mm512_loadu_si512(tile)), hi(_mm512_setzero_si512()) {
    if constexpr (Bits == 3) hi = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 64)));
    if constexpr (Bits == 4) hi = _mm512_loadu_si512(tile + 64);
  }
  // y of column c's 16 states (lane r = state 16r + c), exact.
  __m512i column_y(const ColumnTables<Bits>& ct, int c) const {
    const __m512i index = _mm512_load_si512(ct.perm[c]);
    const __m512i words = Bits == 2 ? _mm512_permutexvar_epi8(index, lo) : _mm512_permutex2var_epi8(lo, index, hi);
    const __m512i state =
        _mm512_maskz_multishift_epi64_epi8(0x3333333333333333ull, _mm512_set1_epi64(ct.multishift[c]), words);
    return code_1mad_from_hash(hash_1mad(state));
  }
};

template <int Bits>
void decode_tile_columns(const uint8_t* tile, const float* row_factor, float* out) {
  const ColumnTables<Bits>& ct = column_tables<Bits>();
  const TileBytes<Bits> bytes(tile);
  const __m512 factor = _mm512_loadu_ps(row_factor);
#pragma GCC unroll 16
  for (int c = 0; c < kTileDim; ++c)
    _mm512_storeu_ps(out + c * kTileDim, _mm512_mul_ps(_mm512_cvtepi32_ps(bytes.column_y(ct, c)), factor));
}

// decode_tile_columns with int8 codes out (Kernels::decode_tile_int8): each
// group of 4 columns goes through vpmulhrsw (trellis_int8_code) and is merged
// into one dword per row.
template <int Bits>
void decode_tile_columns_int8(const uint8_t* tile, uint8_t* out) {
  const ColumnTables<Bits>& ct = column_tables<Bits>();
  const TileBytes<Bits> bytes(tile);
  const __m512i mul = _mm512_set1_epi16(kTrellisInt8Mul);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
  for (int c0 = 0; c0 < kTileDim; c0 += 4) {
    __m512i v[4];
    for (int i = 0; i < 4; ++i)
      v[i] = _mm512_mulhrs_epi16(bytes.column_y(ct, c0 + i), mul);
    __m512i r = _mm512_ternarylogic_epi32(v[0], _mm512_slli_epi32(v[1], 8), _mm512_set1_epi32(0x0000FF00), 0xD8);
    r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v[2], 16), _mm512_set1_epi32(0x00FF0000), 0xD8);
    r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v[3], 24), _mm512_set1_epi32(static_cast<int>(0xFF000000u)), 0xD8);
    _mm512_storeu_si512(out + c0 * kTileDim, _mm512_xor_si512(r, flip));
  }
}

}  // namespace

void decode_tile_int8_avx512_vbmi(const uint8_t* tile, int K, uint8_t* out) {
  switch (K) {
    case 2: return decode_tile_columns_int8<2>(tile, out);
    case 3: return decode_tile_columns_int8<3>(tile, out);
    default: return decode_tile_columns_int8<4>(tile, out);
  }
}

void decode_tile_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  switch (K) {
    case 2: return decode_tile_rows<2>(tile, row_factor, out, out_stride, multi_shift<2>());
    case 3: return decode_tile_rows<3>(tile, row_factor, out, out_stride, multi_shift<3>());
    default: return decode_tile_rows<4>(tile, row_factor, out, out_stride, multi_shift<4>());
  }
}

void decode_tile_panel_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out) {
  switch (K) {
    case 2: return decode_tile_columns<2>(tile, row_factor, out);
    case 3: return decode_tile_columns<3>(tile, row_factor, out);
    default: return decode_tile_columns<4>(tile, row_factor, out);
  }
}

}  // namespace eq::quant::trellis

#if defined(__clang__)
#pragma clang attribute pop
#endif
