// The per-ISA kernels of lib/quant, as a table of function pointers filled
// from lib/quant/kernels/generic and overridden by the avx2/avx512 folders
// (each compiled with its own flags). Only pointers and sizes cross this
// interface.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"

namespace eq::quant {

// The E2M1 (fp4) values by code: bit 3 = sign, bits 2..1 = exponent, bit 0 = mantissa.
inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Panels are 16 output columns wide.
inline constexpr int kPanelWidth = 16;

// Decodes k_count consecutive k (a multiple of the code's unit: 32/bits
// elements, or 32 for 3 bits) of 16 columns into out[k][16].
//   qweight: the word of the first k of the first column; `ld` words between
//            consecutive word rows (N, or 16 for a copied tail panel).
//   scales, biases: float [k_count/group][16] (biases null for table codes).
//   values: table codes: the 16 values by code (null for unsigned integers).
using DecodePanelFn = void (*)(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales,
                               const float* biases, const float* values, int group, float* out);

struct QuantKernels {
  // 4-bit codes through a 16-entry value table: value = values[code] * scale.
  DecodePanelFn decode_table4 = nullptr;
  DecodePanelFn decode_uint2 = nullptr;
  DecodePanelFn decode_uint3 = nullptr;
  DecodePanelFn decode_uint4 = nullptr;
  DecodePanelFn decode_uint8 = nullptr;
  // acc[i][0..16) += sum_k x[i*ldx + k] * panel[k][0..16) for i < m_rows.
  void (*panel_fma)(const float* panel, int64_t k_count, const float* x, int64_t ldx, int64_t m_rows,
                    float* acc) = nullptr;
  // out[j * ldo + k] = panel[k][j] for j < nb, k < k_count (any k_count):
  // a decoded panel back to row-major W.
  void (*panel_to_rows)(const float* panel, int64_t k_count, int64_t nb, float* out, int64_t ldo) = nullptr;
  // sum_i a[i] * b[i].
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  // out[i] = q[i] * scale.
  void (*int8_to_f32)(const int8_t* q, float scale, float* out, int64_t n) = nullptr;

  // affine.h's search_affine_group of `count` groups of n weights that share
  // the importance h[0..n): group r at w[r * ld .. + n), its results at
  // scales[r], biases[r] and codes[r * n .. + n). Bit-identical in every variant.
  void (*search_affine_groups)(const float* w, int64_t ld, int64_t count, const float* h, int n, int bits,
                               float* scales, float* biases, uint8_t* codes) = nullptr;

  DecodePanelFn decode_uint(int bits) const;
};

// The kernels for `isa` (clamped to what was compiled; all three always are).
const QuantKernels& quant_kernels(Isa isa);
// The kernels for eq::active_isa() now.
inline const QuantKernels& active_quant_kernels() { return quant_kernels(active_isa()); }

}  // namespace eq::quant
