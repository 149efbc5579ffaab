// AVX-512 VBMI kernels of the LUT-code trellis formats (trellis{2,3,4}_lut,
// docs/formats.md): the decode (gemv) inner loop and the batch path's int8
// tile decoder. Only this file (and the other *_vbmi.cpp) is compiled for
// VBMI; the callers check cpu_has_avx512_vbmi() first.
//
// One tile = 4 vectors of 64 weights (t = 64v + i, i.e. tile rows 4v..4v+3).
// Byte i of vector v holds y(state_t) + 128 as an unsigned byte, built by:
//  1. qword g = 8v + i/8 gets the 8 stream bytes [gK - 2, gK + 6) (modulo the
//     tile: the tail-biting wrap) in reversed order, so the qword is the
//     stream read most significant bit first and state_t =
//     (Q >> (48 - (j + 1) K)) & 0xFFFF for t = 8g + j. K = 2: one vpermb of
//     the 64-byte tile. K = 3, 4: vectors 1-3 need at most 36 consecutive
//     bytes, so a masked 64-byte load at their first byte and one vpermb;
//     vector 0 (the wrap) one vpermi2b of the tile's first and last 64 bytes.
//  2. a = (s ^ s >> 10) & 63 for all 8 states of a qword at once:
//     Q ^ (Q >> 10) (vpsrlq, vpxorq), then one vpmultishiftqb picks each
//     byte's field; bits 6-7 of a field are garbage, which vpermb ignores.
//  3. (A + 128)[a] by vpermb; b = that byte ^ (s >> 6) (the + 128 changes
//     bit 7 only, ignored): a second vpmultishiftqb, vpxorq.
//  4. y + 128 = (A + 128)[a] + B[b]: vpermb, vpaddb (wraps mod 256: exact,
//     y + 128 is in [22, 234]).
// Per 64 weights: 5 port-5 uops (K = 2; 5.25 for K = 3, 4), 5 on either
// port, and one vpdpbusd against the 16 activation bytes of the k-tile
// repeated 4x. Tables of 64 entries on purpose: a 128-entry lookup
// (vpermi2b) occupies port 5 for two cycles on this core family
// (docs/benchmarks.md, "Port throughput").
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC target("avx512vbmi")
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, as in trellis_gemv.cpp
#endif
#include <immintrin.h>

#include <array>

#include "quant/trellis/codebook.h"
#include "quant/trellis/gemv.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

namespace {

// The per-K constants of steps 1-3.
struct LutControls {
  alignas(64) uint8_t gather[4][64];  // step 1 index of each vector
  uint64_t load_mask[4] = {};         // step 1 (K = 3, 4): bytes of the load inside the tile
  int load_offset[4] = {};            // step 1 (K = 3, 4): first byte of vector v's load
  alignas(64) uint8_t field_a[64];    // step 2: 48 - (j + 1) K for byte j of every qword
  alignas(64) uint8_t field_b[64];    // step 3: the same + 6 (the field s >> 6)
};

template <int Bits>
const LutControls& lut_controls() {
  static const LutControls c = [] {
    LutControls t{};
    constexpr int tb = tile_bytes(Bits);
    for (int v = 0; v < 4; ++v) {
      t.load_offset[v] = 8 * v * Bits - 2;
      for (int i = 0; i < 64; ++i)
        if (t.load_offset[v] + i < tb) t.load_mask[v] |= uint64_t{1} << i;
      for (int i = 0; i < 64; ++i) {
        const int g = 8 * v + i / 8, j = i % 8;
        const int a = ((g * Bits - 2 + 7 - j) % tb + tb) % tb;  // stream byte of qword byte j
        if (Bits == 2)
          t.gather[v][i] = static_cast<uint8_t>(a);
        else if (v == 0)  // vpermi2b of bytes [0, 64) and [tb - 64, tb)
          t.gather[v][i] = static_cast<uint8_t>(a < 64 ? a : 64 + a - (tb - 64));
        else  // vpermb of the load at load_offset[v]
          t.gather[v][i] = static_cast<uint8_t>(g * Bits - 2 + 7 - j - t.load_offset[v]);
      }
    }
    for (int i = 0; i < 64; ++i) {
      t.field_a[i] = static_cast<uint8_t>(48 - (i % 8 + 1) * Bits);
      t.field_b[i] = static_cast<uint8_t>(t.field_a[i] + 6);
    }
    return t;
  }();
  return c;
}

template <int Bits>
struct LutDecoder {
  const LutControls& c = lut_controls<Bits>();
  __m512i gather[4], field_a, field_b, a_table, b_table;

