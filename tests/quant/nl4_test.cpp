// nl4_g32 (non-uniform 16-level grid, fp16 scale per 32): nearest-code
// rounding, lower error than fp4_g32 on Gaussian weights, exact zero and
// constant groups, importance weighting, and the int8 code bytes matching the
// float values. Checks quality, never time.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quant/format.h"
#include "quant/nl4.h"
#include "quant/packed_stream.h"
#include "quant_test_util.h"

namespace eq::quant {
namespace {

using test::dequantized;
using test::mse;
using test::normal_matrix;

TEST(Nl4, CodeIsTheNearestGridValue) {
  const StreamCodes& c = kNl4StreamCodes;
  for (int i = -3000; i <= 3000; ++i) {
    const float x = static_cast<float>(i) / 2000.0f;
    const float got = c.value(nl4_code(x));
    for (uint32_t k = 0; k < 16; ++k) ASSERT_LE(std::fabs(x - got), std::fabs(x - c.value(k))) << "x=" << x;
  }
  EXPECT_EQ(nl4_code(-5.0f), 0u);
  EXPECT_EQ(nl4_code(5.0f), 15u);
}

TEST(Nl4, TablesAgree) {
  // Float values, int8 bytes and the grid describe the same 16 levels.
  const StreamCodes& c = kNl4StreamCodes;
  for (uint32_t k = 0; k < 16; ++k) {
    EXPECT_EQ(c.values[k], c.value(k));
    EXPECT_EQ(c.value(k), static_cast<float>(kNl4Grid[k]) / 128.0f);
    EXPECT_EQ(static_cast<float>(c.int8_bytes[k] - c.int8_offset) * c.int8_scale, c.value(k));
    if (k > 0) {
      EXPECT_LT(kNl4Grid[k - 1], kNl4Grid[k]);
    }
  }
}

TEST(Nl4, LowerErrorThanFp4G32OnGaussianWeights) {
  const std::vector<float> w = normal_matrix(256, 2048, 20260101);
  const double nl4 = mse(w, dequantized(format_by_name("nl4_g32").quantize(w.data(), 256, 2048, {})));
  const double fp4 = mse(w, dequantized(format_by_name("fp4_g32").quantize(w.data(), 256, 2048, {})));
  RecordProperty("nl4_g32", std::to_string(nl4));
  RecordProperty("fp4_g32", std::to_string(fp4));
  EXPECT_LT(nl4, 0.9 * fp4) << "nl4 " << nl4 << " fp4 " << fp4;
  EXPECT_LT(nl4, 0.0060);
}

TEST(Nl4, ZeroAndConstantGroupsAreExact) {
    // Row 0: zeros, 0.25, -0.75, 3 in groups of 32; row 1: two groups with a
  // single nonzero weight each (one of each sign); the rest Gaussian.
  const int64_t rows = 3, cols = 128;
  std::vector<float> w = normal_matrix(rows, cols, 3);
  const float row0[4] = {0.0f, 0.25f, -0.75f, 3.0f};
  for (int64_t k = 0; k < cols; ++k) w[k] = row0[k / 32];
  for (int64_t k = 0; k < 32; ++k) w[cols + k] = 0.0f;
  w[cols + 5] = -0.5f;
  for (int64_t k = 32; k < 64; ++k) w[cols + k] = k == 40 ? 1.5f : 0.0f;
  const QuantizedMatrix q = format_by_name("nl4_g32").quantize(w.data(), rows, cols, {});
  const std::vector<float> d = dequantized(q);
  for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(d[k], w[k]) << "row 0, k " << k;
  // A lone weight beside zeros: the grid has no 0, so the zeros come back as
  // 1/128 of the scale, and the search trades that against the lone weight
  // (within 1%: no extreme grid value is a power of two).
  EXPECT_NEAR(d[cols + 5], -0.5f, 0.01f * 0.5f);
  EXPECT_NEAR(d[cols + 40], 1.5f, 0.01f * 1.5f);
  for (int64_t k = 0; k < 64; ++k)
    if (k != 5 && k != 40) {
      EXPECT_LE(std::fabs(d[cols + k]), 1.5f / 64.0f) << k;
    }
}

TEST(Nl4, ImportanceLowersTheWeightedError) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> w = normal_matrix(rows, cols, 11);
  std::vector<float> imp(cols, 1.0f);
  for (int64_t k = 0; k < cols; k += 4) imp[k] = 100.0f;
  const FormatTraits& f = format_by_name("nl4_g32");
  QuantizeOptions with;
  with.importance = imp.data();
  auto weighted = [&](const std::vector<float>& d) {
    double e = 0.0;
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) e += imp[k] * std::pow(w[n * cols + k] - d[n * cols + k], 2.0);
    return e;
  };
  const double plain = weighted(dequantized(f.quantize(w.data(), rows, cols, {})));
  const double weighted_q = weighted(dequantized(f.quantize(w.data(), rows, cols, with)));
  EXPECT_LT(weighted_q, 0.9 * plain);
}

}  // namespace
}  // namespace eq::quant
