// Per-ISA kernels of the trellis format, chosen at run time (eq::active_isa()).
// Only pointers and sizes cross this interface. Every variant computes
// bit-identical results (same operation order, no FMA contraction), so packed
// bytes never depend on the machine that quantized.
#pragma once

#include <cstdint>

namespace eq::quant::trellis {

struct Kernels {
  // One Viterbi step of a bitshift trellis with 2^L states and K-bit symbols:
  //   next[s] = min_j prev[(s >> K) | j << (L-K)] + weight * (codes[s] - target)^2 - weight * target^2
  // (the last term is the same for every state, so it is dropped: two FMAs,
  //  fma(c, fma(c, weight, -2 * weight * target), min), in every variant),
  // ties to the smallest j. The chosen j for predecessor group r = s >> K is
  // written as K bit planes: bit r of planes[b * plane_bytes] = bit b of j,
  // plane_bytes = max(1, 2^(L-K) / 8).
  void (*viterbi_step)(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                       float target, float weight);
  // Decodes one 16x16 tile (256*K bits, docs/formats.md) with L = 16 and the
  // 1MAD code: out[r * out_stride + c] = float(y(state_{16r+c})) * row_factor[r].
  void (*decode_tile)(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
  // The same tile transposed into the 16-row panel layout of
  // FormatTraits::dequantize_block: out[c * 16 + r] (256 contiguous floats)
  // = what decode_tile writes at out[r * out_stride + c], bit for bit. The
  // batch kernel's decoder (decode_rotated_panels): no strip, no transpose pass.
  void (*decode_tile_panel)(const uint8_t* tile, int K, const float* row_factor, float* out);
  // Orthonormal block Walsh–Hadamard of every row (length dim, block size `block`).
  void (*hadamard_rows)(float* x, int64_t rows, int64_t dim, int64_t block);
  // The same along columns: blocks of `block` consecutive rows.
  void (*hadamard_columns)(float* x, int64_t rows, int64_t cols, int64_t block);
  // z[m * z_stride + r] = sum_k x[m * cols + k] * strip[r * cols + k], r < 16, m < m_rows.
  void (*strip_matmul)(const float* x, int64_t m_rows, int64_t cols, const float* strip, float* z, int64_t z_stride);
  // The tile as int8 panel codes (quant/int8_panels.h, int8_trellis_codes_*): for
  // the y that decode_tile_panel writes (row_factor 1) at panel position
  // (c, r), out[(c / 4) * 64 + r * 4 + c % 4] = trellis_int8_code(y) + 128
  // (256 bytes). The batch kernel's integer path: no float panel in between.
  void (*decode_tile_int8)(const uint8_t* tile, int K, uint8_t* out);
  // decode_tile, decode_tile_panel and decode_tile_int8 for the LUT code
  // (formats trellis{2,3,4}_lut): the same layouts, y from code_lut; the int8
  // codes are y + 128 exactly (|y| <= 106, no rescale). VBMI variants where
  // the CPU has it, the generic ones otherwise.
  void (*decode_tile_lut)(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
  void (*decode_tile_panel_lut)(const uint8_t* tile, int K, const float* row_factor, float* out);
  void (*decode_tile_int8_lut)(const uint8_t* tile, int K, uint8_t* out);
  // Steps t and t+1 at once: viterbi_step(prev -> middle, planes0, target0,
  // weight0) then viterbi_step(middle -> next, planes1, target1, weight1), bit
  // for bit, without a middle array where two_steps_fused(L, K) (the AVX-512
  // variant keeps each block of the middle step in the cache).
  void (*viterbi_two_steps)(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                            int L, int K, float target0, float weight0, float target1, float weight1);
};

// Symbols of up to this many bits have SIMD steps (larger K: the scalar one).
inline constexpr int kMaxSimdSymbolBits = 4;
// Whether viterbi_two_steps runs fused: blocks of 16 groups two steps deep.
inline constexpr bool two_steps_fused(int L, int K) { return K <= kMaxSimdSymbolBits && L - 2 * K >= 4; }

// The kernels for the active ISA (re-read on each call, so tests can force one).
const Kernels& kernels();

// Per-ISA tables (defined in lib/quant/kernels/<isa>/trellis_*.cpp).
const Kernels& generic_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

// Scalar functions, also used by the SIMD tables for shapes they do not cover.
void viterbi_step_generic(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                          float target, float weight);
void viterbi_two_steps_generic(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                               int L, int K, float target0, float weight0, float target1, float weight1);
// viterbi_two_steps as two calls of `step` through a thread-local middle array.
using ViterbiStepFn = void (*)(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                               float target, float weight);
void two_single_steps(ViterbiStepFn step, const float* prev, float* next, uint8_t* planes0, uint8_t* planes1,
                      const float* codes, int L, int K, float target0, float weight0, float target1, float weight1);
void decode_tile_generic(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
void decode_tile_panel_generic(const uint8_t* tile, int K, const float* row_factor, float* out);
void decode_tile_int8_generic(const uint8_t* tile, int K, uint8_t* out);
void decode_tile_lut_generic(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
void decode_tile_panel_lut_generic(const uint8_t* tile, int K, const float* row_factor, float* out);
void decode_tile_int8_lut_generic(const uint8_t* tile, int K, uint8_t* out);
void hadamard_rows_generic(float* x, int64_t rows, int64_t dim, int64_t block);
void hadamard_columns_generic(float* x, int64_t rows, int64_t cols, int64_t block);
void strip_matmul_generic(const float* x, int64_t m_rows, int64_t cols, const float* strip, float* z,
                          int64_t z_stride);

// The AVX-512 decoders, exposed so tests can run each on a machine that has
// both: avx512_kernels() holds the VBMI ones when the CPU has VBMI
// (cpu_has_avx512_vbmi, quant/trellis/gemv.h).
void decode_tile_avx512(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
void decode_tile_panel_avx512(const uint8_t* tile, int K, const float* row_factor, float* out);
void decode_tile_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
void decode_tile_panel_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out);
void decode_tile_int8_avx512(const uint8_t* tile, int K, uint8_t* out);
void decode_tile_int8_avx512_vbmi(const uint8_t* tile, int K, uint8_t* out);
void decode_tile_int8_lut_avx512_vbmi(const uint8_t* tile, int K, uint8_t* out);
void decode_tile_lut_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
void decode_tile_panel_lut_avx512_vbmi(const uint8_t* tile, int K, const float* row_factor, float* out);

}  // namespace eq::quant::trellis