  LutDecoder() {
    for (int v = 0; v < 4; ++v) gather[v] = _mm512_load_si512(c.gather[v]);
    field_a = _mm512_load_si512(c.field_a);
    field_b = _mm512_load_si512(c.field_b);
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    a_table = _mm512_add_epi8(_mm512_loadu_si512(kLutA), bias);  // A + 128
    b_table = _mm512_loadu_si512(kLutB);
  }

  // Step 1: the reversed 8-byte windows of vector v.
  inline __m512i windows(const uint8_t* tile, int v) const {
    if constexpr (Bits == 2) return _mm512_permutexvar_epi8(gather[v], _mm512_loadu_si512(tile));
    if (v == 0)
      return _mm512_permutex2var_epi8(_mm512_loadu_si512(tile), gather[0],
                                      _mm512_loadu_si512(tile + tile_bytes(Bits) - 64));
    return _mm512_permutexvar_epi8(gather[v], _mm512_maskz_loadu_epi8(c.load_mask[v], tile + c.load_offset[v]));
  }

  // u[v] byte i = y(state_{64v + i}) + 128.
  inline void decode(const uint8_t* tile, __m512i* u) const {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i q = windows(tile, v);
      const __m512i ia = _mm512_multishift_epi64_epi8(field_a, _mm512_xor_si512(q, _mm512_srli_epi64(q, 10)));
      const __m512i av = _mm512_permutexvar_epi8(ia, a_table);  // A[a] + 128
      const __m512i ib = _mm512_xor_si512(av, _mm512_multishift_epi64_epi8(field_b, q));
      u[v] = _mm512_add_epi8(av, _mm512_permutexvar_epi8(ib, b_table));
    }
  }
};

// Iterations (16-row block x activation block) ahead to prefetch, along the
// call's own walk (tile_gemv_prefetch_column), into L2 (_MM_HINT_T1).
// qwen3-30b-a3b M = 1 layer, trellis2_lut: distance 4 / 6 / 8 with T1 0.66 /
// 0.68 / 0.68 ms, T0 0.68 ms, NTA 0.83 ms; distance 4 / 8 / 16 with T0 0.70 /
// 0.74 / 0.77 ms. Prefetching D n-tiles ahead within the whole matrix instead
// (the 1MAD loop's old walk) ran 0.90 / 1.07 / 1.27 ms: at 16 n-tiles per
// chunk it fetched other chunks' rows for nothing.
#ifndef EQ_TRELLIS_LUT_PREFETCH
#define EQ_TRELLIS_LUT_PREFETCH 4
#endif

