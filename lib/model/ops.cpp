#include "model/ops.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "model/kernels/float_kernels.h"

namespace eq::model {
namespace {
// Rows per task for batched inputs, columns per task for a few rows (decode).
constexpr int64_t kRowChunk = 32;
constexpr int64_t kColChunk = 256;
constexpr int64_t kFewRows = 8;
}  // namespace

void linear(const float* x, int64_t n, int64_t in, const float* w, int64_t out, const float* bias, float* y) {
  if (n <= 0 || out <= 0) return;
  auto add_bias = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (!bias) return;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) y[r * out + c] += bias[c];
  };
  if (n <= kFewRows) {
    default_pool().parallel_for(static_cast<size_t>(out), kColChunk, [&](size_t c0, size_t c1) {
      const int64_t b = static_cast<int64_t>(c0), e = static_cast<int64_t>(c1);
      kernels::gemm_nt(n, e - b, in, x, in, w + b * in, in, y + b, out);
      add_bias(0, n, b, e);
    });
    return;
  }
  default_pool().parallel_for(static_cast<size_t>(n), kRowChunk, [&](size_t r0, size_t r1) {
    const int64_t b = static_cast<int64_t>(r0), e = static_cast<int64_t>(r1);
    kernels::gemm_nt(e - b, out, in, x + b * in, in, w, in, y + b * out, out);
    add_bias(b, e, 0, out);
  });
}

void rms_norm_rows(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

}  // namespace eq::model
