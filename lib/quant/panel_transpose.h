// Row-major float rows to the 16-row panel layout of
// FormatTraits::dequantize_block (used by the row-major formats int8_row and
// bf16): out[c * 16 + j] = rows[j * ld + c] for j < 16, c < count. A pure
// data move, so every ISA gives the same bits.
#pragma once

#include <cstdint>

namespace eq::quant {

using RowsToPanelFn = void (*)(const float* rows, int64_t ld, int64_t count, float* out);

// The kernel for eq::active_isa() now.
RowsToPanelFn active_rows_to_panel();

namespace kernels {
void rows_to_panel_generic(const float* rows, int64_t ld, int64_t count, float* out);
void rows_to_panel_avx512(const float* rows, int64_t ld, int64_t count, float* out);
}  // namespace kernels

}  // namespace eq::quant
