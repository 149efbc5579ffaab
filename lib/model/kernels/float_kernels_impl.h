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

// Eigen's vectorized assignment peels leading elements up to the
// destination's alignment (and leaves a tail shorter than a packet) and runs
// them through its scalar path, whose exp differs from the packet exp in the
// last bit: an element's value would depend on where its array lives and
// where a caller's chunk starts (the decode MLP's auto and sorted dispatches
// once differed by 4e-7 that way). Here every element goes through the packet
// path: blocks are copied to 64-byte aligned buffers padded to whole packets
// (16 floats, a multiple of every ISA's packet), so a value depends only on
// its inputs.
constexpr int64_t kPacketBlock = 256;
using AlignedArray = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;

int64_t padded_to_packets(int64_t n) { return (n + 15) / 16 * 16; }

void softmax_impl(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  alignas(64) float buf[kPacketBlock];
  for (int64_t i = 0; i < n; i += kPacketBlock) {
    const int64_t len = n - i < kPacketBlock ? n - i : kPacketBlock, padded = padded_to_packets(len);
    for (int64_t j = 0; j < padded; ++j) buf[j] = j < len ? x[i + j] : max;
    AlignedArray a(buf, padded);
    a = (a - max).exp();
    for (int64_t j = 0; j < len; ++j) x[i + j] = buf[j];
  }
  // Summed in index order (a vectorized sum() would peel by alignment too).
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul_impl(const float* gate, const float* up, int64_t n, float* act) {
  alignas(64) float g[kPacketBlock], u[kPacketBlock];
  for (int64_t i = 0; i < n; i += kPacketBlock) {
    const int64_t len = n - i < kPacketBlock ? n - i : kPacketBlock, padded = padded_to_packets(len);
    for (int64_t j = 0; j < padded; ++j) {
      g[j] = j < len ? gate[i + j] : 0.0f;
      u[j] = j < len ? up[i + j] : 0.0f;
    }
    AlignedArray gm(g, padded), um(u, padded);
    gm = gm / (1.0f + (-gm).exp()) * um;
    for (int64_t j = 0; j < len; ++j) act[i + j] = g[j];
  }
}

}  // namespace

KernelTable EQ_KERNEL_CAT(kernel_table_, EQ_KERNEL_ISA)() { return KernelTable{&nt, &nn, &softmax_impl, &silu_mul_impl}; }

}  // namespace eq::model::kernels

#undef Eigen
