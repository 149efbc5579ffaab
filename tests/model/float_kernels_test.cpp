// The elementwise float kernels (the gated activations, softmax): every element's value must
// depend only on its inputs — not on the address of the array nor on where a
// caller's chunk starts — on every ISA, because the executor's dispatch
// strategies place the same row at different addresses and must agree bit for
// bit (exec/decode_mlp_test.cpp). Also checked against float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "model/kernels/float_kernels.h"

namespace eq::model::kernels {
namespace {

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(detected_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// act(g, u) in float64 from the definitions (model/activation.h).
double glu_reference(const Activation& act, double g, double u) {
  if (act.kind == ActivationKind::kSwiGlu) return g / (1.0 + std::exp(-g)) * u;
  const double limit = act.limit;
  g = std::min(g, limit);
  u = std::clamp(u, -limit, limit);
  return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(act.alpha) * g));
}

const Activation kClamped{.kind = ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};

// Gate and up spread past ±limit (scale 6: about a quarter beyond 7), and
// fixed points at and around the clamp edges.
std::pair<std::vector<float>, std::vector<float>> glu_inputs(int64_t n) {
  std::vector<float> g = random_values(static_cast<size_t>(n), 6.0f, 1), u = random_values(static_cast<size_t>(n), 6.0f, 2);
  const float edges[][2] = {{-20.0f, 3.0f}, {-7.5f, -9.0f}, {-7.0f, 7.0f}, {6.999f, 7.001f}, {7.0f, -7.0f},
                            {9.0f, 12.0f},  {30.0f, -30.0f}, {0.0f, -1.0f}, {-0.5f, 0.25f}};
  for (size_t i = 0; i < std::size(edges); ++i) g[i * 11] = edges[i][0], u[i * 11] = edges[i][1];
  return {g, u};
}

TEST(FloatKernels, GluMatchesFloat64AndDependsOnlyOnValues) {
  const int64_t n = 301;  // not a multiple of any packet
  const auto [g, u] = glu_inputs(n);
  for (const Activation& act : {Activation{}, kClamped}) {
    for (Isa isa : isas()) {
      set_active_isa_for_testing(isa);
      SCOPED_TRACE(std::string(isa_name(isa)) + (act == Activation{} ? " swiglu" : " clamped"));
      std::vector<float> whole(n);
      glu(act, g.data(), u.data(), n, whole.data());
      for (int64_t i = 0; i < n; ++i) {
        const double want = glu_reference(act, g[i], u[i]);
        ASSERT_NEAR(whole[i], want, 2e-6 * (std::fabs(want) + 1e-3)) << i << " gate " << g[i] << " up " << u[i];
      }
      // Shifted copies (every alignment mod 64 bytes) and arbitrary chunks.
      for (int shift = 1; shift < 16; ++shift) {
        std::vector<float> gs(n + shift), us(n + shift), out(n + shift);
        std::copy(g.begin(), g.end(), gs.begin() + shift);
        std::copy(u.begin(), u.end(), us.begin() + shift);
        for (int64_t b = 0; b < n; b += 7 * shift)
          glu(act, gs.data() + shift + b, us.data() + shift + b, std::min<int64_t>(7 * shift, n - b),
              out.data() + shift + b);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[shift + i], whole[i]) << "shift " << shift << " i " << i;
      }
    }
  }
  set_active_isa_for_testing(detected_isa());
}

// The clamp: gate from above only, up from both sides, alpha inside the sigmoid.
TEST(FloatKernels, ClampedSwiGluEdges) {
  for (Isa isa : isas()) {
    set_active_isa_for_testing(isa);
    auto one = [](float gate, float up) {
      float out;
      glu(kClamped, &gate, &up, 1, &out);
      return static_cast<double>(out);
    };
    auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    // gate 9 -> 7, up 12 -> 7: (7 + 1) * 7 * sigmoid(1.702 * 7).
    const double top = 8.0 * 7.0 * sig(1.702 * 7.0);
    EXPECT_NEAR(one(9.0f, 12.0f), top, 2e-6 * top) << isa_name(isa);
    // up -30 -> -7: (-6) * 2 * sigmoid(3.404).
    const double bottom = -6.0 * 2.0 * sig(3.404);
    EXPECT_NEAR(one(2.0f, -30.0f), bottom, 2e-6 * std::fabs(bottom)) << isa_name(isa);
    // A gate far below -limit is not clamped: ~1e-24, where a clamp to -7
    // would give ~1e-4. (alpha * gate rounded to float moves exp by ~4e-6.)
    const double low = one(-35.0f, 1.0f);
    EXPECT_LT(std::fabs(low), 1e-20) << isa_name(isa);
    EXPECT_NEAR(low, 2.0 * -35.0 * sig(-1.702 * 35.0), 1e-4 * std::fabs(low)) << isa_name(isa);
    // up = -1 zeroes the output whatever the gate.
    EXPECT_EQ(one(3.0f, -1.0f), 0.0) << isa_name(isa);
    // Another alpha and limit are honoured.
    const Activation other{.kind = ActivationKind::kSwiGluClamped, .alpha = 1.0f, .limit = 2.0f};
    float gate = 5.0f, up = 1.5f, out = 0;
    glu(other, &gate, &up, 1, &out);
    EXPECT_NEAR(out, 2.5 * 2.0 * sig(2.0), 1e-6) << isa_name(isa);
  }
  set_active_isa_for_testing(detected_isa());
}

