// The AVX-512 VNNI inner loop of the trellis decode kernel
// (quant/trellis/gemv.h), shared by trellis_gemv.cpp (AVX-512 F/BW/VNNI) and
// trellis_gemv_vbmi.cpp (the same with one VBMI vpmultishiftqb in place of a
// shift and a mask). Internal linkage: each including file compiles its own
// copy with its own target flags, so no VBMI code can leak into the other.
//
// One zmm per tile row: 16 states (vpshufb of the row's bytes into
// big-endian dwords, then shift + mask or vpmultishiftqb), the 1MAD hash
// x = s * a + b (vpmulld, vpaddd), and vpdpbusd against q[k] replicated in
// the 4 bytes of lane k adds byte0(x) + byte1(x) + byte2(x) + byte3(x) =
// y + 510 times q[k] to the row's int32 accumulator. 6-7 vector uops per 16
// weights on the two zmm ports: the loop is bound by arithmetic, not memory
// (docs/benchmarks.md, "Trellis decode kernel").
#pragma once

#include <immintrin.h>

#include <cmath>

#include "quant/trellis/gemv.h"
#include "trellis_row_states.h"  // row_bytes, ShiftAndMask, MultiShift (tables: quant/trellis/row_tables.h)

namespace eq::quant::trellis {

namespace {

// Sums of the lanes of 16 vectors: lane r of the result = sum of acc[r].
inline __m512i sum_lanes_16(const __m512i* acc) {
  __m512i w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i)  // [acc 2i folded to 8 lanes | acc 2i+1 folded to 8]
    w[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(acc[2 * i], acc[2 * i + 1], 0x44),
                            _mm512_shuffle_i64x2(acc[2 * i], acc[2 * i + 1], 0xEE));
  for (int j = 0; j < 4; ++j)  // quarter q: acc 4j + q folded to 4 lanes
    x[j] = _mm512_add_epi32(_mm512_shuffle_i64x2(w[2 * j], w[2 * j + 1], 0x88),
                            _mm512_shuffle_i64x2(w[2 * j], w[2 * j + 1], 0xDD));
  for (int m = 0; m < 2; ++m)  // quarter q: 2 lanes of acc 8m + q, 2 of acc 8m + 4 + q
    y[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(x[2 * m], x[2 * m + 1]), _mm512_unpackhi_epi64(x[2 * m], x[2 * m + 1]));
  const __m512 a = _mm512_castsi512_ps(y[0]), b = _mm512_castsi512_ps(y[1]);
  const __m512i s = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, 0x88)),
                                     _mm512_castps_si512(_mm512_shuffle_ps(a, b, 0xDD)));
  // Lane 4q + j holds acc 4j + q.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, s);
}

// Iterations (16-row block x activation block) ahead to prefetch, along the
// call's own walk: D n-tiles ahead in the same k-tile rows, continuing into
// the next activation block at the call's first n-tile, so a prefetch never
// touches another chunk's rows (tile_gemv_prefetch_column; before commit 7c6cd77 it ran D n-tiles ahead
// within the whole matrix, which at 16 n-tiles per chunk fetched a quarter of
// the traffic for nothing). Without prefetch the k-major order ran 282 us vs
// 133 (trellis2 [768, 2048] from DRAM, one core).
#ifndef EQ_TRELLIS_GEMV_PREFETCH
#define EQ_TRELLIS_GEMV_PREFETCH 4
#endif

// StateOf: words (big-endian dwords holding each state's window) -> the 16
// states, zero above bit 16; the two TUs differ only in it.
template <int Bits, class StateOf>
void tile_gemv_bits(const TileGemvArgs& a, const StateOf& state_of) {
  constexpr int kBytes = tile_bytes(Bits);
  const RowTables& rt = row_tables(Bits);
  const GemvInput& in = *a.in;
  const __m512i mul = _mm512_set1_epi32(static_cast<int>(k1madMul));
  const __m512i add = _mm512_set1_epi32(static_cast<int>(k1madAdd));
  const int64_t tiles_per_block = in.rep_block / kTileDim;
  const int64_t stride = a.tiles_n * kBytes;
  const int64_t nts = a.nt_end - a.nt_begin;
  for (int64_t i = 0; i < nts * kTileDim; ++i) a.z[i] = 0.0f;
  // Activation blocks outer, 16-row blocks inner: each k-tile row of the
  // block is then read as one contiguous run over the call's n-tiles.
  const int64_t blocks = a.tiles_k / tiles_per_block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t kt0 = b * tiles_per_block;
    const __m512i offset = _mm512_set1_epi32(510 * in.rep_sum[b]);
    const __m512 scale = _mm512_set1_ps(in.rep_scale[b]);
    for (int64_t nt = a.nt_begin; nt < a.nt_end; ++nt) {
      const uint8_t* column = a.tiles + kt0 * stride + nt * kBytes;
      const uint8_t* ahead_column = tile_gemv_prefetch_column(a, tiles_per_block, b, nt, EQ_TRELLIS_GEMV_PREFETCH);
      __m512i acc[kTileDim];
      for (int r = 0; r < kTileDim; ++r) acc[r] = _mm512_setzero_si512();
      for (int64_t j = 0; j < tiles_per_block; ++j) {
        const uint8_t* tile = column + j * stride;
        if (ahead_column) prefetch_tile<3>(ahead_column + j * stride, kBytes);
        const __m512i xq = _mm512_loadu_si512(in.q_rep4 + (kt0 + j) * kTileDim * 4);
        auto row = [&](int g, __m128i bytes) {
          const __m512i words = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(bytes), _mm512_load_si512(rt.ctrl[g]));
          const __m512i state = state_of(words);
          const __m512i hash = _mm512_add_epi32(_mm512_mullo_epi32(state, mul), add);
          acc[g] = _mm512_dpbusd_epi32(acc[g], hash, xq);
        };
        // Row 0 wraps around: the stream's last 2 bytes, then its first 14.
        row(0, _mm_alignr_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)),
                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kBytes - 16)), 14));
