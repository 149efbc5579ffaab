// The per-group scale searches of the scalar formats (e2m1_ops::search_scale for
// fp4_gG and nvfp4, search_affine_group for intB_gG) against the simpler
// searches they extend, on random groups with random importance: the weighted
// error (in float64) never rises, falls on average, and zero and constant
// groups stay exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/numeric.h"
#include "quant/affine.h"
#include "quant/e2m1_search.h"
#include "quant/fp4_common.h"
#include "quant/quant_kernels.h"
#include "quant_test_util.h"

namespace eq::quant {
namespace {

using ScaleRounder = std::function<float(float)>;

float round_f16(float s) { return f16_to_f32(f32_to_f16(std::min(s, 65504.0f))); }
// nvfp4's block scale: E4M3 times a power-of-two tensor scale.
constexpr float kTensorScale = 1.0f / 256.0f;
float round_e4m3(float s) { return fp8_e4m3_to_f32(f32_to_fp8_e4m3(s / kTensorScale, true)) * kTensorScale; }

double e2m1_error(const std::vector<float>& w, const std::vector<float>& h, float s) {
  double e = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double q = s == 0.0f ? 0.0 : double(kE2M1Values[e2m1_ops::code(w[i] / s)]) * s;
    e += double(h[i]) * (w[i] - q) * (w[i] - q);
  }
  return e;
}

// The grid search alone (amax/d, d in [4.5, 8], then least-squares refits):
// what e2m1_ops::search_scale adds its exact sweep to.
float grid_e2m1_scale(const std::vector<float>& w, const std::vector<float>& h, const ScaleRounder& round_scale) {
  const int n = static_cast<int>(w.size());
  float amax = 0.0f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  if (amax == 0.0f) return 0.0f;
  float best_s = 0.0f;
  double best_err = e2m1_error(w, h, 0.0f);
  auto consider = [&](float s) {
    const float r = round_scale(s);
    if (!(r > 0.0f)) return;
    const double e = e2m1_error(w, h, r);
    if (e < best_err) best_err = e, best_s = r;
  };
  for (int i = 0; i <= 28; ++i) consider(amax / (4.5f + 3.5f * static_cast<float>(i) / 28));
  for (int iter = 0; iter < 2 && best_s > 0.0f; ++iter) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double v = kE2M1Values[e2m1_ops::code(w[i] / best_s)];
      num += double(h[i]) * w[i] * v;
      den += double(h[i]) * v * v;
    }
    if (den <= 0.0) break;
    const double before = best_err;
    consider(static_cast<float>(num / den));
    if (!(best_err < before)) break;
  }
  return best_s;
}

// Heavy-tailed weights (one in 16 is 4x larger) and importance spread over
// four orders of magnitude, as activation energies are.
void random_group(std::mt19937_64& rng, int n, std::vector<float>& w, std::vector<float>& h) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
  w.resize(size_t(n));
  h.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    w[i] = normal(rng) * (rng() % 16 == 0 ? 4.0f : 1.0f) * 0.05f;
    h[i] = std::pow(10.0f, exponent(rng));
  }
}

TEST(ScaleSearch, E2M1NeverWorseThanTheGridAndBetterOnAverage) {
  struct Case {
    int n;
    ScaleRounder round;
    const char* name;
  };
  for (const Case& c : {Case{32, round_f16, "fp16 g32"}, Case{16, round_f16, "fp16 g16"},
                        Case{16, round_e4m3, "e4m3 g16"}}) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(11);
    std::vector<float> w, h;
    double total_grid = 0.0, total_search = 0.0;
    for (int t = 0; t < 2000; ++t) {
      random_group(rng, c.n, w, h);
      const double grid = e2m1_error(w, h, grid_e2m1_scale(w, h, c.round));
      const float s = e2m1_ops::search_scale(w.data(), h.data(), c.n, c.round);
      ASSERT_EQ(s, c.round(s)) << "the scale must be representable";
      const double search = e2m1_error(w, h, s);
      ASSERT_LE(search, grid * (1.0 + 1e-6)) << "group " << t;
      total_grid += grid;
      total_search += search;
    }
    EXPECT_LT(total_search, 0.98 * total_grid);
  }
}

// With an fp16 scale the sweep finds the best real scale, so no fp16 scale
// in the useful range (every fp16 value from amax/16 to amax/0.25) does
// noticeably better.
TEST(ScaleSearch, E2M1MatchesExhaustiveFp16Scales) {
  std::mt19937_64 rng(5);
  std::vector<float> w, h;
  for (int t = 0; t < 200; ++t) {
    random_group(rng, 32, w, h);
    float amax = 0.0f;
    for (float v : w) amax = std::max(amax, std::fabs(v));
    double best = e2m1_error(w, h, 0.0f);
    for (uint16_t b = f32_to_f16(amax / 16.0f); f16_to_f32(b) <= amax / 0.25f; ++b)
      best = std::min(best, e2m1_error(w, h, f16_to_f32(b)));
    const double got = e2m1_error(w, h, e2m1_ops::search_scale(w.data(), h.data(), 32, round_f16));
    EXPECT_LE(got, best * 1.001) << "group " << t;
  }
}

