// The per-ISA decode (gemv) kernels behind lib/quant/gemv.h, as a table of
// function pointers filled from lib/quant/kernels/generic and overridden by
// the avx2/avx512 folders. The generic versions are the scalar definitions
// the SIMD ones are tested against.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "quant/gemv.h"

namespace eq::quant {

// Columns [n0, n0 + nb) of a column bit-stream matrix (packed_stream.h) times
// a prepared x, with int8 dot products. Per unit of gcd(group, 32) k:
//   acc[n] += float(sum_k c'[k, n] * q[k] - offset * q_sum) * (scale[g, n] * scale_mul * q_scale[b])
//   acc[n] += bias[g, n] * x_sum(unit)                      (affine only)
// where c' = code for unsigned codes (offset 0) and code_bytes[code] for
// table codes (offset code_offset; E2M1: 2 * value + 12, offset 12), so that
// c' is an unsigned byte and c' - offset the code's integer value.
struct StreamGemvArgs {
  const uint32_t* qweight = nullptr;  // word row 0 of column n0
  int64_t ld = 0;                     // words between word rows (= N)
  int64_t cols = 0;                   // K
  int64_t nb = 0;                     // output columns
  int bits = 4;                       // 2, 4 or 8
  int group = 32;                     // a multiple of 4 (of 16 for the SIMD kernels)
  const uint8_t* code_bytes = nullptr;  // table codes: byte by code (16 entries); null: the code itself
  int code_offset = 0;                  // byte of the zero weight
  const uint16_t* scales_f16 = nullptr;  // [K/G, ld] at column n0, or
  const uint8_t* scales_u8 = nullptr;    // one-byte scales decoded through scale_table
  const float* scale_table = nullptr;    // 256 entries (E8M0 or E4M3)
  const uint16_t* biases_f16 = nullptr;  // affine: [K/G, ld] at column n0
  float scale_mul = 1.0f;                // StreamCodes::int8_scale, times nvfp4's tensor scale
  const GemvInput* in = nullptr;
  float* y = nullptr;  // [nb], overwritten
};

struct GemvIsaKernels {
  void (*stream_int8)(const StreamGemvArgs& a) = nullptr;
  // int8_row rows: y[j] = scale[j] * sum_b q_scale[b] * sum_{k in b} w[j, k] * q[k], j < rows.
  void (*int8_rows)(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                    const GemvInput& in, float* y) = nullptr;
  // bf16 rows with fp32 x: y[j] = sum_k float(w[j, k]) * x[k], j < rows.
  void (*bf16_rows)(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y) = nullptr;

  // The small-batch variants: n <= kMaxGemvRows inputs against the same
  // weights, each weight read and unpacked once for all of them. Input i's
  // outputs ys[i] must have exactly the bits of the single-input kernel for
  // ins[i]. Null: the single-input kernel once per input.
  void (*stream_int8_multi)(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys, int n) = nullptr;
  void (*int8_rows_multi)(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                          const GemvInput* const* ins, float* const* ys, int n) = nullptr;
  void (*bf16_rows_multi)(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* const* xs,
                          float* const* ys, int n) = nullptr;
};

// The table for `isa` (clamped to what the machine supports).
const GemvIsaKernels& gemv_isa_kernels(Isa isa);
inline const GemvIsaKernels& active_gemv_kernels() { return gemv_isa_kernels(active_isa()); }

// The int8 stream kernels that run one matrix.
struct StreamGemvChoice {
  void (*run)(const StreamGemvArgs& a) = nullptr;
  // Null: run once per input.
  void (*run_multi)(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys, int n) = nullptr;
};
// The kernels kStreamGemvInt8 runs a stream format's row with: `table`'s own
// when they take the row's layout (kernels::gemv_stream_int8_takes_simd:
// bits, code table, group), else the generic kernel, so a row whose group
// the SIMD kernels do not take runs the scalar definition on every ISA. The
// only choice gemv_stream.cpp makes.
StreamGemvChoice stream_gemv_int8_for(const GemvIsaKernels& table, const FormatTraits& format);

namespace kernels {
#define EQ_DECLARE_GEMV_ISA(isa)                                                                         \
  void gemv_stream_int8_##isa(const StreamGemvArgs& a);                                                  \
  void gemv_int8_rows_##isa(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales, \
                            const GemvInput& in, float* y);                                              \
  void gemv_bf16_rows_##isa(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y);
// The layouts the AVX2 and AVX-512 stream kernels take: codes of 2, 4 or 8
// bits (4 for table codes, each byte minus the offset in [-127, 127]) in
// groups that are a multiple of 16 (int32 sums over units of 16 or 32 k).
// The generic kernel takes any group that is a multiple of 4.
bool gemv_stream_int8_takes_simd(int bits, const uint8_t* code_bytes, int code_offset, int group);
EQ_DECLARE_GEMV_ISA(generic)
EQ_DECLARE_GEMV_ISA(avx2)
EQ_DECLARE_GEMV_ISA(avx512)
#undef EQ_DECLARE_GEMV_ISA
void gemv_stream_int8_multi_avx512(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys, int n);
void gemv_int8_rows_multi_avx512(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                                 const GemvInput* const* ins, float* const* ys, int n);
void gemv_bf16_rows_multi_avx512(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* const* xs,
                                 float* const* ys, int n);
}  // namespace kernels

}  // namespace eq::quant
