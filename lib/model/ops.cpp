#include "model/ops.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "model/kernels/float_kernels.h"

namespace eq::model {
namespace {
// Tiles per task for batched inputs; columns per task for a few rows (decode).
constexpr int64_t kRowBlock = 256;
constexpr int64_t kColBlock = 1024;
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
  // Tiles of up to kRowBlock rows x kColBlock outputs: each task packs its
  // slice of W once for all its rows (row strips of the whole W repacked
  // every weight once per strip). The tiling depends only on the shape.
  const int64_t row_blocks = (n + kRowBlock - 1) / kRowBlock, col_blocks = (out + kColBlock - 1) / kColBlock;
  default_pool().run(static_cast<size_t>(row_blocks * col_blocks), [&](size_t task) {
    const int64_t r0 = static_cast<int64_t>(task) / col_blocks * kRowBlock,
                  c0 = static_cast<int64_t>(task) % col_blocks * kColBlock;
    const int64_t r1 = std::min(n, r0 + kRowBlock), c1 = std::min(out, c0 + kColBlock);
    kernels::gemm_nt(r1 - r0, c1 - c0, in, x + r0 * in, in, w + c0 * in, in, y + r0 * out + c0, out);
    add_bias(r0, r1, c0, c1);
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
