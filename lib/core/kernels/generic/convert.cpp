// Portable reference for the bulk narrow-float -> float32 conversions.
#include <cstddef>
#include <cstdint>

#include "core/numeric.h"

namespace eq::kernels {

void bf16_to_f32_generic(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void f16_to_f32_generic(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

}  // namespace eq::kernels