// NIn (1-4) inputs against the same tiles and rows (GemvKernel::run_rows):
// each tile is decoded once and meets every input's q, so an extra input
// costs one vpdpbusd per 64 weights. Input i's sums and their fp32
// combination are exactly what the one-input call computes.
template <int Bits, int NIn>
void lut_gemv_bits(const TileGemvArgs* args) {
  constexpr int kBytes = tile_bytes(Bits);
  const LutDecoder<Bits> dec;
  const TileGemvArgs& a = args[0];
  const int64_t tiles_per_block = a.in->rep_block / kTileDim;
  const int64_t stride = a.tiles_n * kBytes;
  const int64_t nts = a.nt_end - a.nt_begin;
  // Row r of the 16 sums comes from lane 4 (r % 4) + r / 4 (below).
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int i = 0; i < NIn; ++i)
    for (int64_t r = 0; r < nts * kTileDim; ++r) args[i].z[r] = 0.0f;
  const int64_t blocks = a.tiles_k / tiles_per_block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t kt0 = b * tiles_per_block;
    for (int64_t nt = a.nt_begin; nt < a.nt_end; ++nt) {
      const uint8_t* column = a.tiles + kt0 * stride + nt * kBytes;
      const uint8_t* ahead_column = tile_gemv_prefetch_column(a, tiles_per_block, b, nt, EQ_TRELLIS_LUT_PREFETCH);
      // acc[i][v] 128-bit lane L: 4 partial sums of input i, tile row 4v + L.
      __m512i acc[NIn][4];
      for (int i = 0; i < NIn; ++i)
        for (int v = 0; v < 4; ++v) acc[i][v] = _mm512_setzero_si512();
      for (int64_t j = 0; j < tiles_per_block; ++j) {
        const uint8_t* tile = column + j * stride;
        if (ahead_column) prefetch_tile<2>(ahead_column + j * stride, kBytes);
        __m512i u[4];
        dec.decode(tile, u);
        for (int i = 0; i < NIn; ++i) {
          const __m512i xq = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(args[i].in->q + (kt0 + j) * kTileDim)));
          for (int v = 0; v < 4; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], u[v], xq);
        }
      }
      for (int i = 0; i < NIn; ++i) {
        // Per 128-bit lane L: [sum acc0, sum acc1, sum acc2, sum acc3] = rows L, 4 + L, 8 + L, 12 + L.
        const __m512i* c = acc[i];
        const __m512i x0 = _mm512_add_epi32(_mm512_unpacklo_epi32(c[0], c[1]), _mm512_unpackhi_epi32(c[0], c[1]));
        const __m512i x1 = _mm512_add_epi32(_mm512_unpacklo_epi32(c[2], c[3]), _mm512_unpackhi_epi32(c[2], c[3]));
        const __m512i y = _mm512_add_epi32(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));
        const __m512i sums =
            _mm512_sub_epi32(_mm512_permutexvar_epi32(order, y), _mm512_set1_epi32(128 * args[i].in->rep_sum[b]));
        float* z = args[i].z + (nt - a.nt_begin) * kTileDim;
        _mm512_storeu_ps(z, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(args[i].in->rep_scale[b]),
                                            _mm512_loadu_ps(z)));
      }
    }
  }
}

template <int Bits>
void lut_int8_bits(const uint8_t* tile, uint8_t* out) {
  static const LutDecoder<Bits> dec;
  __m512i u[4];
  dec.decode(tile, u);
  // Vector v lane L dword d (row 4v + L, columns 4d..4d+3) goes to output
  // vector d, dword 4v + L: a dword transpose within each vector, then a 4 x 4
  // transpose of 128-bit lanes across the vectors.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  __m512i t[4];
  for (int v = 0; v < 4; ++v) t[v] = _mm512_permutexvar_epi32(order, u[v]);
  const __m512i s0 = _mm512_shuffle_i64x2(t[0], t[1], 0x44), s1 = _mm512_shuffle_i64x2(t[0], t[1], 0xEE);
  const __m512i s2 = _mm512_shuffle_i64x2(t[2], t[3], 0x44), s3 = _mm512_shuffle_i64x2(t[2], t[3], 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i64x2(s0, s2, 0x88));
  _mm512_storeu_si512(out + 64, _mm512_shuffle_i64x2(s0, s2, 0xDD));
  _mm512_storeu_si512(out + 128, _mm512_shuffle_i64x2(s1, s3, 0x88));
  _mm512_storeu_si512(out + 192, _mm512_shuffle_i64x2(s1, s3, 0xDD));
}

// Row-major floats: vector v's 128-bit lane L is tile row 4v + L.
template <int Bits>
void lut_rows_bits(const uint8_t* tile, const float* row_factor, float* out, int64_t out_stride) {
  static const LutDecoder<Bits> dec;
  __m512i u[4];
  dec.decode(tile, u);
  const __m512i bias = _mm512_set1_epi32(128);
  // The lane index of vextracti32x4 must be a constant (clang enforces it).
  auto row = [&](int r, __m128i bytes) {
    const __m512i y = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), bias);
    _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(_mm512_cvtepi32_ps(y), _mm512_set1_ps(row_factor[r])));
  };
  for (int v = 0; v < 4; ++v) {
    row(4 * v + 0, _mm512_extracti32x4_epi32(u[v], 0));
    row(4 * v + 1, _mm512_extracti32x4_epi32(u[v], 1));
    row(4 * v + 2, _mm512_extracti32x4_epi32(u[v], 2));
    row(4 * v + 3, _mm512_extracti32x4_epi32(u[v], 3));
  }
}

