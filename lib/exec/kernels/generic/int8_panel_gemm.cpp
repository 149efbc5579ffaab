// Portable reference of the integer batch micro-kernel and of the activation
// quantizer (int8_panel_gemm.h): plain loops, explicit std::fma for the two
// fused steps so the AVX-512 kernel's bits are the definition's bits.
#include <algorithm>
#include <cmath>

#include "exec/int8_panel_gemm.h"

namespace eq::exec::kernels {

using quant::kInt8Unit;

void quantize_rows_int8_generic(const float* x, int64_t ldx, int64_t m, int64_t kc, quant::Int8KOrder order,
                                const Int8RowsBuffer& out) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t u = 0; u < kc / kInt8Unit; ++u) {
      const float* xu = x + i * ldx + u * kInt8Unit;
      float amax = 0.0f;
      for (int k = 0; k < kInt8Unit; ++k) amax = std::max(amax, std::fabs(xu[k]));
      const float scale = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t* q = out.q + i * out.ldq + u * kInt8Unit;
      int32_t sum = 0;
      for (int k = 0; k < kInt8Unit; ++k) {
        const float v = std::clamp(std::nearbyint(xu[k] * inv), -127.0f, 127.0f);
        q[quant::int8_slot(order, k)] = static_cast<int8_t>(v);
        sum += static_cast<int32_t>(v);
      }
      out.scale[i * out.ldu + u] = scale;
      out.qsum[i * out.ldu + u] = sum;
      out.xsum[i * out.ldu + u] = static_cast<float>(sum) * scale;
    }
}

void int8_panel_gemm_generic(const Int8Rows& a, int64_t m, const uint8_t* codes, const float* wscale,
                             const float* wbias, int offset, int64_t np, int64_t kc, float* c, int64_t ldc,
                             bool accumulate) {
  const int64_t units = kc / kInt8Unit;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < np; ++p) {
      const uint8_t* panel = codes + p * kc * 16;
      for (int j = 0; j < 16; ++j) {
        float acc = accumulate ? c[i * ldc + p * 16 + j] : 0.0f;
        for (int64_t u = 0; u < units; ++u) {
          const int8_t* q = a.q + i * a.ldq + u * kInt8Unit;
          int32_t d = 0;
          for (int s = 0; s < kInt8Unit; ++s) d += panel[(u * 8 + s / 4) * 64 + j * 4 + s % 4] * q[s];
          d -= offset * a.qsum[i * a.ldu + u];
          const int64_t w = p * units * 16 + u * 16 + j;
          acc = std::fma(static_cast<float>(d), wscale[w] * a.scale[i * a.ldu + u], acc);
          if (wbias) acc = std::fma(wbias[w], a.xsum[i * a.ldu + u], acc);
        }
        c[i * ldc + p * 16 + j] = acc;
      }
    }
}

}  // namespace eq::exec::kernels
