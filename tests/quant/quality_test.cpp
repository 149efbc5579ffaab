// Quality of the fp4/affine/int8 quantizers: analytic error bounds, MSE
// bounds on a fixed-seed N(0,1) sample (the formats' quality targets), importance
// weighting, constant groups, E2M1 rounding. Checks quality, never time.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/affine.h"
#include "quant/format.h"
#include "quant/fp4.h"
#include "quant/fp4_common.h"
#include "quant/packed_stream.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::dequantized;
using test::mse;
using test::normal_matrix;

// The shared search's own table (device code cannot read kE2M1Values) holds the same values.
TEST(E2M1, SharedValueTableEqualsTheKernels) {
  for (uint32_t c = 0; c < 16; ++c) {
    EXPECT_EQ(e2m1_ops::value(c), kE2M1Values[c]) << c;
    EXPECT_EQ(std::signbit(e2m1_ops::value(c)), std::signbit(kE2M1Values[c])) << c;
  }
}

TEST(E2M1, NearestCodeWithTiesToEven) {
  // Exhaustive over a fine grid: the chosen value is a nearest one.
  for (int i = -16000; i <= 16000; ++i) {
    const float x = static_cast<float>(i) / 2000.0f;
    const float got = kE2M1Values[e2m1_ops::code(x)];
    for (int c = 0; c < 16; ++c)
      ASSERT_LE(std::fabs(x - got), std::fabs(x - kE2M1Values[c])) << "x=" << x;
  }
  // Ties go to the even code (OCP rounding), beyond 6 saturates.
  EXPECT_EQ(e2m1_ops::code(0.25f), 0u);
  EXPECT_EQ(e2m1_ops::code(0.75f), 2u);
  EXPECT_EQ(e2m1_ops::code(1.25f), 2u);
  EXPECT_EQ(e2m1_ops::code(1.75f), 4u);
  EXPECT_EQ(e2m1_ops::code(2.5f), 4u);
  EXPECT_EQ(e2m1_ops::code(3.5f), 6u);
  EXPECT_EQ(e2m1_ops::code(5.0f), 6u);
  EXPECT_EQ(e2m1_ops::code(100.0f), 7u);
  EXPECT_EQ(e2m1_ops::code(-100.0f), 15u);
  EXPECT_EQ(e2m1_ops::code(-0.0f), 0u);
  EXPECT_EQ(e2m1_ops::code(-0.1f), 0u);
}

// MSE on a fixed-seed N(0,1) sample (256 x 2048 = 524,288 weights).
double normal_mse(const FormatTraits& f) {
  const std::vector<float> w = normal_matrix(256, 2048, 20260101);
  return mse(w, dequantized(f.quantize(w.data(), 256, 2048, QuantizeOptions{})));
}

TEST(Quality, MseBoundsOnGaussianWeights) {
  // Quality targets of the fp4 family (fp4 with fp16 scales per 16 <= 0.0080,
  // nvfp4 <= 0.0090, mxfp4 <= 0.0132), plus bounds for the affine rows (a
  // min/max rounding quantizer would sit near (range/2^B)^2/12; the search
  // must beat that).
  const std::pair<const char*, double> bounds[] = {
      {"fp4_g16", 0.0080}, {"nvfp4", 0.0090},   {"mxfp4", 0.0132},    {"fp4_g32", 0.0100}, {"int4_g64", 0.0090},
      {"int3_g64", 0.0360}, {"int2_g64", 0.125}, {"int8_g128", 3.5e-5}, {"int8_row", 2.0e-4},
  };
  for (auto [name, bound] : bounds) {
    const double e = normal_mse(format_by_name(name));
    EXPECT_LE(e, bound) << name;
    RecordProperty(name, std::to_string(e));
  }
}

TEST(Quality, Mxfp4NeighbourSearchNeverWorseThanFloorRule) {
  const std::vector<float> w = normal_matrix(64, 1024, 5);
  const double searched = mse(w, dequantized(quantize_mxfp4(format_by_name("mxfp4"), w.data(), 64, 1024, QuantizeOptions{})));
  const double floor_rule = mse(w, dequantized(quantize_mxfp4_floor_rule(w.data(), 64, 1024, QuantizeOptions{})));
  EXPECT_LT(searched, floor_rule);
}

