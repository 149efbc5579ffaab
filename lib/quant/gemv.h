// Decode (few tokens) matrix-vector products, one per format: y[n] for n in
// [row_begin, row_end) = sum_k W[n, k] * x[k], with x prepared once per call
// (GemvActivation) and shared by every matrix that reads it. Formats point to
// their kernel from FormatTraits::gemv; the executor's decode MLP
// (lib/exec/decode_mlp.cpp) only ever calls through that pointer.
//
// Most formats multiply integer codes by x quantized to int8 in blocks of 32
// with an fp32 scale per block and apply their own
// scales per group; which formats use int8 and which fp32 is measured and
// written down in docs/design.md ("Decode kernels").
#pragma once

#include <cstdint>
#include <vector>

#include "quant/format.h"

namespace eq::quant {

inline constexpr int kGemvBlock = 32;  // x elements per int8 block (one fp32 scale)
inline constexpr int kGemvPad = 64;    // prepared arrays are zero-padded to this many elements
inline constexpr int kMaxGemvRows = 4; // inputs per GemvKernel::run_rows call (the small-batch variant)

// A prepared activation row; all arrays hold padded_cols = cols rounded up to
// kGemvPad elements (zeros past cols).
struct GemvInput {
  int64_t cols = 0;
  int64_t padded_cols = 0;
  const float* x = nullptr;          // the fp32 row itself
  const int8_t* q = nullptr;         // round(x / scale[k / 32]), natural order
  const float* q_scale = nullptr;    // [padded/32] max|x| / 127 of each block
  const int32_t* q_sum16 = nullptr;  // [padded/16] sum of q over each 16
  // [padded/16] sum of the int8 x over each 16, q_scale * q_sum (affine
  // biases: the bias and code terms must see the same x, or the rounding of
  // x no longer cancels around the zero point; measured 3% vs 0.7% error).
  const float* x_sum16 = nullptr;
  const int32_t* q_sum4 = nullptr;   // [padded/4] sum of q over each 4 (one dword lane)
  const float* lane_scale = nullptr; // [padded/4] q_scale of the block holding each dword lane
  // q reordered for the column bit-stream formats, so that the codes a
  // shift-and-mask pulls out of one 32-bit word meet their x in one dword:
  const int8_t* q_nib = nullptr;     // 4-bit: per 8 k: k0 k2 k4 k6 | k1 k3 k5 k7
  const int8_t* q_crumb = nullptr;   // 2-bit: per 16 k: k0 k4 k8 k12 | k1 k5 k9 k13 | ...
  // Set by GemvActivation::set_replicated only (then the arrays above are
  // null except x, and q, which holds the same q[k] once each, for codes of
  // one byte per weight: trellis LUT): int8 blocks of rep_block elements,
  // each q[k] repeated in the 4 bytes of dword k, for kernels whose weight
  // code is a sum of 4 unsigned bytes (trellis 1MAD): one vpdpbusd lane is
  // then code * q[k].
  int64_t rep_block = 0;
  const int8_t* q_rep4 = nullptr;     // [padded * 4]
  const float* rep_scale = nullptr;   // [padded / rep_block] max|x| / 127 of each block
  const int32_t* rep_sum = nullptr;   // [padded / rep_block] sum of q over each block
};

// Owns the arrays of a GemvInput; reuse one per thread to avoid allocations.
class GemvActivation {
 public:
  // Quantizes x[cols]. The result depends only on x (never on the ISA).
  void set(const float* x, int64_t cols);
  // Quantizes x[cols] in int8 blocks of `block` elements (a multiple of 16
  // dividing cols) into GemvInput::q and, when `replicate` (the 1MAD kernels
  // read it), the replicated layout GemvInput::q_rep4 (null otherwise), with
  // the same rounding as set(). Depends only on x.
  void set_replicated(const float* x, int64_t cols, int64_t block, bool replicate = true);
  const GemvInput& input() const { return in_; }