// glu_rows: column biases added before the activation (the same bits as glu
// on the summed inputs), float64 agreement, columns past `width` untouched,
// and without biases exactly glu's bits whatever the tile's shape.
TEST(FloatKernels, GluRowsAddsColumnBiases) {
  const int64_t rows = 5, width = 150, ld = 160;
  const std::vector<float> g = random_values(rows * ld, 5.0f, 4), u = random_values(rows * ld, 5.0f, 5);
  const std::vector<float> gb = random_values(width, 2.0f, 6), ub = random_values(width, 2.0f, 7);
  for (const Activation& act : {Activation{}, kClamped}) {
    for (Isa isa : isas()) {
      set_active_isa_for_testing(isa);
      SCOPED_TRACE(std::string(isa_name(isa)) + (act == Activation{} ? " swiglu" : " clamped"));
      std::vector<float> out(rows * ld, -123.0f);
      glu_rows(act, g.data(), u.data(), rows, width, ld, gb.data(), ub.data(), out.data());
      std::vector<float> plain(rows * ld, -123.0f);
      glu_rows(act, g.data(), u.data(), rows, width, ld, nullptr, nullptr, plain.data());
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> gs(width), us(width), want(width), unbiased(width);
        for (int64_t c = 0; c < width; ++c) gs[c] = g[r * ld + c] + gb[c], us[c] = u[r * ld + c] + ub[c];
        glu(act, gs.data(), us.data(), width, want.data());
        glu(act, g.data() + r * ld, u.data() + r * ld, width, unbiased.data());
        for (int64_t c = 0; c < width; ++c) {
          ASSERT_EQ(out[r * ld + c], want[c]) << r << " " << c;
          ASSERT_EQ(plain[r * ld + c], unbiased[c]) << r << " " << c;
          const double ref = glu_reference(act, double{g[r * ld + c]} + gb[c], double{u[r * ld + c]} + ub[c]);
          ASSERT_NEAR(out[r * ld + c], ref, 4e-6 * (std::fabs(ref) + 1e-3)) << r << " " << c;
        }
        for (int64_t c = width; c < ld; ++c) ASSERT_EQ(out[r * ld + c], -123.0f) << r << " " << c;
      }
      // Only the gate bias (the up input as it is), in place into gate.
      std::vector<float> in_place = g;
      glu_rows(act, in_place.data(), u.data(), rows, width, ld, gb.data(), nullptr, in_place.data());
      for (int64_t c = 0; c < width; ++c) {
        const float gs = g[ld + c] + gb[c];
        float want;
        glu(act, &gs, &u[ld + c], 1, &want);
        ASSERT_EQ(in_place[ld + c], want) << c;
      }
    }
  }
  set_active_isa_for_testing(detected_isa());
}

TEST(FloatKernels, SoftmaxDependsOnlyOnValues) {
  const int64_t n = 157;
  const std::vector<float> x = random_values(n, 3.0f, 3);
  double max = x[0], sum = 0;
  for (float v : x) max = std::max<double>(max, v);
  for (float v : x) sum += std::exp(v - max);
  for (Isa isa : isas()) {
    set_active_isa_for_testing(isa);
    std::vector<float> ref = x;
    softmax_row(ref.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(ref[i], std::exp(x[i] - max) / sum, 2e-7) << i;
    for (int shift = 1; shift < 16; ++shift) {
      std::vector<float> buf(n + shift);
      std::copy(x.begin(), x.end(), buf.begin() + shift);
      softmax_row(buf.data() + shift, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(buf[shift + i], ref[i]) << "shift " << shift;
    }
  }
  set_active_isa_for_testing(detected_isa());
}

}  // namespace
}  // namespace eq::model::kernels
