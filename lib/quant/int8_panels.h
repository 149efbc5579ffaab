// Integer weight panels for the batch expert MLP's VNNI path
// (FormatTraits::int8_panels, lib/exec/int8_panel_gemm.h): a block
// W[r0:r1, c0:c1] as unsigned byte codes laid out for vpdpbusd (u8 x s8, 4 k
// per dword lane, 16 output rows per zmm), with one fp32 scale (and, for
// affine formats, one bias) per (row, unit of 32 k):
//
//   W[r, k] = (code(r, k) - offset) * scale[r, u] (+ bias[r, u]),  u = (k - c0) / 32
//
// Layout, for panel p = (r - r0) / 16, j = (r - r0) % 16, nk = c1 - c0:
//   codes [p][(k - c0) / 4][j][slot % 4]   (p * nk * 16 bytes per panel)
//   scales, biases [p][u][j]              (p * nk / 32 * 16 floats per panel)
// where slot = the position of k inside its unit in the format's k order: the
// shift-and-mask that pulls codes out of a bit-stream word leaves them
// interleaved (Int8KOrder); the activations are stored in the same order, so
// dot products and per-unit sums are unchanged. Rows past r1 in the last
// panel have code = offset and scale = bias = 0.
//
// Codes are the weights' own integers made non-negative (table codes: their
// StreamCodes::int8_bytes, e.g. E2M1 2 * value + 12 in [0, 24] with the scale
// halved; affine: the code; int8_row: q + 128), so the product with the int8
// activation never saturates.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "quant/format.h"

