// float32 kernels of the reference forward: dense matrix products
// (projections, attention scores, expert MLPs) and the two vectorized
// elementwise steps that matter for speed (attention softmax, the MLP's gated
// activation). Row-major operands with explicit leading
// dimensions; single-threaded (callers split rows across the thread pool in
// fixed chunks, so results never depend on the thread count).
// The implementation is Eigen compiled once per ISA (kernels/{generic,avx2,
// avx512}/gemm.cpp) and chosen at run time from eq::active_isa().
#pragma once

#include <cstdint>

#include "model/activation.h"

namespace eq::model::kernels {

// C[m×n] = A[m×k] · B[n×k]ᵀ   (B is a weight in [out, in] layout), or += when accumulate.
void gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate = false);
// C[m×n] = A[m×k] · B[k×n], or += when accumulate.
void gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate = false);

// In-place softmax of one row of n floats (max-subtracted, vectorized exp).
void softmax_row(float* x, int64_t n);
// out[i] = act(gate[i], up[i]) (model/activation.h); out may alias gate or up.
// Every element's value depends only on its inputs (not on n, nor on where
// the arrays live), so callers may split a row anywhere.
void glu(const Activation& act, const float* gate, const float* up, int64_t n, float* out);
// The same on a tile of `rows` rows of `width` columns, row stride `ld` for
// gate, up and out, each column's bias added first:
//   out[r, c] = act(gate[r, c] + gate_bias[c], up[r, c] + up_bias[c]),  c < width
// A null bias adds nothing (not even +0, which would turn -0 into +0), so
// without biases an element gets exactly glu's bits. Columns [width, ld) are
// not touched.
void glu_rows(const Activation& act, const float* gate, const float* up, int64_t rows, int64_t width, int64_t ld,
              const float* gate_bias, const float* up_bias, float* out);

// Per-ISA entry points (one translation unit each).
struct KernelTable {
  void (*nt)(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool);
  void (*nn)(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool);
  void (*softmax_row)(float*, int64_t);
  void (*glu_rows)(const Activation&, const float*, const float*, int64_t, int64_t, int64_t, const float*,
                   const float*, float*);
};
KernelTable kernel_table_generic();
KernelTable kernel_table_avx2();
KernelTable kernel_table_avx512();

}  // namespace eq::model::kernels
