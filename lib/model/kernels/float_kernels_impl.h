// Body shared by kernels/{generic,avx2,avx512}/float_kernels.cpp. Each includer defines
// EQ_KERNEL_ISA (generic|avx2|avx512) first. Eigen is included under a renamed
// namespace (Eigen_<isa>) so the template instances compiled with different
// -m flags never share a symbol name and the linker cannot swap an AVX-512
// instance into the generic path.
#pragma once

#ifndef EQ_KERNEL_ISA
#error "define EQ_KERNEL_ISA before including float_kernels_impl.h"
#endif

#include <cstdint>

#define EQ_KERNEL_CAT2(a, b) a##b
#define EQ_KERNEL_CAT(a, b) EQ_KERNEL_CAT2(a, b)
#define Eigen EQ_KERNEL_CAT(Eigen_, EQ_KERNEL_ISA)
#define EIGEN_DONT_PARALLELIZE
// GCC 12 reports a false "may be used uninitialized" inside the AVX-512
// intrinsic headers (their _mm512_undefined_* placeholders) once Eigen's
// packet code is inlined; the location is the intrinsic header, so the
// suppression must be in force where that header is included.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#include <Eigen/Core>

#include "model/kernels/float_kernels.h"

namespace eq::model::kernels {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

// C[m, n] (+)= A[m, k] · op(B): op(B) = Bᵀ with B stored [n, k] when TransB, else B stored [k, n].
template <bool TransB>
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  MutMap cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (k <= 0) {
    if (!accumulate) cm.setZero();
    return;
  }
  ConstMap am(a, m, k, Eigen::OuterStride<>(lda));
  auto product = [&](auto&& bop) {
    if (accumulate)
      cm.noalias() += am * bop;
    else
      cm.noalias() = am * bop;
  };
  if constexpr (TransB)
    product(ConstMap(b, n, k, Eigen::OuterStride<>(ldb)).transpose());
  else
    product(ConstMap(b, k, n, Eigen::OuterStride<>(ldb)));
}

void nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
        int64_t ldc, bool accumulate) {
  gemm<true>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
        int64_t ldc, bool accumulate) {
  gemm<false>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void softmax_impl(float* x, int64_t n) {
  if (n <= 0) return;
  Eigen::Map<Eigen::ArrayXf> a(x, n);
  a = (a - a.maxCoeff()).exp();
  // Summed in index order: Eigen's vectorized sum() peels by address
  // alignment, which would make the result depend on where the row lives.
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  a *= 1.0f / sum;
}

void silu_mul_impl(const float* gate, const float* up, int64_t n, float* act) {
  Eigen::Map<const Eigen::ArrayXf> g(gate, n), u(up, n);
  Eigen::Map<Eigen::ArrayXf> out(act, n);
  out = g / (1.0f + (-g).exp()) * u;
}

}  // namespace

KernelTable EQ_KERNEL_CAT(kernel_table_, EQ_KERNEL_ISA)() { return KernelTable{&nt, &nn, &softmax_impl, &silu_mul_impl}; }

}  // namespace eq::model::kernels

#undef Eigen
