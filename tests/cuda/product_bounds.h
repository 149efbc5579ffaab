// The bounds the GPU product tests measure against (device_gemv_test.cpp
// derives them): gamma(n) of a float32 sum of n products, and the envelope of
// y = x W^T, an upper bound of sum_k |W[n, k]| |x[k]| taken in the basis the
// product is computed in (the rotated one for rotated rows).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/format.h"
#include "quant/hadamard.h"
#include "quant/packed_stream.h"
#include "quant/rotated_basis.h"
#include "../quant/quant_test_util.h"

namespace eq::exec::cuda::bounds {

constexpr double kUnit = 0x1p-24;
inline double gamma(double n) { return n * kUnit / (1.0 - n * kUnit); }

// n values of N(0, sigma^2), seeded.
inline std::vector<float> normal(size_t n, float sigma, uint64_t seed) {
  return quant::test::normal_matrix(1, static_cast<int64_t>(n), seed, sigma);
}

// The envelope of y = x W^T (device_gemv_test.cpp, top of the file), [m_rows, rows], for
// x [m_rows, cols]: an upper bound of sum_k |W[n, k]| |x[k]| (exactly, in
// real numbers) that the float32 errors of both products are measured
// against; *g = 2 gamma(n) of the format's reduction, so the tolerance is
// *g times the envelope.
inline std::vector<double> envelope(const quant::PackedMatrix& m, const std::vector<float>& x, int m_rows, double* g) {
  const quant::FormatTraits& f = *m.format;
  const int64_t N = m.rows, K = m.cols;
  std::vector<double> env(static_cast<size_t>(m_rows * N), 0.0);
  if (f.rotated != nullptr) {
    const int64_t bk = f.rotated->block(K), bn = f.rotated->block(N);
    std::vector<float> panels(static_cast<size_t>(N * K));
    f.rotated->decode_panels(m, 0, N, 0, K, panels.data());
    auto w_rot = [&](int64_t r, int64_t c) { return panels[static_cast<size_t>((r / 16) * K * 16 + c * 16 + r % 16)]; };
    const double log2_bk = std::log2(static_cast<double>(bk)), log2_bn = std::log2(static_cast<double>(bn));
    *g = 2.0 * gamma(static_cast<double>(K) + log2_bk + log2_bn + 16.0);
    for (int i = 0; i < m_rows; ++i) {
      std::vector<double> xbar(static_cast<size_t>(K)), a(static_cast<size_t>(N));
      for (int64_t b = 0; b < K; b += bk) {
        double s = 0.0;
        for (int64_t k = b; k < b + bk; ++k) s += std::fabs(x[static_cast<size_t>(i * K + k)]);
        for (int64_t k = b; k < b + bk; ++k) xbar[static_cast<size_t>(k)] = s / std::sqrt(static_cast<double>(bk));
      }
      for (int64_t r = 0; r < N; ++r) {
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k) s += std::fabs(w_rot(r, k)) * xbar[static_cast<size_t>(k)];
        a[static_cast<size_t>(r)] = s;
      }
      for (int64_t b = 0; b < N; b += bn) {
        double s = 0.0;
        for (int64_t r = b; r < b + bn; ++r) s += a[static_cast<size_t>(r)];
        for (int64_t r = b; r < b + bn; ++r) env[static_cast<size_t>(i * N + r)] = s / std::sqrt(static_cast<double>(bn));
      }
    }
    return env;
  }
  std::vector<float> w(static_cast<size_t>(N * K));
  f.dequantize(m, w.data());
  const bool biased = f.stream != nullptr && f.stream->has_biases;
  const quant::StreamLayout layout = f.stream != nullptr ? quant::stream_layout_of(f) : quant::StreamLayout{};
  *g = 2.0 * gamma(static_cast<double>(K + K / 16 + 16));
  for (int i = 0; i < m_rows; ++i)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        double wk = std::fabs(w[static_cast<size_t>(n * K + k)]);
        if (biased) wk += 2.0 * std::fabs(quant::stream_bias(m, layout, k / layout.group, n));
        s += wk * std::fabs(x[static_cast<size_t>(i * K + k)]);
      }
      env[static_cast<size_t>(i * N + n)] = s;
    }
  return env;
}

