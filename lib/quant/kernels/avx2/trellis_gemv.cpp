// AVX2 inner loop of the trellis decode kernel (quant/trellis/gemv.h): the
// AVX-512 algorithm on two ymm halves per tile row, with the byte sum of the
// 1MAD hash formed as two 16-bit pair sums (<= 510) and multiplied by q as
// int16 with vpmaddwd (vpmaddubsw would saturate). Same integers, same fp32
// combination (one fma per block and row) as the reference.
#include <immintrin.h>

#include <cmath>

#include "quant/trellis/gemv.h"
#include "quant/trellis/row_tables.h"

namespace eq::quant::trellis {

namespace {

inline int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

template <int Bits>
void tile_gemv_bits(const TileGemvArgs& a) {
  constexpr int kBytes = tile_bytes(Bits);
  const RowTables& rt = row_tables(Bits);
  const GemvInput& in = *a.in;
  const __m256i shift_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(rt.shift));
  const __m256i shift_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(rt.shift + 8));
  const __m256i mask16 = _mm256_set1_epi32(0xFFFF);
  const __m256i byte_pairs = _mm256_set1_epi32(0x00FF00FF);
  const __m256i mul = _mm256_set1_epi32(static_cast<int>(k1madMul));
  const __m256i add = _mm256_set1_epi32(static_cast<int>(k1madAdd));
  const int64_t tiles_per_block = in.rep_block / kTileDim;
  const int64_t stride = a.tiles_n * kBytes;
  // (y + 510) * q for 8 states: the pair sums byte0 + byte1 | byte2 + byte3 times (q, q) as int16.
  auto code_times_q = [&](__m256i words, __m256i shift, __m256i q16) {
    const __m256i state = _mm256_and_si256(_mm256_srlv_epi32(words, shift), mask16);
    const __m256i hash = _mm256_add_epi32(_mm256_mullo_epi32(state, mul), add);
    const __m256i pairs = _mm256_add_epi32(_mm256_and_si256(hash, byte_pairs),
                                           _mm256_and_si256(_mm256_srli_epi32(hash, 8), byte_pairs));
    return _mm256_madd_epi16(pairs, q16);
  };
  for (int64_t nt = a.nt_begin; nt < a.nt_end; ++nt) {
    const uint8_t* column = a.tiles + nt * kBytes;
    float* z = a.z + (nt - a.nt_begin) * kTileDim;
    for (int r = 0; r < kTileDim; ++r) z[r] = 0.0f;
    for (int64_t b = 0; b < a.tiles_k / tiles_per_block; ++b) {
      __m256i acc[kTileDim];
      for (int r = 0; r < kTileDim; ++r) acc[r] = _mm256_setzero_si256();
      for (int64_t kt = b * tiles_per_block; kt < (b + 1) * tiles_per_block; ++kt) {
        const uint8_t* tile = column + kt * stride;
        // q[k] as int16 in both halves of dword k (the replicated bytes, sign-extended).
        const int8_t* xq = in.q_rep4 + kt * kTileDim * 4;
        const __m256i q_lo = _mm256_srai_epi16(
            _mm256_slli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), 8), 8);
        const __m256i q_hi = _mm256_srai_epi16(
            _mm256_slli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)), 8), 8);
        auto row = [&](int g, __m128i bytes) {
          const __m256i both = _mm256_broadcastsi128_si256(bytes);
          const __m256i lo = code_times_q(
              _mm256_shuffle_epi8(both, _mm256_load_si256(reinterpret_cast<const __m256i*>(rt.ctrl[g]))), shift_lo, q_lo);
          const __m256i hi = code_times_q(
              _mm256_shuffle_epi8(both, _mm256_load_si256(reinterpret_cast<const __m256i*>(rt.ctrl[g] + 32))), shift_hi,
              q_hi);
          acc[g] = _mm256_add_epi32(acc[g], _mm256_add_epi32(lo, hi));
        };
        // Row 0 wraps around: the stream's last 2 bytes, then its first 14.
        row(0, _mm_alignr_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)),
                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kBytes - 16)), 14));
        for (int g = 1; g < kTileDim; ++g) row(g, _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + rt.offset[g])));
      }
      const float scale = in.rep_scale[b];
      for (int r = 0; r < kTileDim; ++r)
        z[r] = std::fma(static_cast<float>(sum_lanes(acc[r]) - 510 * in.rep_sum[b]), scale, z[r]);
    }
  }
}

}  // namespace

void tile_gemv_avx2(const TileGemvArgs& a) {
  switch (a.bits) {
    case 2: return tile_gemv_bits<2>(a);
    case 3: return tile_gemv_bits<3>(a);
    default: return tile_gemv_bits<4>(a);
  }
}

}  // namespace eq::quant::trellis
