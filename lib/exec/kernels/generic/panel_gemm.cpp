// Portable reference of the panel micro-kernel (one multiply-add chain per
// output element, k increasing).
#include "exec/panel_gemm.h"

namespace eq::exec::kernels {

void panel_gemm_generic(const float* a, int64_t lda, int64_t m, const float* panels, int64_t np, int64_t pstride,
                        int64_t kc, float* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < np; ++p) {
      float acc[16];
      float* out = c + i * ldc + p * 16;
      for (int j = 0; j < 16; ++j) acc[j] = accumulate ? out[j] : 0.0f;
      const float* ai = a + i * lda;
      const float* panel = panels + p * pstride;
      for (int64_t k = 0; k < kc; ++k)
        for (int j = 0; j < 16; ++j) acc[j] += ai[k] * panel[k * 16 + j];
      for (int j = 0; j < 16; ++j) out[j] = acc[j];
    }
}

}  // namespace eq::exec::kernels