// sum_k (|W[n, k]| + 2 |bias of (n, k)'s group|) * c(i, k, amax_k) for each
// row i of x and output n, [m_rows, rows], with amax_k the max of |x[i, .]|
// over k's block of 32 (the int8 x's block, quant/gemv.h).
template <typename C>
std::vector<double> int8_block_sum(const quant::PackedMatrix& m, const std::vector<float>& x, int m_rows, C&& c) {
  const quant::FormatTraits& f = *m.format;
  const int64_t N = m.rows, K = m.cols;
  std::vector<float> w(static_cast<size_t>(N * K));
  f.dequantize(m, w.data());
  const bool biased = f.stream != nullptr && f.stream->has_biases;
  const quant::StreamLayout layout = f.stream != nullptr ? quant::stream_layout_of(f) : quant::StreamLayout{};
  std::vector<double> out(static_cast<size_t>(m_rows * N), 0.0);
  for (int i = 0; i < m_rows; ++i) {
    std::vector<double> ck(static_cast<size_t>(K));
    for (int64_t b = 0; b < K; b += 32) {
      double amax = 0.0;
      for (int64_t k = b; k < std::min(K, b + 32); ++k) amax = std::max(amax, std::fabs(double{x[static_cast<size_t>(i * K + k)]}));
      for (int64_t k = b; k < std::min(K, b + 32); ++k) ck[static_cast<size_t>(k)] = c(x[static_cast<size_t>(i * K + k)], amax);
    }
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        if (ck[static_cast<size_t>(k)] == 0.0) continue;
        double wk = std::fabs(w[static_cast<size_t>(n * K + k)]);
        if (biased) wk += 2.0 * std::fabs(quant::stream_bias(m, layout, k / layout.group, n));
        s += wk * ck[static_cast<size_t>(k)];
      }
      out[static_cast<size_t>(i * N + n)] = s;
    }
  }
  return out;
}

// The int8 input's share (quant::cuda::device_gemv_int8_input): x quantized
// in blocks of 32 moves each x[k] by at most half its block's scale, amax /
// 127, so the product moves by at most sum_k (|W[n, k]| + 2 |bias|) amax_k / 254.
inline std::vector<double> int8_envelope(const quant::PackedMatrix& m, const std::vector<float>& x, int m_rows) {
  return int8_block_sum(m, x, m_rows, [](float, double amax) { return amax / 254.0; });
}

// Whether x, of a block whose amax is `amax`, lies so near a rounding tie of
// its int8 value t = |x| 127 / amax that an x off by up to rel t + abs_t in
// those units, quantized the same way, may round the other way.
inline bool near_int8_tie(float x, double amax, double rel, double abs_t) {
  if (amax == 0.0) return false;
  const double t = std::fabs(double{x}) * 127.0 / amax;
  return std::fabs(t - (std::floor(t) + 0.5)) <= rel * (t + 1.0) + abs_t;
}

// What the rounding of such near ties may move the product by when the two
// sides' x differ by up to that (their blocks' amax by as little): a step
// (amax / 127) of each near-tie x, sum_k (|W[n, k]| + 2 |bias|) amax_k / 127.
inline std::vector<double> int8_tie_allowance(const quant::PackedMatrix& m, const std::vector<float>& x, int m_rows,
                                              double rel, double abs_t) {
  return int8_block_sum(m, x, m_rows, [rel, abs_t](float v, double amax) {
    return near_int8_tie(v, amax, rel, abs_t) ? amax / 127.0 : 0.0;
  });
}

}  // namespace eq::exec::cuda::bounds