TEST(ScaleSearch, E2M1ZeroAndConstantGroupsStayExact) {
  std::vector<float> h(32);
  for (int i = 0; i < 32; ++i) h[i] = 1.0f + float(i % 7);
  std::vector<float> zero(32, 0.0f);
  EXPECT_EQ(e2m1_ops::search_scale(zero.data(), h.data(), 32, round_f16), 0.0f);
  for (float c : {0.75f, -1.5f, 3.0f, 0.0625f, -0.001953125f}) {
    std::vector<float> w(32, c);
    w[3] = -c;  // one magnitude, both signs
    w[9] = 0.0f;
    for (const ScaleRounder& round : {ScaleRounder(round_f16), ScaleRounder(round_e4m3)}) {
      const float s = e2m1_ops::search_scale(w.data(), h.data(), 32, round);
      EXPECT_EQ(e2m1_error(w, h, s), 0.0) << "constant " << c;
    }
  }
}

double affine_error(const std::vector<float>& w, const std::vector<float>& h, AffineGroup p,
                    const std::vector<uint8_t>& codes) {
  double e = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = double(codes[i]) * p.scale + p.bias - w[i];
    e += double(h[i]) * d * d;
  }
  return e;
}

// The previous affine search: min/max, 21 inverse steps t in [-1, 1] anchored
// at the minimum, each refit by weighted least squares, then up to four
// alternations; scored as decoded (fp16 scale and bias).
double grid_affine_error(const std::vector<float>& w, const std::vector<float>& h, int bits) {
  const int n = static_cast<int>(w.size()), nmax = (1 << bits) - 1;
  const float lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
  auto f16 = [](double v) { return f16_to_f32(f32_to_f16(float(std::clamp(v, -65504.0, 65504.0)))); };
  std::vector<uint8_t> codes(static_cast<size_t>(n)), best_codes(static_cast<size_t>(n));
  double best = INFINITY;
  auto score = [&](double s, double b) {
    const float fs = f16(s), fb = f16(b);
    double e = 0.0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(static_cast<int>(std::nearbyint((w[i] - fb) / fs)), 0, nmax);
      codes[i] = uint8_t(q);
      const float d = float(q) * fs + fb - w[i];
      e += double(h[i]) * d * d;
    }
    if (e < best) best = e, best_codes = codes;
  };
  auto fit = [&](const std::vector<uint8_t>& c, double* s, double* b) {
    double a = 0, bb = 0, cc = 0, d = 0, e = 0;
    for (int i = 0; i < n; ++i) {
      const double q = c[i], hw = h[i];
      a += hw * q * q, bb += hw * q, cc += hw, d += hw * q * w[i], e += hw * w[i];
    }
    const double det = a * cc - bb * bb;
    if (!(det > 1e-12 * a * cc)) return false;
    *s = (cc * d - bb * e) / det;
    *b = (a * e - bb * d) / det;
    return *s > 0.0;
  };
  score((hi - lo) / nmax, lo);
  for (int i = 0; i <= 20; ++i) {
    const float iscale = (float(nmax) - 1.0f + 2.0f * float(i) / 20) / (hi - lo);
    std::vector<uint8_t> c(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) c[j] = uint8_t(std::clamp(static_cast<int>(std::nearbyint(iscale * (w[j] - lo))), 0, nmax));
    double s, b;
    if (fit(c, &s, &b)) score(s, b);
  }
  for (int iter = 0; iter < 4; ++iter) {
    const double before = best;
    double s, b;
    if (!fit(best_codes, &s, &b)) break;
    score(s, b);
    if (!(best < before)) break;
  }
  return best;
}

TEST(ScaleSearch, AffineNeverWorseThanThePreviousGridAndBetterOnAverage) {
  for (int bits : {2, 3, 4}) {
    for (int n : {32, 64}) {
      SCOPED_TRACE("int" + std::to_string(bits) + "_g" + std::to_string(n));
      std::mt19937_64 rng(static_cast<uint64_t>(bits * 100 + n));
      std::vector<float> w, h;
      std::vector<uint8_t> codes(static_cast<size_t>(n));
      double total_grid = 0.0, total_search = 0.0;
      for (int t = 0; t < 1000; ++t) {
        random_group(rng, n, w, h);
        const double grid = grid_affine_error(w, h, bits);
        const AffineGroup p = search_affine_group(w.data(), h.data(), n, bits, codes.data());
        const double search = affine_error(w, h, p, codes);
        // Float32 accumulation inside the search may order near-ties differently.
        ASSERT_LE(search, grid * (1.0 + 1e-5)) << "group " << t;
        total_grid += grid;
        total_search += search;
      }
      EXPECT_LT(total_search, 0.99 * total_grid);
    }
  }
}

