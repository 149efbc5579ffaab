// E2M1 (fp4) rounding and the per-group scale search shared by fp4_gG,
// mxfp4 and nvfp4. All three store codes in the column bit-stream layout
// (packed_stream.h) and differ only in how a group's scale is represented.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>

#include "quant/format.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

// E2M1 codes in the column bit stream (StreamCodes): value kE2M1Values[code];
// the int8 kernels read them as doubled values (2 * value + 12, a byte).
extern const StreamCodes kE2M1StreamCodes;
// The rows' encodings: fp16 scales (fp4_gG), E8M0 scales (mxfp4), E4M3
// scales times an fp32 tensor scale (nvfp4).
extern const StreamEncoding kFp4Stream, kMxfp4Stream, kNvfp4Stream;

// The E2M1 code nearest to x (x = weight / scale): round to nearest, ties to
// the even code (OCP rounding), saturating at +-6. Codes for -0 and for
// negatives that round to zero are 0 (+0), so zeros stay +0.
inline uint32_t e2m1_code(float x) {
  const float a = std::fabs(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return (x < 0.0f && c != 0) ? (c | 8u) : c;
}

// Weighted squared error of one group quantized with decoded scale s.
inline float e2m1_group_error(const float* w, const float* h, int n, float s) {
  float err = 0.0f;
  if (s == 0.0f) {
    for (int i = 0; i < n; ++i) err += h[i] * w[i] * w[i];
    return err;
  }
  for (int i = 0; i < n; ++i) {
    const float d = w[i] - kE2M1Values[e2m1_code(w[i] / s)] * s;
    err += h[i] * d * d;
  }
  return err;
}

// Maps a real scale to the nearest scale the format can store (decoded).
using ScaleRounder = std::function<float(float)>;

// The representable scale that minimizes the importance-weighted squared
// error of one group: a grid of candidates amax/d for d in [4.5, 8] (clipping
// the largest weights can pay), plus least-squares refits s = sum(h w v) /
// sum(h v^2) of the best; then the exact minimizers over real scales (a sweep
// over the scales where codes change, fp4_common.cpp), rounded to the format
// both ways, so the result is never worse than the grid's. Groups whose
// nonzero weights share one magnitude a try a/v for every E2M1 value v, so
// constant groups are exact whenever the format can represent the scale.
// Returns the decoded scale (0 for all-zero).
float search_e2m1_scale(const float* w, const float* h, int n, const ScaleRounder& round_scale);

// Quantizes W in the column bit-stream layout with E2M1 codes: for each
// output column n and group g, choose_scale(w, h, g, n) returns the decoded
// scale (and stores its encoding); codes are then the nearest E2M1 values.
// Parts: [0] = qweight, the rest filled by choose_scale.
void quantize_e2m1_stream(const float* w, int64_t rows, int64_t cols, int group, const QuantizeOptions& options,
                          QuantizedMatrix& out,
                          const std::function<float(const float* wg, const float* h, int64_t g, int64_t n)>& choose_scale);

}  // namespace eq::quant
