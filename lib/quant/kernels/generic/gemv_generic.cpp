// Scalar decode (gemv) kernels: the definitions the AVX2 and AVX-512 versions
// are tested against (same integer sums, same per-unit float steps).
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "core/numeric.h"
#include "quant/gemv_kernels.h"
#include "quant/packed_stream.h"

namespace eq::quant::kernels {

namespace {

float stream_scale_at(const StreamGemvArgs& a, int64_t g, int64_t n) {
  return a.scales_f16 ? f16_to_f32(a.scales_f16[g * a.ld + n]) : a.scale_table[a.scales_u8[g * a.ld + n]];
}

}  // namespace

bool gemv_stream_int8_takes_simd(int bits, const uint8_t* code_bytes, int code_offset, int group) {
  if (group % 16 != 0) return false;
  if (!code_bytes) return bits == 2 || bits == 4 || bits == 8;
  for (int c = 0; c < 16; ++c)
    if (std::abs(code_bytes[c] - code_offset) > 127) return false;
  return bits == 4;
}

void gemv_stream_int8_generic(const StreamGemvArgs& a) {
  const GemvInput& in = *a.in;
  // Units never cross a group nor an int8 block of x: any group a multiple of
  // 4 (the SIMD kernels take multiples of 16: units of 16 or 32, the same sums).
  const int64_t unit = std::gcd(a.group, kGemvBlock);
  const int offset = a.code_offset;
  for (int64_t n = 0; n < a.nb; ++n) {
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < a.cols; k0 += unit) {
      const int64_t g = k0 / a.group;
      int32_t dot = 0;
      for (int64_t k = k0; k < k0 + unit; ++k) {
        const uint32_t code = stream_get(a.qweight, a.ld, a.bits, k, n);
        dot += (a.code_bytes ? static_cast<int32_t>(a.code_bytes[code]) : static_cast<int32_t>(code)) * in.q[k];
      }
      int32_t q_sum = 0;
      float x_sum = 0.0f;
      if (unit >= 16) {
        q_sum = in.q_sum16[k0 / 16];
        x_sum = in.x_sum16[k0 / 16];
        if (unit == 32) q_sum += in.q_sum16[k0 / 16 + 1], x_sum += in.x_sum16[k0 / 16 + 1];
      } else {  // as GemvInput::x_sum16, over the unit
        for (int64_t k = k0; k < k0 + unit; ++k) q_sum += in.q[k];
        x_sum = static_cast<float>(q_sum) * in.q_scale[k0 / kGemvBlock];
      }
      dot -= offset * q_sum;
      const float scale = stream_scale_at(a, g, n) * (a.scale_mul * in.q_scale[k0 / kGemvBlock]);
      acc += static_cast<float>(dot) * scale;
      if (a.biases_f16) acc += f16_to_f32(a.biases_f16[g * a.ld + n]) * x_sum;
    }
    a.y[n] = acc;
  }
}

void gemv_int8_rows_generic(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                            const GemvInput& in, float* y) {
  for (int64_t j = 0; j < rows; ++j) {
    const int8_t* row = w + j * ld;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < cols; k0 += kGemvBlock) {
      int32_t dot = 0;
      for (int64_t k = k0; k < std::min(cols, k0 + kGemvBlock); ++k) dot += row[k] * in.q[k];
      acc += static_cast<float>(dot) * in.q_scale[k0 / kGemvBlock];
    }
    y[j] = acc * scales[j];
  }
}

void gemv_bf16_rows_generic(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y) {
  for (int64_t j = 0; j < rows; ++j) {
    float acc = 0.0f;
    for (int64_t k = 0; k < cols; ++k) acc += bf16_to_f32(w[j * ld + k]) * x[k];
    y[j] = acc;
  }
}

}  // namespace eq::quant::kernels
