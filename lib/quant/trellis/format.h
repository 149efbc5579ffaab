// The trellis formats "trellis2", "trellis3", "trellis4" (docs/formats.md):
// QTIP-style trellis-coded quantization, L = 16-bit bitshift trellis, 1MAD
// code, 16x16 tiles of 256*K bits, random Hadamard incoherence processing with
// sign vectors su/sv, one fp32 scale per output row.
#pragma once

#include <cstdint>

#include "quant/format.h"
#include "quant/rotated_basis.h"
#include "quant/trellis/codebook.h"

namespace eq::quant {

// The row for bits in {2, 3, 4} and a code ("trellis3", "trellis3_lut"; the
// registry's own copy when registered); throws eq::Error otherwise.
const FormatTraits& trellis_format(int bits, trellis::Code code = trellis::Code::k1mad);
// A fresh row, for the registry table (lib/quant/registry.cpp).
FormatTraits trellis_row(int bits, trellis::Code code = trellis::Code::k1mad);

}  // namespace eq::quant

namespace eq::quant::trellis {

// splitmix64 streams of the sign vectors (ASCII "su" / "sv").
inline constexpr uint64_t kSuStream = 0x7375;
inline constexpr uint64_t kSvStream = 0x7376;

// Row scale before the least-squares refit, as a multiple of the row's RMS in
// the rotated basis (tuned per K on N(0,1) data; docs/formats.md).
double initial_scale_ratio(int bits);

// Searches `count` tiles at once: targets and weights [count][256] in tile
// sequence order, the chosen states [count][256] out, exactly as
// Viterbi::run_tail_biting with L = 16 and K = bits over `codes` (the GPU's
// cuda::search_tiles).
using TileBatchSearch = void (*)(int bits, const float* codes, int64_t count, const float* target,
                                 const float* weight, uint16_t* states);

// The steps behind the registry rows (bits = K), exposed for tests and benches.
// With `batch`, the tile searches go to it in batches (the GPU); everything
// else, and so the result, is the same.
QuantizedMatrix quantize_matrix(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options,
                                int bits, double scale_ratio, Code code = Code::k1mad,
                                TileBatchSearch batch = nullptr);
// The code of a packed trellis matrix (from its format's name; 1MAD without one).
// The code of a trellis row, and of the matrix's row (1MAD without one).
Code code_of(const FormatTraits& f);
Code code_of(const PackedMatrix& m);
void dequantize_matrix(const PackedMatrix& m, int bits, float* out);
// FormatTraits::dequantize_block: boundaries at multiples of the Hadamard block sizes.
void dequantize_block_matrix(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             float* out);
// W'[r0:r1, c0:c1] of W = diag(sv) H W' H diag(su) (the decoded tiles, row
// scales applied, no rotation or signs) as 16-row panels (the layout of
// FormatTraits::dequantize_block); boundaries at multiples of 16. For kernels
// that rotate the activations instead of the weights (lib/exec/batch_mlp.cpp).
void decode_rotated_panels(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           float* out);
// The same block as int8 panel codes (quant/int8_panels.h layout, nk = c1 - c0
// bytes x 16 per panel): code = trellis_int8_code(y) + 128, no
// row scales (Kernels::decode_tile_int8).
void decode_rotated_int8_panels(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                uint8_t* codes);
// The trellis rows' FormatTraits::rotated (rotated.cpp).
extern const RotatedBasis kRotatedBasis;
// The per-row scales of W' (the "scales" part, float32 [rows]).
const float* row_scales(const PackedMatrix& m, int bits);
void matmul_matrix(const PackedMatrix& m, int bits, const float* x, int64_t m_rows, float* y, bool accumulate);

}  // namespace eq::quant::trellis