// |w - w_hat| is the distance to the nearest representable value of the
// group: for E2M1 formats the nearest of the 15 values v * scale.
TEST(Quality, Fp4ErrorIsDistanceToNearestGridPoint) {
  for (const char* name : {"fp4_g16", "fp4_g64", "mxfp4", "nvfp4"}) {
    SCOPED_TRACE(name);
    const FormatTraits& f = format_by_name(name);
    const std::vector<float> w = normal_matrix(24, 256, 9);
    const QuantizedMatrix q = f.quantize(w.data(), 24, 256, QuantizeOptions{});
    const std::vector<float> d = dequantized(q);
    const PackedMatrix m = q.view();
    const StreamLayout l = stream_layout_of(f);
    for (int64_t n = 0; n < 24; ++n)
      for (int64_t k = 0; k < 256; ++k) {
        const float s = stream_scale(m, l, k / f.group_size, n);
        const float err = std::fabs(w[n * 256 + k] - d[n * 256 + k]);
        float nearest = INFINITY;
        for (float v : kE2M1Values) nearest = std::min(nearest, std::fabs(w[n * 256 + k] - v * s));
        ASSERT_LE(err, nearest * (1.0f + 1e-6f) + 1e-7f) << n << "," << k;
        // And the MLX-style bound |w - w_hat| <= scale, except where the search clipped (|w| > 6 s).
        if (std::fabs(w[n * 256 + k]) <= 6.0f * s) {
          ASSERT_LE(err, s * 1.000001f);
        }
      }
  }
}

// Affine: every weight inside the coded range [bias, bias + nmax * scale] is
// within scale / 2 of its reconstruction; outside, the error is the distance
// to the range plus at most nothing (the code clamps to the end).
TEST(Quality, AffineErrorWithinHalfStep) {
  for (const char* name : {"int2_g32", "int3_g64", "int4_g128", "int8_g32"}) {
    SCOPED_TRACE(name);
    const FormatTraits& f = format_by_name(name);
    const std::vector<float> w = normal_matrix(24, 256, 13);
    const QuantizedMatrix q = f.quantize(w.data(), 24, 256, QuantizeOptions{});
    const std::vector<float> d = dequantized(q);
    const PackedMatrix m = q.view();
    const StreamLayout l = stream_layout_of(f);
    const float nmax = static_cast<float>((1 << f.weight_bits) - 1);
    for (int64_t n = 0; n < 24; ++n)
      for (int64_t k = 0; k < 256; ++k) {
        const float s = stream_scale(m, l, k / f.group_size, n), b = stream_bias(m, l, k / f.group_size, n);
        const float x = w[n * 256 + k];
        const float outside = std::max({0.0f, b - x, x - (b + nmax * s)});
        ASSERT_LE(std::fabs(x - d[n * 256 + k]), s / 2 * 1.0001f + outside + 1e-6f) << n << "," << k;
      }
  }
}

TEST(Quality, ConstantGroupsQuantizeExactly) {
  // Constants whose scale each format can represent: c = v * s with s an fp16,
  // a power of two, or an E4M3 value times the (power-of-two) tensor scale.
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (f.family == "trellis") continue;  // rotated formats cannot be exact per group
    SCOPED_TRACE(std::string(f.name));
    const int64_t g = std::max(f.group_size, 32);
    const int64_t rows = 4, cols = 4 * g;
    const float constants[4] = {0.75f, -1.5f, 3.0f, 0.0f};
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) w[n * cols + k] = constants[f.group_size ? (k / g + n) % 4 : n];
    const std::vector<float> d = dequantized(f.quantize(w.data(), rows, cols, QuantizeOptions{}));
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(d[i], w[i]) << "element " << i;
  }
}

// Channels with high importance must be reconstructed better when the
// quantizer is told so: weighted error (by the true importance) drops.
TEST(Quality, ImportanceWeightingReducesWeightedError) {
  const int64_t rows = 64, cols = 256;
  std::vector<float> w = normal_matrix(rows, cols, 17);
  std::vector<float> importance(static_cast<size_t>(cols), 0.01f);
  for (int64_t k = 0; k < cols; k += 8) importance[k] = 100.0f;  // one hot channel in every 8
  // Make the hot channels small so plain MSE would sacrifice them.
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; k += 8) w[n * cols + k] *= 0.3f;
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (f.family == "bf16") continue;  // rounding to nearest is already optimal per element
    SCOPED_TRACE(std::string(f.name));
    auto weighted = [&](const std::vector<float>& d) {
      double e = 0.0;
      for (int64_t n = 0; n < rows; ++n)
        for (int64_t k = 0; k < cols; ++k) e += importance[k] * std::pow(w[n * cols + k] - d[n * cols + k], 2.0);
      return e;
    };
    QuantizeOptions plain, weighted_options;
    weighted_options.importance = importance.data();
    const double e_plain = weighted(dequantized(f.quantize(w.data(), rows, cols, plain)));
    const double e_weighted = weighted(dequantized(f.quantize(w.data(), rows, cols, weighted_options)));
    EXPECT_LT(e_weighted, e_plain);
  }
}

TEST(Quality, ImportanceMustBeFiniteAndNonNegative) {
  const FormatTraits& f = format_by_name("int4_g32");
  const std::vector<float> w = normal_matrix(4, 64, 1);
  std::vector<float> importance(64, 1.0f);
  importance[9] = -1.0f;
  QuantizeOptions options;
  options.importance = importance.data();
  options.tensor_name = "t";
  EXPECT_THROW(f.quantize(w.data(), 4, 64, options), Error);
}

}  // namespace
}  // namespace eq::quant