#pragma GCC unroll 16
        for (int g = 1; g < kTileDim; ++g) row(g, _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + rt.offset[g])));
      }
      float* z = a.z + (nt - a.nt_begin) * kTileDim;
      const __m512i sums = _mm512_sub_epi32(sum_lanes_16(acc), offset);
      _mm512_storeu_ps(z, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, _mm512_loadu_ps(z)));
    }
  }
}

// The same for NIn (2-4) inputs against the same tiles (GemvKernel::run_rows):
// each state is decoded once and meets every input's q, so the extra inputs
// cost one vpdpbusd each. 16 accumulators = Rows tile rows x NIn inputs per
// pass over the tile (Rows = 8 for 2 inputs, 4 for 3-4). Integer sums and
// their fp32 combination (one fma per block, row and input, in block order)
// equal the single-input loop's, so every input gets run()'s bits.
template <int Bits, int NIn, class StateOf>
void tile_gemv_multi_bits(const TileGemvArgs* args, const StateOf& state_of) {
  static_assert(NIn >= 2 && NIn <= 4);
  constexpr int kRows = NIn == 2 ? 8 : 4;
  constexpr int kBytes = tile_bytes(Bits);
  const RowTables& rt = row_tables(Bits);
  const TileGemvArgs& a = args[0];
  const __m512i mul = _mm512_set1_epi32(static_cast<int>(k1madMul));
  const __m512i add = _mm512_set1_epi32(static_cast<int>(k1madAdd));
  const int64_t tiles_per_block = a.in->rep_block / kTileDim;
  const int64_t stride = a.tiles_n * kBytes;
  const int64_t nts = a.nt_end - a.nt_begin;
  for (int i = 0; i < NIn; ++i)
    for (int64_t j = 0; j < nts * kTileDim; ++j) args[i].z[j] = 0.0f;
  const int64_t blocks = a.tiles_k / tiles_per_block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t kt0 = b * tiles_per_block;
    for (int64_t nt = a.nt_begin; nt < a.nt_end; ++nt) {
      const uint8_t* column = a.tiles + kt0 * stride + nt * kBytes;
      const uint8_t* ahead_column = tile_gemv_prefetch_column(a, tiles_per_block, b, nt, EQ_TRELLIS_GEMV_PREFETCH);
      for (int g0 = 0; g0 < kTileDim; g0 += kRows) {
        __m512i acc[16];
        for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_si512();
        for (int64_t j = 0; j < tiles_per_block; ++j) {
          const uint8_t* tile = column + j * stride;
          if (g0 == 0 && ahead_column) prefetch_tile<3>(ahead_column + j * stride, kBytes);
          __m512i xq[NIn];
          for (int i = 0; i < NIn; ++i) xq[i] = _mm512_loadu_si512(args[i].in->q_rep4 + (kt0 + j) * kTileDim * 4);
#pragma GCC unroll 8
          for (int r = 0; r < kRows; ++r) {
            const int g = g0 + r;
            const __m128i bytes =
                g == 0 ? _mm_alignr_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)),
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kBytes - 16)), 14)
                       : _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + rt.offset[g]));
            const __m512i words = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(bytes), _mm512_load_si512(rt.ctrl[g]));
            const __m512i hash = _mm512_add_epi32(_mm512_mullo_epi32(state_of(words), mul), add);
            for (int i = 0; i < NIn; ++i) acc[r * NIn + i] = _mm512_dpbusd_epi32(acc[r * NIn + i], hash, xq[i]);
          }
        }
        alignas(64) int32_t sums[16];
        _mm512_store_si512(sums, sum_lanes_16(acc));
        for (int i = 0; i < NIn; ++i) {
          const int32_t offset = 510 * args[i].in->rep_sum[b];
          const float scale = args[i].in->rep_scale[b];
          float* z = args[i].z + (nt - a.nt_begin) * kTileDim + g0;
          for (int r = 0; r < kRows; ++r) z[r] = std::fma(static_cast<float>(sums[r * NIn + i] - offset), scale, z[r]);
        }
      }
    }
  }
}

}  // namespace

}  // namespace eq::quant::trellis
