// The register-blocked float32 micro-kernel of the batch expert MLP
// (batch_mlp.cpp): rows of activations times weight panels decoded by
// FormatTraits::dequantize_block (16 output features per panel, [k][16]).
//
//   c[i * ldc + p * 16 + j] (+)= sum_k a[i * lda + k] * panels[p * pstride + k * 16 + j]
//   for i < m, p < np, j < 16, k < kc
//
// Every output element is one FMA chain over k in increasing order, whatever
// m, np and the register blocking: a row's result never depends on which
// other rows share the call, and chaining calls over consecutive k ranges
// (accumulate = true) gives the same bits as one call over the whole range.
#pragma once

#include <cstdint>

namespace eq::exec {

using PanelGemmFn = void (*)(const float* a, int64_t lda, int64_t m, const float* panels, int64_t np,
                             int64_t pstride, int64_t kc, float* c, int64_t ldc, bool accumulate);

// The kernel for eq::active_isa() now.
PanelGemmFn active_panel_gemm();

namespace kernels {
void panel_gemm_generic(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t, bool);
void panel_gemm_avx2(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t, bool);
void panel_gemm_avx512(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t, bool);
}  // namespace kernels

}  // namespace eq::exec
