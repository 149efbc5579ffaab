// Formats for critical experts and non-expert tensors, in the weight's own
// row-major [N, K] layout (docs/formats.md, "int8 / bf16 passthrough"):
//   int8_row: qweight I8 [N, K], scales F32 [N]; value = q * scale, q in [-127, 127].
//   bf16:     weight BF16 [N, K] (round to nearest even).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/format.h"

namespace eq::quant {

QuantizedMatrix quantize_int8_row(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
void dequantize_int8_row(const PackedMatrix& m, float* out);
void matmul_int8_row(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate);
void dequantize_block_int8_row(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);
std::vector<PartSpec> int8_row_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

QuantizedMatrix quantize_bf16(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
void dequantize_bf16(const PackedMatrix& m, float* out);
void matmul_bf16(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate);
void dequantize_block_bf16(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);
std::vector<PartSpec> bf16_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

}  // namespace eq::quant
