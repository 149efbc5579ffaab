// Scalar reference of quant/block_int8.h.
#include <algorithm>
#include <cmath>

#include "quant/block_int8.h"

namespace eq::quant::kernels {

int32_t quantize_block_int8_generic(const float* x, int64_t n, float* scale, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    // nearbyint (ties to even) of a value within +-128 as the classic add
    // and subtract of 1.5 * 2^23: the same result, inlined instead of a libm
    // call per element.
    const float v = std::clamp(x[i] * inv, -127.0f, 127.0f);
    const float r = (v + 12582912.0f) - 12582912.0f;
    q[i] = static_cast<int8_t>(r);
    sum += q[i];
  }
  return sum;
}

}  // namespace eq::quant::kernels
