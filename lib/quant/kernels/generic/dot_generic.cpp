// Scalar panel accumulation and dot products.
#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

void panel_fma_generic(const float* panel, int64_t k_count, const float* x, int64_t ldx, int64_t m_rows, float* acc) {
  for (int64_t i = 0; i < m_rows; ++i) {
    float a[kPanelWidth];
    for (int j = 0; j < kPanelWidth; ++j) a[j] = acc[i * kPanelWidth + j];
    const float* xi = x + i * ldx;
    for (int64_t k = 0; k < k_count; ++k)
      for (int j = 0; j < kPanelWidth; ++j) a[j] += xi[k] * panel[k * kPanelWidth + j];
    for (int j = 0; j < kPanelWidth; ++j) acc[i * kPanelWidth + j] = a[j];
  }
}

float dot_generic(const float* a, const float* b, int64_t n) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) s[0] += a[i] * b[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void int8_to_f32_generic(const int8_t* q, float scale, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace eq::quant::kernels

namespace eq::quant::kernels {

void panel_to_rows_generic(const float* panel, int64_t k_count, int64_t nb, float* out, int64_t ldo) {
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t k = 0; k < k_count; ++k) out[j * ldo + k] = panel[k * kPanelWidth + j];
}

}  // namespace eq::quant::kernels
