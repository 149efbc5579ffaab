// Run-time choice of the kernel build for this CPU (or EXPERTQUANT_ISA).
#include "model/kernels/float_kernels.h"

#include "core/cpu_features.h"

namespace eq::model::kernels {
namespace {

const KernelTable& table() {
  // Read on every call (cheap) so set_active_isa_for_testing takes effect.
  static const KernelTable generic = kernel_table_generic();
  static const KernelTable avx2 = kernel_table_avx2();
  static const KernelTable avx512 = kernel_table_avx512();
  switch (active_isa()) {
    case Isa::kAvx512: return avx512;
    case Isa::kAvx2: return avx2;
    default: return generic;
  }
}

}  // namespace

void gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate) {
  table().nt(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate) {
  table().nn(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void softmax_row(float* x, int64_t n) { table().softmax_row(x, n); }

void glu(const Activation& act, const float* gate, const float* up, int64_t n, float* out) {
  table().glu_rows(act, gate, up, 1, n, n, nullptr, nullptr, out);
}

void glu_rows(const Activation& act, const float* gate, const float* up, int64_t rows, int64_t width, int64_t ld,
              const float* gate_bias, const float* up_bias, float* out) {
  table().glu_rows(act, gate, up, rows, width, ld, gate_bias, up_bias, out);
}

}  // namespace eq::model::kernels
