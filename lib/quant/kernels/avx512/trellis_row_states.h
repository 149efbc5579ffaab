// The 16 states of one trellis tile row in one zmm, shared by the AVX-512
// trellis kernels (the gemv loop trellis_gemv_impl.h, the tile decoder
// trellis_decode*.cpp): the row's 16 bytes (quant/trellis/gemv.h
// row_load_offset), vpshufb into big-endian dwords (row_byte), then the
// state = bits [row_shift, row_shift + 16) of each dword, by vpsrlvd + vpandd
// (ShiftAndMask) or, in translation units compiled for VBMI that define
// EQ_TRELLIS_VBMI first, by one zero-masked vpmultishiftqb (MultiShift).
// Internal linkage: each including file compiles its own copy with its own
// target flags, so no VBMI code can leak into the others.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/trellis/codebook.h"
#include "quant/trellis/gemv.h"
#include "quant/trellis/row_tables.h"

namespace eq::quant::trellis {

namespace {

// The 16 bytes row g's states are read from (row 0 wraps around: the
// stream's last 2 bytes, then its first 14). Loads never leave the tile.
template <int Bits>
inline __m128i row_bytes(const uint8_t* tile, int g) {
  if (g == 0)
    return _mm_alignr_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + tile_bytes(Bits) - 16)), 14);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + row_load_offset(Bits, g)));
}

// Big-endian dwords holding each state's window, for row g.
inline __m512i row_words(const RowTables& rt, __m128i bytes, int g) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(bytes), _mm512_load_si512(rt.ctrl[g]));
}

struct ShiftAndMask {
  __m512i shift, mask;
  __m512i operator()(__m512i words) const { return _mm512_and_si512(_mm512_srlv_epi32(words, shift), mask); }
};

template <int Bits>
ShiftAndMask shift_and_mask() {
  return {_mm512_load_si512(row_tables(Bits).shift), _mm512_set1_epi32(0xFFFF)};
}

#if defined(EQ_TRELLIS_VBMI)
struct MultiShift {
  __m512i control;
  __m512i operator()(__m512i words) const {
    return _mm512_maskz_multishift_epi64_epi8(0x3333333333333333ull, control, words);  // bytes 0, 1 of each dword
  }
};

template <int Bits>
MultiShift multi_shift() {
  return {_mm512_load_si512(row_tables(Bits).multishift)};
}
#endif

// x = s * a + b mod 2^32, the 1MAD hash of 16 states.
inline __m512i hash_1mad(__m512i state) {
  return _mm512_add_epi32(_mm512_mullo_epi32(state, _mm512_set1_epi32(static_cast<int>(k1madMul))),
                          _mm512_set1_epi32(static_cast<int>(k1madAdd)));
}

// y = byte0(x) + byte1(x) + byte2(x) + byte3(x) - 510, exactly: one vpdpbusd
// of the hash bytes (unsigned) against ones, accumulated onto -510.
inline __m512i code_1mad_from_hash(__m512i hash) {
  return _mm512_dpbusd_epi32(_mm512_set1_epi32(-510), hash, _mm512_set1_epi32(0x01010101));
}

// decode_tile (quant/trellis/kernels.h) for K = Bits with the given state
// extraction: out[g * out_stride + l] = float(y) * row_factor[g], the generic
// kernel's two fp32 operations (exact int -> float, one multiply).
template <int Bits, class StateOf>
void decode_tile_rows(const uint8_t* tile, const float* row_factor, float* out, int64_t out_stride,
                      const StateOf& state_of) {
  const RowTables& rt = row_tables(Bits);
#pragma GCC unroll 16
  for (int g = 0; g < kTileDim; ++g) {
    const __m512i y = code_1mad_from_hash(hash_1mad(state_of(row_words(rt, row_bytes<Bits>(tile, g), g))));
    _mm512_storeu_ps(out + g * out_stride, _mm512_mul_ps(_mm512_cvtepi32_ps(y), _mm512_set1_ps(row_factor[g])));
  }
}

}  // namespace

}  // namespace eq::quant::trellis
