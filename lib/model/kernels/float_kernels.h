// float32 kernels of the reference forward: dense matrix products
// (projections, attention scores, expert MLPs) and the two vectorized
// elementwise steps that matter for speed (attention softmax, SwiGLU). Row-major operands with explicit leading
// dimensions; single-threaded (callers split rows across the thread pool in
// fixed chunks, so results never depend on the thread count).
// The implementation is Eigen compiled once per ISA (kernels/{generic,avx2,
// avx512}/gemm.cpp) and chosen at run time from eq::active_isa().
#pragma once

#include <cstdint>

namespace eq::model::kernels {

// C[m×n] = A[m×k] · B[n×k]ᵀ   (B is a weight in [out, in] layout), or += when accumulate.
void gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate = false);
// C[m×n] = A[m×k] · B[k×n], or += when accumulate.
void gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate = false);

// In-place softmax of one row of n floats (max-subtracted, vectorized exp).
void softmax_row(float* x, int64_t n);
// act[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + exp(-g)).
void silu_mul(const float* gate, const float* up, int64_t n, float* act);

// Per-ISA entry points (one translation unit each).
struct KernelTable {
  void (*nt)(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool);
  void (*nn)(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool);
  void (*softmax_row)(float*, int64_t);
  void (*silu_mul)(const float*, const float*, int64_t, float*);
};
KernelTable kernel_table_generic();
KernelTable kernel_table_avx2();
KernelTable kernel_table_avx512();

}  // namespace eq::model::kernels
