// Narrow-float conversions checked against independent references: the
// compiler's _Float16 (hardware/soft-float IEEE binary16), double-precision
// nearest-value searches, and exhaustive loops over every bit pattern.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/numeric.h"

namespace eq {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(Fp16, AllPatternsDecodeLikeFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    uint16_t hh = static_cast<uint16_t>(h);
    std::memcpy(&ref, &hh, 2);
    const float want = static_cast<float>(ref);
    const float got = f16_to_f32(hh);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      EXPECT_EQ(std::signbit(want), std::signbit(got)) << h;
    } else {
      EXPECT_EQ(bits(want), bits(got)) << "pattern " << h;  // includes -0 and subnormals
    }
  }
}

TEST(Fp16, AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const float f = f16_to_f32(hh);
    if (std::isnan(f)) {
      EXPECT_EQ(f32_to_f16(f) & 0x7c00, 0x7c00);
      EXPECT_NE(f32_to_f16(f) & 0x3ff, 0);
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), hh) << h;
  }
}

TEST(Fp16, RandomFloatsRoundLikeFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2'000'000; ++i) {
    // Concentrate on the fp16 range (and around its edges) plus arbitrary bit patterns.
    float f;
    if (i % 4 == 0) {
      f = std::bit_cast<float>(any(rng));
    } else {
      const int e = static_cast<int>(any(rng) % 50) - 30;  // 2^-30 .. 2^19
      f = std::ldexp(1.0f + static_cast<float>(any(rng) % (1u << 23)) * 0x1p-23f, e);
      if (any(rng) & 1) f = -f;
    }
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    const uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(got)));
    } else {
      ASSERT_EQ(got, want) << "f=" << f << " bits=" << std::hex << bits(f);
    }
  }
}

TEST(Fp16, EdgeValues) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // ties to even rounds up to Inf
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);   // tie to even (0)
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002); // tie to even (2)
}

// bf16 reference: the nearest bf16 value by exhaustive comparison in double, ties to even.
uint16_t bf16_reference(float f) {
  const uint32_t u = bits(f);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double a = bf16_to_f32(lo), b = bf16_to_f32(hi), x = f;
  const double da = std::fabs(x - a), db = std::isinf(b) && !std::isinf(x) ? std::fabs(x - a) + 1 : std::fabs(x - b);
  if (std::isinf(b) && !std::isinf(x)) {
    // Rounding up overflows: the IEEE rule compares with 2^128 in magnitude.
    const double limit = std::ldexp(1.0, 128);
    const double dbig = std::fabs(std::fabs(x) - limit);
    if (dbig < da || (dbig == da && (hi & 1) == 0)) return hi;
    return lo;
  }
  if (db < da || (db == da && (hi & 1) == 0)) return hi;
  return lo;
}

TEST(Bf16, AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const float f = bf16_to_f32(hh);
    EXPECT_EQ(bits(f), static_cast<uint32_t>(h) << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << h;
      continue;
    }
    EXPECT_EQ(f32_to_bf16(f), hh) << h;
  }
}

TEST(Bf16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 1'000'000; ++i) {
    const float f = std::bit_cast<float>(any(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), bf16_reference(f)) << std::hex << bits(f);
  }
  // Exact ties.
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even above
}

// Every fp8 code: decode, then encode gives the same code back (canonical NaN aside);
// random floats encode to the nearest code (ties to even mantissa), by brute force.
template <typename Dec, typename Enc>
void check_fp8(Dec decode, Enc encode, bool has_inf, double max_finite) {
  std::vector<double> values(256);
  for (int c = 0; c < 256; ++c) values[static_cast<size_t>(c)] = decode(static_cast<uint8_t>(c));
  for (int c = 0; c < 256; ++c) {
    const float v = decode(static_cast<uint8_t>(c));
    if (std::isnan(v) || std::isinf(v)) continue;
    if (v == 0.0f) {
      EXPECT_EQ(encode(v) & 0x7f, 0);
      continue;
    }
    EXPECT_EQ(encode(v), c) << "code " << c;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1.2 * max_finite, 1.2 * max_finite);
  std::uniform_real_distribution<double> small(-0.02, 0.02);
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(i % 2 ? u(rng) : small(rng));
    if (std::fabs(x) > max_finite) continue;  // overflow behaviour tested separately
    int best = -1;
    double bd = 1e300;
    for (int c = 0; c < 256; ++c) {
      const double v = values[static_cast<size_t>(c)];
      if (std::isnan(v) || std::isinf(v)) continue;
      if (std::signbit(v) != std::signbit(x) && v != 0.0) continue;
      const double d = std::fabs(v - x);
      if (d < bd || (d == bd && (c & 1) == 0)) {
        bd = d;
        best = c;
      }
    }
    const uint8_t got = encode(x);
    ASSERT_EQ(decode(got), values[static_cast<size_t>(best)]) << "x=" << x;
  }
  (void)has_inf;
}

TEST(Fp8, E4M3AllCodesAndNearest) {
  check_fp8([](uint8_t c) { return fp8_e4m3_to_f32(c); }, [](float f) { return f32_to_fp8_e4m3(f, true); }, false,
            448.0);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f, true), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f, false), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f, true), 0xfe);
}

TEST(Fp8, E5M2AllCodesAndNearest) {
  check_fp8([](uint8_t c) { return fp8_e5m2_to_f32(c); }, [](float f) { return f32_to_fp8_e5m2(f, false); }, true,
            57344.0);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_f32(0x7c)));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0x7d)));
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(f32_to_fp8_e5m2(1e6f, false), 0x7c);
  EXPECT_EQ(f32_to_fp8_e5m2(1e6f, true), 0x7b);
}

TEST(E8M0, PowersOfTwo) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(0), 0x1p-127f);
  EXPECT_EQ(e8m0_to_f32(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
}

TEST(BulkConvert, EveryIsaMatchesScalar) {
  std::vector<uint16_t> src(65536 + 13);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u);
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detected_isa()) continue;
    set_active_isa_for_testing(isa);
    for (DType t : {DType::kBF16, DType::kF16}) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{17}, src.size()}) {
        std::vector<float> got(n + 1, -1.0f);
        convert_to_f32(t, src.data(), got.data(), n);
        for (size_t i = 0; i < n; ++i) {
          const float want = t == DType::kBF16 ? bf16_to_f32(src[i]) : f16_to_f32(src[i]);
          if (std::isnan(want))
            ASSERT_TRUE(std::isnan(got[i]));
          else
            ASSERT_EQ(bits(got[i]), bits(want)) << isa_name(isa) << " " << i;
        }
        EXPECT_EQ(got[n], -1.0f);  // no write past the end
      }
    }
  }
  set_active_isa_for_testing(detected_isa());
}

}  // namespace
}  // namespace eq
