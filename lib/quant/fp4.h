// FP4 (E2M1) formats: fp4_gG (fp16 scale per group of G along K), mxfp4 (OCP MX: group 32, E8M0 scale) and nvfp4 (group 16, E4M3 scale
// times an fp32 tensor scale). Layouts: docs/formats.md; registry rows:
// registry.cpp. Dequantize/matmul are the column bit-stream drivers
// (packed_stream.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "quant/format.h"

namespace eq::quant {

// The registry row fp4_gG: E2M1 codes, an fp16 scale per group of G along K
// (G a multiple of 8: one 32-bit word holds 8 codes). The kernels' own
// preconditions are the row's: int8 panels only for G a multiple of 32.
FormatTraits fp4_row(int G, std::string_view name, std::string_view description);

// fp4_gG: qweight U32 [K/8, N], scales F16 [K/G, N].
QuantizedMatrix quantize_fp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options);
std::vector<PartSpec> fp4_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

// mxfp4: qweight U32 [K/8, N], scales F8_E8M0 [K/32, N]. The scale exponent is
// the best of floor(log2 amax) - 2 and its two neighbours (weighted error).
QuantizedMatrix quantize_mxfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
// The OCP MX v1.0 rule alone (exponent floor(log2 amax) - 2), for comparison in bench/quant_error.
QuantizedMatrix quantize_mxfp4_floor_rule(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options);
std::vector<PartSpec> mxfp4_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);
// FormatTraits::import_mxfp4 of the mxfp4 row: release-layout blocks and scales
// rearranged into qweight and scales, codes and scale bytes unchanged.
QuantizedMatrix import_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t cols,
                             std::string_view tensor_name);

// nvfp4: qweight U32 [K/8, N], scales F8_E4M3 [K/16, N], tensor_scale F32 [1].
QuantizedMatrix quantize_nvfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
std::vector<PartSpec> nvfp4_part_specs(const FormatTraits& format, int64_t rows, int64_t cols);

}  // namespace eq::quant
