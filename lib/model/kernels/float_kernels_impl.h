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

// One block of len <= kPacketBlock elements: gate and up (plus their biases,
// where given) copied into the packet-padded buffers, the activation on whole
// packets, len results written back. Reading the whole block before writing
// lets out alias gate or up. The SwiGLU expression is the one the executor's
// figures were measured with; changing it changes every result's last bits.
void glu_block(const Activation& act, const float* gate, const float* up, const float* gate_bias,
               const float* up_bias, int64_t len, float* out) {
  alignas(64) float g[kPacketBlock], u[kPacketBlock];
  const int64_t padded = padded_to_packets(len);
  if (gate_bias)
    for (int64_t j = 0; j < len; ++j) g[j] = gate[j] + gate_bias[j];
  else
    for (int64_t j = 0; j < len; ++j) g[j] = gate[j];
  if (up_bias)
    for (int64_t j = 0; j < len; ++j) u[j] = up[j] + up_bias[j];
  else
    for (int64_t j = 0; j < len; ++j) u[j] = up[j];
  for (int64_t j = len; j < padded; ++j) g[j] = u[j] = 0.0f;
  AlignedArray gm(g, padded), um(u, padded);
  if (act.kind == ActivationKind::kSwiGlu) {
    gm = gm / (1.0f + (-gm).exp()) * um;
  } else {
    gm = gm.min(act.limit);
    um = um.max(-act.limit).min(act.limit);
    gm = (um + 1.0f) * (gm / (1.0f + (gm * -act.alpha).exp()));
  }
  for (int64_t j = 0; j < len; ++j) out[j] = g[j];
}

void glu_rows_impl(const Activation& act, const float* gate, const float* up, int64_t rows, int64_t width, int64_t ld,
                   const float* gate_bias, const float* up_bias, float* out) {
  if (rows <= 0 || width <= 0) return;
  // Contiguous rows without biases are one array (the blocks may then span rows).
  if (!gate_bias && !up_bias && width == ld) width *= rows, rows = 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; c += kPacketBlock) {
      const int64_t len = width - c < kPacketBlock ? width - c : kPacketBlock, at = r * ld + c;
      glu_block(act, gate + at, up + at, gate_bias ? gate_bias + c : nullptr, up_bias ? up_bias + c : nullptr, len,
                out + at);
    }
}

}  // namespace

KernelTable EQ_KERNEL_CAT(kernel_table_, EQ_KERNEL_ISA)() { return KernelTable{&nt, &nn, &softmax_impl, &glu_rows_impl}; }

}  // namespace eq::model::kernels

#undef Eigen