// Panel floats out[c * 16 + r]: the int8 panel layout (lut_int8_bits), then
// per group of 4 columns one vpermb into column-major order.
template <int Bits>
void lut_panel_bits(const uint8_t* tile, const float* row_factor, float* out) {
  alignas(64) uint8_t codes[kTileSize];
  lut_int8_bits<Bits>(tile, codes);
  alignas(64) static const auto index = [] {
    std::array<uint8_t, 64> t{};
    for (int cc = 0; cc < 4; ++cc)
      for (int r = 0; r < 16; ++r) t[cc * 16 + r] = static_cast<uint8_t>(r * 4 + cc);
    return t;
  }();
  const __m512i columns = _mm512_loadu_si512(index.data());
  const __m512i bias = _mm512_set1_epi32(128);
  const __m512 factor = _mm512_loadu_ps(row_factor);
  auto column = [&](int c, __m128i bytes) {  // constant lane indices below, as in lut_rows_bits
    const __m512i y = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), bias);
    _mm512_storeu_ps(out + c * 16, _mm512_mul_ps(_mm512_cvtepi32_ps(y), factor));
  };
  for (int w = 0; w < 4; ++w) {
    const __m512i col = _mm512_permutexvar_epi8(columns, _mm512_load_si512(codes + 64 * w));
    column(4 * w + 0, _mm512_extracti32x4_epi32(col, 0));
    column(4 * w + 1, _mm512_extracti32x4_epi32(col, 1));
    column(4 * w + 2, _mm512_extracti32x4_epi32(col, 2));
    column(4 * w + 3, _mm512_extracti32x4_epi32(col, 3));
  }
}

template <int Bits>
void lut_gemv_inputs(const TileGemvArgs* args, int n) {
  switch (n) {
    case 1: return lut_gemv_bits<Bits, 1>(args);
    case 2: return lut_gemv_bits<Bits, 2>(args);
    case 3: return lut_gemv_bits<Bits, 3>(args);
    default: return lut_gemv_bits<Bits, 4>(args);
  }
}

}  // namespace

void tile_gemv_lut_avx512_vbmi_rows(const TileGemvArgs* args, int n) {
  switch (args[0].bits) {
    case 2: return lut_gemv_inputs<2>(args, n);
    case 3: return lut_gemv_inputs<3>(args, n);
    default: return lut_gemv_inputs<4>(args, n);
  }
}

void tile_gemv_lut_avx512_vbmi(const TileGemvArgs& a) { tile_gemv_lut_avx512_vbmi_rows(&a, 1); }

void decode_tile_lut_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride) {
  switch (K) {
    case 2: return lut_rows_bits<2>(tile, row_factor, out, out_stride);
    case 3: return lut_rows_bits<3>(tile, row_factor, out, out_stride);
    default: return lut_rows_bits<4>(tile, row_factor, out, out_stride);
  }
}

void decode_tile_panel_lut_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out) {
  switch (K) {
    case 2: return lut_panel_bits<2>(tile, row_factor, out);
    case 3: return lut_panel_bits<3>(tile, row_factor, out);
    default: return lut_panel_bits<4>(tile, row_factor, out);
  }
}

void decode_tile_int8_lut_avx512_vbmi(const uint8_t* tile, int K, uint8_t* out) {
  switch (K) {
    case 2: return lut_int8_bits<2>(tile, out);
    case 3: return lut_int8_bits<3>(tile, out);
    default: return lut_int8_bits<4>(tile, out);
  }
}

}  // namespace eq::quant::trellis

#if defined(__clang__)
#pragma clang attribute pop
#endif