 private:
  GemvInput in_;
  std::vector<float> x_, q_scale_, x_sum16_, lane_scale_;
  std::vector<int8_t> q_, q_nib_, q_crumb_, q_once_;
  std::vector<int32_t> q_sum16_, q_sum4_;
};

// The decode kernel of a format (FormatTraits::gemv).
struct GemvKernel {
  // Writes y[n - row_begin] for n in [row_begin, row_end); row_begin must be
  // a multiple of row_align, row_end one too or the last row. Single-threaded
  // (the caller splits rows).
  void (*run)(const PackedMatrix& m, const GemvInput& x, int64_t row_begin, int64_t row_end, float* y) = nullptr;
  int64_t row_align = 16;
  // Rows per call that read memory efficiently: the column bit-stream layout
  // stores one word row of all N columns contiguously, so a call over few
  // columns reads many short strided runs that the hardware prefetchers and
  // the TLB handle badly (measured: 64 columns 5 GB/s, 768 columns 18 GB/s
  // on one core); row-major formats read whole rows and need few.
  int64_t preferred_rows = 64;
  bool int8_activation = true;  // documentation and benchmarks: int8 dot products or fp32
  // Optional: a kernel that reads x in its own basis or layout (trellis:
  // H_K(su o x), replicated int8) builds it here, once per (x row, matrix);
  // the caller then passes out.input() to run() for every row range of that
  // matrix. Null: run() reads GemvActivation::set(x), shared by all matrices.
  void (*prepare)(const PackedMatrix& m, const float* x, GemvActivation& out) = nullptr;
  // Optional, the small-batch variant (up to 4 rows of one expert per weight
  // pass; docs/design.md, "Kernel selection by M: decode, small-batch,
  // batch"): n <=
  // kMaxGemvRows inputs against the same rows, each weight read and unpacked
  // once for all of them. ys[i] gets exactly the bits run() writes for
  // xs[i], so a row's result never depends on the rows it shares a call with.
  // Null: run() once per input (gemv_run_rows).
  void (*run_rows)(const PackedMatrix& m, const GemvInput* const* xs, int n, int64_t row_begin, int64_t row_end,
                   float* const* ys) = nullptr;
};

// The input run() of `kernel` reads for x: `shared` (already set from x) when
// the kernel has no prepare hook, else `own` after kernel.prepare(m, x, own).
const GemvInput& gemv_input_for(const GemvKernel& kernel, const PackedMatrix& m, const float* x,
                                const GemvActivation& shared, GemvActivation& own);

// kernel.run_rows when the kernel has one, else kernel.run once per input.
void gemv_run_rows(const GemvKernel& kernel, const PackedMatrix& m, const GemvInput* const* xs, int n,
                   int64_t row_begin, int64_t row_end, float* const* ys);

// The kernels of the registered formats (lib/quant/gemv_stream.cpp, gemv_rowmajor.cpp).
extern const GemvKernel kStreamGemvInt8;    // fp4, mxfp4, nvfp4, nl4, affine 2/4/8 bits
extern const GemvKernel kStreamGemvFloat;   // any stream format by decoded fp32 panels (affine 3 bits)
extern const GemvKernel kInt8RowGemv;       // int8_row
extern const GemvKernel kBf16Gemv;          // bf16 (fp32 path)
// trellis2/3/4 (lib/quant/trellis/gemv.cpp): prepare rotates x into the tiles'
// basis, x~ = H_K (su o x), int8 per Hadamard block (<= 128) replicated 4x;
// run sums (y(s) + 510) * q[k] per block with one u8 x s8 dot per weight
// (the 4 bytes of the 1MAD hash), subtracts 510 * sum(q), scales in fp32 and
// rotates its own output rows back (row_align 128 covers every Hadamard
// block of N). docs/formats.md, trellis, "Decode matmul".
// The same kernel serves trellis{2,3,4}_lut: the inner loop follows the
// matrix's format (TileGemvArgs::code), bias 128 in place of 510.
extern const GemvKernel kTrellisGemv;


}  // namespace eq::quant