namespace eq::quant {

inline constexpr int kInt8Unit = 32;  // k per int32 sum and per scale

// Order of the k inside each unit (the activations must use the same one).
enum class Int8KOrder : uint8_t {
  kNatural,  // k0 k1 k2 ...
  kNibble,   // per 8 k: k0 k2 k4 k6 | k1 k3 k5 k7   (4-bit stream words)
  kCrumb,    // per 16 k: k0 k4 k8 k12 | k1 k5 k9 k13 | k2 .. | k3 ..   (2-bit stream words)
};

// The slot of natural index k (0 <= k < 32) inside a unit stored in `order`.
inline int int8_slot(Int8KOrder order, int k) {
  switch (order) {
    case Int8KOrder::kNibble: return (k & ~7) + 4 * (k & 1) + ((k & 7) >> 1);
    case Int8KOrder::kCrumb: return (k & ~15) + 4 * (k & 3) + ((k & 15) >> 2);
    default: return k;
  }
}

struct Int8Panels {
  // Writes the block (layout above). Rows: r0 a multiple of 16, r1 any end;
  // columns: c0 and c1 multiples of 32 (and of the format's group). Throws
  // eq::Error otherwise. Uses the active ISA's kernels; the result is the
  // same on every ISA. next_r0 >= 0: the block of m at (next_r0, next_c0)
  // comes next (same shape, or a shorter last one); its codes are
  // prefetched into L2 while this block is read, so they arrive during the
  // caller's GEMM on this one (a hint: no effect on the result).
  void (*build)(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* codes,
                float* scales, float* biases, int64_t next_r0, int64_t next_c0) = nullptr;
  // Requests into L2 the source bytes build() will read for the block
  // [r0, r1) x [c0, c1): part `slice` of `slices` equal parts, so a caller
  // can spread the requests over its GEMM on the current block instead of
  // issuing them in one burst (a hint: no effect on any result).
  void (*prefetch)(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int slice,
                   int slices) = nullptr;
  int offset = 0;           // code of a zero weight (before the bias)
  bool has_biases = false;  // affine: biases are written and must be applied
  Int8KOrder order = Int8KOrder::kNatural;
};

// The panel builders of the registered formats (lib/quant/int8_panels.cpp).
extern const Int8Panels kFp4Int8Panels;     // fp4 (group a multiple of 32), mxfp4
extern const Int8Panels kOffset128Table4Int8Panels;  // 4-bit table codes whose zero byte is 128 (nl4)
extern const Int8Panels kAffine2Int8Panels;  // affine 2 bits
extern const Int8Panels kAffine4Int8Panels;  // affine 4 bits
extern const Int8Panels kAffine8Int8Panels;  // affine 8 bits
extern const Int8Panels kInt8RowInt8Panels;  // int8_row

// Per-ISA code kernels behind build (the generic ones are the definition).
struct Int8PanelKernels {
  // `panels` 16-column panels of a bit-stream matrix (packed_stream.h),
  // k_count (a multiple of 32) consecutive k from word row 0 of `qweight` (ld
  // words between word rows; panel p at column 16 p): panel p's
  // out[p * out_stride + (k / 4) * 64 + j * 4 + k % 4] in the k order of
  // `bits` (8: natural, 4: nibble, 2: crumb); with a table (16 bytes, 4-bit
  // codes) code c becomes table[c], else the code itself.
  // prefetch: words from each word read to the same word of the next block
  // (0 = none; a hint, addresses are never dereferenced).
  void (*stream_codes)(const uint32_t* qweight, int64_t ld, int64_t k_count, int bits, const uint8_t* table,
                       int64_t panels, uint8_t* out, int64_t out_stride, int64_t prefetch) = nullptr;
  // Up to 16 int8 rows (row-major, ld bytes apart), k_count (a multiple of 4)
  // k: out[k / 4][16][4] = q + 128, rows >= nrows = 128. prefetch: bytes to
  // the next block's same byte (0 = none).
  void (*row_codes)(const int8_t* w, int64_t ld, int64_t nrows, int64_t k_count, uint8_t* out,
                    int64_t prefetch) = nullptr;
};
// A trellis code y (|y| <= 510) as int8: y * 8160 / 2^15 rounded half up,
// in [-127, 127] — vpmulhrsw's arithmetic on a 16-bit lane (one instruction
// per 16 codes), about y * 127 / 510.
inline constexpr int kTrellisInt8Mul = 8160;
inline constexpr int trellis_int8_code(int y) { return (y * kTrellisInt8Mul + (1 << 14)) >> 15; }
// The weight of one int8 step in units of y.
inline constexpr float kTrellisInt8Unscale = 32768.0f / kTrellisInt8Mul;
const Int8PanelKernels& int8_panel_kernels(Isa isa);

namespace kernels {
void int8_stream_codes_generic(const uint32_t*, int64_t, int64_t, int, const uint8_t*, int64_t, uint8_t*, int64_t,
                               int64_t);
void int8_row_codes_generic(const int8_t*, int64_t, int64_t, int64_t, uint8_t*, int64_t);
void int8_stream_codes_avx512(const uint32_t*, int64_t, int64_t, int, const uint8_t*, int64_t, uint8_t*, int64_t,
                              int64_t);
void int8_row_codes_avx512(const int8_t*, int64_t, int64_t, int64_t, uint8_t*, int64_t);
// Float panels [p][k][16] (pstride floats apart) of trellis codes y
// (exact integers, |y| <= 510), k_count a multiple of 4:
// out[p * out_stride + (k / 4) * 64 + j * 4 + k % 4] = trellis_int8_code(y) + 128,
// in [1, 255]: the trellis formats' int8 batch path (batch_mlp.cpp),
// weight = (code - 128) * kTrellisInt8Unscale * row scale.
// Used by the trellis tile decoders (Kernels::decode_tile_int8) without a direct int8 path.
void int8_trellis_codes_generic(const float* panels, int64_t np, int64_t pstride, int64_t k_count, uint8_t* out,
                                int64_t out_stride);
void int8_trellis_codes_avx512(const float* panels, int64_t np, int64_t pstride, int64_t k_count, uint8_t* out,
                               int64_t out_stride);
}  // namespace kernels

}  // namespace eq::quant
