// The format registry: one row per format, in a stable order (CLI help,
// manifests and tests enumerate it). To add a format, write its source file(s)
// and add one row to registry_rows() below (docs/adding-a-format.md).
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/affine.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/format.h"
#include "quant/fp4.h"
#include "quant/fp4_common.h"
#include "quant/gemv.h"
#include "quant/int8_panels.h"
#include "quant/nl4.h"
#include "quant/packed_stream.h"
#include "quant/passthrough.h"
#include "quant/trellis/format.h"

namespace eq::quant {

namespace {

// clang-format off
// ============================ REGISTRY ROWS ============================
// One row per format. Names are stable identifiers (policies, manifests):
// never rename or reorder-and-reuse a name; add new ones.
std::vector<FormatTraits> registry_rows() { return {
    // ---- fp4 (E2M1) with an fp16 scale per group of G along K: lib/quant/fp4.cpp
    fp4_row(16, "fp4_g16", "FP4 E2M1, fp16 scale per 16 weights along K (5 bits)"),
    fp4_row(32, "fp4_g32", "FP4 E2M1, fp16 scale per 32 weights along K (4.5 bits)"),
    fp4_row(64, "fp4_g64", "FP4 E2M1, fp16 scale per 64 weights along K (4.25 bits)"),
    fp4_row(128, "fp4_g128", "FP4 E2M1, fp16 scale per 128 weights along K (4.125 bits)"),
    // ---- OCP MXFP4 and NVIDIA NVFP4: lib/quant/fp4_mx.cpp, lib/quant/fp4_nv.cpp
    {.name = "mxfp4", .family = "mxfp4",
     .description = "OCP MXFP4: E2M1, E8M0 power-of-two scale per 32 weights (4.25 bits)",
     .weight_bits = 4, .bits_per_weight = 4.25, .group_size = 32, .row_multiple = 1, .col_multiple = 32,
     .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}},
     .quantizer = quantize_mxfp4, .dequantize = stream_dequantize, .matmul = stream_matmul,
     .part_specs_of = mxfp4_part_specs, .gemv = &kStreamGemvInt8, .stream = &kMxfp4Stream,
     .dequantize_block = stream_dequantize_block, .int8_panels = &kFp4Int8Panels, .import_mxfp4 = import_mxfp4,
     .device_quantizer = cuda::quantize_mxfp4, .device_gemv = &cuda::kStreamDeviceGemv, .device_gemm = &cuda::kStreamDeviceGemm},
    {.name = "nvfp4", .family = "nvfp4",
     .description = "NVFP4: E2M1, E4M3 scale per 16 weights times an fp32 tensor scale (4.5 bits)",
     .weight_bits = 4, .bits_per_weight = 4.5, .group_size = 16, .row_multiple = 1, .col_multiple = 16,
     .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}, {"tensor_scale", PartRole::kTensorScale}},
     .quantizer = quantize_nvfp4, .dequantize = stream_dequantize, .matmul = stream_matmul,
     .part_specs_of = nvfp4_part_specs, .gemv = &kStreamGemvInt8, .stream = &kNvfp4Stream,
     .dequantize_block = stream_dequantize_block, .device_quantizer = cuda::quantize_nvfp4,
     .device_gemv = &cuda::kStreamDeviceGemv, .device_gemm = &cuda::kStreamDeviceGemm},
    // ---- a fixed non-uniform 16-level grid with an fp16 scale per group of G along K: lib/quant/nl4.cpp
    nl4_row(32, "nl4_g32", "4-bit non-uniform grid (16 levels), fp16 scale per 32 weights along K (4.5 bits)"),
    // ---- affine integers q * scale + bias, fp16 scale and bias per group: lib/quant/affine.cpp
    affine_row(2, 32, "int2_g32", "2-bit affine, fp16 scale+bias per 32 weights (3 bits)"),
    affine_row(2, 64, "int2_g64", "2-bit affine, fp16 scale+bias per 64 weights (2.5 bits)"),
    affine_row(2, 128, "int2_g128", "2-bit affine, fp16 scale+bias per 128 weights (2.25 bits)"),
    affine_row(3, 32, "int3_g32", "3-bit affine, fp16 scale+bias per 32 weights (4 bits)"),
    affine_row(3, 64, "int3_g64", "3-bit affine, fp16 scale+bias per 64 weights (3.5 bits)"),
    affine_row(3, 128, "int3_g128", "3-bit affine, fp16 scale+bias per 128 weights (3.25 bits)"),
    affine_row(4, 32, "int4_g32", "4-bit affine, fp16 scale+bias per 32 weights (5 bits)"),
    affine_row(4, 64, "int4_g64", "4-bit affine, fp16 scale+bias per 64 weights (4.5 bits)"),
    affine_row(4, 128, "int4_g128", "4-bit affine, fp16 scale+bias per 128 weights (4.25 bits)"),
    affine_row(8, 32, "int8_g32", "8-bit affine, fp16 scale+bias per 32 weights (9 bits)"),
    affine_row(8, 64, "int8_g64", "8-bit affine, fp16 scale+bias per 64 weights (8.5 bits)"),
    affine_row(8, 128, "int8_g128", "8-bit affine, fp16 scale+bias per 128 weights (8.25 bits)"),
    // ---- passthrough for critical experts and non-expert tensors: lib/quant/passthrough.cpp
    {.name = "int8_row", .family = "int8",
     .description = "8-bit symmetric, fp32 scale per output row (8 bits)",
     .weight_bits = 8, .bits_per_weight = 8.0, .group_size = 0, .row_multiple = 1, .col_multiple = 1,
     .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}},
     .quantizer = quantize_int8_row, .dequantize = dequantize_int8_row, .matmul = matmul_int8_row,
     .part_specs_of = int8_row_part_specs, .gemv = &kInt8RowGemv,
     .dequantize_block = dequantize_block_int8_row, .int8_panels = &kInt8RowInt8Panels,
     .device_gemv = &cuda::kInt8RowDeviceGemv, .device_gemm = &cuda::kInt8RowDeviceGemm},
    {.name = "bf16", .family = "bf16",
     .description = "bfloat16 passthrough (16 bits)",
     .weight_bits = 16, .bits_per_weight = 16.0, .group_size = 0, .row_multiple = 1, .col_multiple = 1,
     .parts = {{"weight", PartRole::kCodes}},
     .quantizer = quantize_bf16, .dequantize = dequantize_bf16, .matmul = matmul_bf16,
     .part_specs_of = bf16_part_specs, .gemv = &kBf16Gemv,
     .dequantize_block = dequantize_block_bf16, .device_gemv = &cuda::kBf16DeviceGemv, .device_gemm = &cuda::kBf16DeviceGemm},
    // ---- trellis (QTIP-style): lib/quant/trellis*.cpp (rows added by the trellis implementation)
    trellis_row(2),
    trellis_row(3),
    trellis_row(4),
    trellis_row(2, trellis::Code::kLut),
    trellis_row(3, trellis::Code::kLut),
    trellis_row(4, trellis::Code::kLut),
    // ---- end of trellis rows
}; }
// ========================== END REGISTRY ROWS ==========================
// clang-format on

// Room for the rows tests add (add_format_for_testing): reserved up front so
// that appending never moves a row that a PackedMatrix already points at.
constexpr size_t kTestRowCapacity = 8;

std::vector<FormatTraits>& rows() {
  static std::vector<FormatTraits> all = [] {
    std::vector<FormatTraits> r = registry_rows();
    r.reserve(r.size() + kTestRowCapacity);
    return r;
  }();
  return all;
}

}  // namespace

std::span<const FormatTraits> all_formats() { return rows(); }

const FormatTraits& add_format_for_testing(FormatTraits row) {
  std::vector<FormatTraits>& all = rows();
  EQ_CHECK(find_format(row.name) == nullptr, "format '" + std::string(row.name) + "' is already registered");
  EQ_CHECK(all.size() < all.capacity(), "more than " + std::to_string(kTestRowCapacity) + " test format rows");
  all.push_back(std::move(row));
  return all.back();
}

}  // namespace eq::quant
