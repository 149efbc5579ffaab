// Scalar conversions between float32 and the narrow float formats we read and
// write: fp16 (IEEE binary16), bf16, fp8 E4M3 (OCP "FN": no Inf, one NaN code,
// max 448), fp8 E5M2 (IEEE-like), E8M0 (power-of-two scale, 0xFF = NaN).
// Narrowing rounds to nearest, ties to even. Bulk converters pick a SIMD
// kernel at run time (lib/core/kernels).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace eq {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

float fp8_e4m3_to_f32(uint8_t v);
// Values beyond ±448 saturate to ±448 when `saturate`, else become NaN. NaN stays NaN.
uint8_t f32_to_fp8_e4m3(float f, bool saturate = true);
float fp8_e5m2_to_f32(uint8_t v);
// Values beyond ±57344 saturate when `saturate`, else become ±Inf.
uint8_t f32_to_fp8_e5m2(float f, bool saturate = false);
// E8M0: 2^(v-127); 0xFF is NaN.
float e8m0_to_f32(uint8_t v);

// Converts `n` elements of a floating dtype to float32 (SIMD where available).
// Throws for non-float dtypes.
void convert_to_f32(DType type, const void* src, float* dst, size_t n);

// Converts float32 to fp16/bf16 (round to nearest even).
void convert_f32_to_bf16(const float* src, uint16_t* dst, size_t n);

}  // namespace eq