TEST(ScaleSearch, AffineZeroAndConstantGroupsStayExact) {
  std::vector<float> h(64);
  for (int i = 0; i < 64; ++i) h[i] = 0.5f + float(i % 5);
  std::vector<uint8_t> codes(64);
  for (float c : {0.0f, 0.75f, -1.5f, 0.0625f}) {
    const std::vector<float> w(64, c);
    const AffineGroup p = search_affine_group(w.data(), h.data(), 64, 4, codes.data());
    EXPECT_EQ(affine_error(w, h, p, codes), 0.0) << "constant " << c;
  }
  // Two levels whose min/max scale is an fp16 (0.0625) stay exact: no later
  // candidate replaces an exact fit.
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i) w[i] = i % 3 == 0 ? 0.25f + 15 * 0.0625f : 0.25f;
  const AffineGroup p = search_affine_group(w.data(), h.data(), 64, 4, codes.data());
  EXPECT_EQ(affine_error(w, h, p, codes), 0.0);
}

// The host's integer sort of the sweep's events gives the heap sort's order
// (the device's) exactly, ties among equal scales included.
TEST(ScaleSearch, HostEventSortEqualsTheHeapSort) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int t = 0; t < 200; ++t) {
    const int n = 1 + int(rng() % (7 * e2m1_ops::kMaxGroup));
    std::vector<e2m1_ops::Event> a(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      const float s = rng() % 4 == 0 ? 0.5f : rng() % 50 == 0 ? 0.0f : std::abs(normal(rng)) * 1e-3f;  // ties
      a[size_t(k)] = {s, int(rng() % 128), k};
    }
    std::vector<e2m1_ops::Event> b = a;
    e2m1_ops::sort_events(a.data(), n);
    e2m1_ops::sort_events_host(b.data(), n);
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(a[size_t(k)].order, b[size_t(k)].order) << "trial " << t << " position " << k;
      ASSERT_EQ(a[size_t(k)].i, b[size_t(k)].i);
    }
  }
}

// Every ISA's batch search (16 groups a vector on AVX-512) returns the scalar
// search's scale, bias and codes bit for bit: rows of mixed magnitudes (down to
// fp16-subnormal scales), constant and zero groups, outliers, zero importance,
// a row count that leaves a partial vector, and a row stride wider than n.
TEST(ScaleSearch, AffineBatchSearchEqualsTheScalarSearchBitForBit) {
  using test::supported_isas;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
  for (int bits : {2, 3, 4, 8}) {
    for (int n : {16, 32, 64, 128}) {
      const int64_t rows = 1029, ld = n + 5;
      std::vector<float> w(static_cast<size_t>(rows * ld)), h(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) h[i] = i % 7 == 3 ? 0.0f : std::pow(10.0f, exponent(rng));
      for (int64_t r = 0; r < rows; ++r) {
        const float magnitude = std::pow(10.0f, float(int(r % 9) - 7));  // 1e-7 .. 10
        for (int i = 0; i < n; ++i)
          w[r * ld + i] = r % 11 == 4 ? 0.0f
                          : r % 11 == 7 ? -0.375f
                                        : normal(rng) * magnitude * (rng() % 16 == 0 ? 8.0f : 1.0f);
      }
      std::vector<float> ref_scales(static_cast<size_t>(rows)), ref_biases(static_cast<size_t>(rows));
      std::vector<uint8_t> ref_codes(static_cast<size_t>(rows * n));
      for (int64_t r = 0; r < rows; ++r) {
        const AffineGroup p = search_affine_group(w.data() + r * ld, h.data(), n, bits, ref_codes.data() + r * n);
        ref_scales[size_t(r)] = p.scale;
        ref_biases[size_t(r)] = p.bias;
      }
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " int" + std::to_string(bits) + " n=" + std::to_string(n));
        std::vector<float> scales(static_cast<size_t>(rows), -1.0f), biases(static_cast<size_t>(rows), -1.0f);
        std::vector<uint8_t> codes(static_cast<size_t>(rows * n), 0xEE);
        quant_kernels(isa).search_affine_groups(w.data(), ld, rows, h.data(), n, bits, scales.data(), biases.data(),
                                                codes.data());
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_EQ(std::bit_cast<uint32_t>(scales[size_t(r)]), std::bit_cast<uint32_t>(ref_scales[size_t(r)]))
              << "row " << r;
          EXPECT_EQ(std::bit_cast<uint32_t>(biases[size_t(r)]), std::bit_cast<uint32_t>(ref_biases[size_t(r)]))
              << "row " << r;
        }
        EXPECT_EQ(codes, ref_codes);
      }
    }
  }
}

}  // namespace
}  // namespace eq::quant
