// One activation block to int8 for the decode kernels (GemvActivation):
//   amax = max |x[i]|, scale = amax / 127, q[i] = round-half-even(clamp(x[i] *
//   (127 / amax), -127, 127)) (0 when amax = 0), returns sum q[i].
// Every variant computes the same bits (max is exact, one rounding per
// multiply, no FMA), so the int8 input never depends on the ISA.
#pragma once

#include <cstdint>

namespace eq::quant {

using QuantizeBlockInt8Fn = int32_t (*)(const float* x, int64_t n, float* scale, int8_t* q);

namespace kernels {
int32_t quantize_block_int8_generic(const float* x, int64_t n, float* scale, int8_t* q);
int32_t quantize_block_int8_avx512(const float* x, int64_t n, float* scale, int8_t* q);  // n a multiple of 16
}  // namespace kernels

// The variant for the active ISA (n a multiple of 16 on every one).
QuantizeBlockInt8Fn active_quantize_block_int8();

}  // namespace eq::quant
