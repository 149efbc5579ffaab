// quant/block_int8.h: every ISA's block quantizer gives the generic one's
// bits (scale, codes, sum), on blocks with ties, zeros, outliers and
// denormals, and the codes are round-half-even of x * 127 / amax.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "quant/block_int8.h"

namespace eq::quant {
namespace {

TEST(BlockInt8, EveryIsaEqualsGenericBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {16, 32, 128}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = nd(rng);
      if (rep % 5 == 1) x[rep % n] = 300.0f;                           // an outlier
      if (rep % 5 == 2) std::fill(x.begin(), x.end(), 0.0f);           // all zero: scale 0, codes 0
      if (rep % 5 == 3) for (int64_t i = 0; i < n; ++i) x[i] = (i - n / 2) * 0.5f;  // exact .5 ties
      if (rep % 5 == 4) x[0] = 1e-40f;                                 // a denormal
      float scale_ref = -1, scale = -1;
      std::vector<int8_t> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      const int32_t sum_ref = kernels::quantize_block_int8_generic(x.data(), n, &scale_ref, ref.data());
      int32_t direct = 0;
      for (int64_t i = 0; i < n; ++i) {
        direct += ref[i];
        const float inv = scale_ref > 0 ? 127.0f / (scale_ref * 127.0f) : 0.0f;
        ASSERT_LE(std::abs(ref[i] - x[i] * inv), 0.5f + 1e-3f) << i;
      }
      ASSERT_EQ(sum_ref, direct);
      if (detected_isa() >= Isa::kAvx512) {
        const int32_t sum = kernels::quantize_block_int8_avx512(x.data(), n, &scale, got.data());
        ASSERT_EQ(sum, sum_ref) << "n " << n << " rep " << rep;
        ASSERT_EQ(scale, scale_ref);
        ASSERT_EQ(got, ref) << "n " << n << " rep " << rep;
      }
    }
  }
}

TEST(BlockInt8, TiesRoundToEven) {
  // amax 127 makes the multiplier exactly 1: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0.
  std::vector<float> x(16, 0.0f);
  x[0] = 127.0f, x[1] = 0.5f, x[2] = 1.5f, x[3] = 2.5f, x[4] = -0.5f, x[5] = -1.5f;
  std::vector<int8_t> q(16);
  float scale = 0;
  const int32_t sum = active_quantize_block_int8()(x.data(), 16, &scale, q.data());
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], 2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[5], -2);
  EXPECT_EQ(sum, 127 + 2 + 2 - 2);
}

}  // namespace
}  // namespace eq::quant
