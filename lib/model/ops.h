// Row-wise building blocks of the forward pass, parallel over fixed chunks of
// rows (or output columns) on eq::default_pool(); chunk boundaries depend only
// on the problem size, so results are identical for any thread count.
#pragma once

#include <cstdint>

namespace eq::model {

// y[n, out] = x[n, in] · Wᵀ (+ bias). W is [out, in] row-major.
void linear(const float* x, int64_t n, int64_t in, const float* w, int64_t out, const float* bias, float* y);

// RMSNorm over each row of length `dim`: y = w * x / sqrt(mean(x²) + eps)
// (mean accumulated in double; HF computes it in float32 — the difference is
// far below the reference tolerances). y may alias x.
void rms_norm_rows(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y);

}  // namespace eq::model
