// The reference MLP (mlp_forward, mlp_forward_serial) with every expert shape
// MlpWeights describes: SwiGLU or the clamped SwiGLU, with or without the
// gate, up and down biases, against the same MLP in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "model/mlp.h"

namespace eq::model {
namespace {

Tensor32Ptr tensor(std::vector<int64_t> shape, float sigma, uint32_t seed) {
  auto t = std::make_shared<Tensor32>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t->shape = std::move(shape);
  t->data.resize(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  for (float& v : t->data) v = d(rng);
  return t;
}

double act_reference(const Activation& act, double g, double u) {
  if (act.kind == ActivationKind::kSwiGlu) return g / (1.0 + std::exp(-g)) * u;
  g = std::min<double>(g, act.limit);
  u = std::clamp<double>(u, -act.limit, act.limit);
  return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(act.alpha) * g));
}

std::vector<double> reference(const MlpWeights& w, const std::vector<float>& x, int64_t n, int64_t H) {
  const int64_t I = w.intermediate;
  std::vector<double> y(static_cast<size_t>(n * H)), h(static_cast<size_t>(I));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < I; ++i) {
      double g = w.gate_bias ? w.gate_bias->data[i] : 0.0, u = w.up_bias ? w.up_bias->data[i] : 0.0;
      for (int64_t k = 0; k < H; ++k) {
        g += static_cast<double>(w.gate->data[i * H + k]) * x[r * H + k];
        u += static_cast<double>(w.up->data[i * H + k]) * x[r * H + k];
      }
      h[i] = act_reference(w.act, g, u);
    }
    for (int64_t o = 0; o < H; ++o) {
      double s = w.down_bias ? w.down_bias->data[o] : 0.0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(w.down->data[o * I + i]) * h[i];
      y[r * H + o] = s;
    }
  }
  return y;
}

TEST(Mlp, BiasesAndActivationsMatchFloat64) {
  const int64_t H = 40, I = 72;
  const Activation clamped{.kind = ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};
  for (const Activation& act : {Activation{}, clamped})
    for (bool biases : {false, true})
      for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{70}}) {  // 70: more rows than linear's few-row path
        SCOPED_TRACE((act == Activation{} ? "swiglu" : "clamped") + std::string(biases ? " biases" : "") +
                     " rows " + std::to_string(n));
        MlpWeights w;
        w.intermediate = I;
        // Gate and up of size ~ 0.4 * sqrt(H) * 2.5 ≈ 6: the clamp at 7 is reached.
        w.gate = tensor({I, H}, 0.4f, 1);
        w.up = tensor({I, H}, 0.4f, 2);
        w.down = tensor({H, I}, 0.1f, 3);
        if (biases) {
          w.gate_bias = tensor({I}, 2.0f, 4);
          w.up_bias = tensor({I}, 2.0f, 5);
          w.down_bias = tensor({H}, 1.0f, 6);
        }
        w.act = act;
        std::vector<float> x(static_cast<size_t>(n * H));
        std::mt19937 rng(7);
        std::normal_distribution<float> d(0.0f, 2.5f);
        for (float& v : x) v = d(rng);
        const std::vector<double> want = reference(w, x, n, H);
        double scale = 0;
        for (double v : want) scale = std::max(scale, std::abs(v));
        std::vector<float> y(x.size(), NAN), ys(x.size(), NAN);
        mlp_forward(w, x.data(), n, H, y.data());
        FloatBuffer scratch;
        mlp_forward_serial(w, x.data(), n, H, ys.data(), scratch);
        double worst = 0, worst_serial = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          worst = std::max(worst, std::abs(y[i] - want[i]));
          worst_serial = std::max(worst_serial, std::abs(ys[i] - want[i]));
        }
        EXPECT_LE(worst, 2e-5 * scale + 1e-7) << "max |y| " << scale;
        EXPECT_LE(worst_serial, 2e-5 * scale + 1e-7) << "max |y| " << scale;
        if (act == clamped) {  // the inputs really reach the clamp
          int beyond = 0;
          for (int64_t i = 0; i < n * I; ++i) {
            double g = biases ? w.gate_bias->data[i % I] : 0.0;
            for (int64_t k = 0; k < H; ++k) g += double{w.gate->data[(i % I) * H + k]} * x[(i / I) * H + k];
            beyond += g > act.limit;
          }
          if (n == 70) {
            EXPECT_GT(beyond, 0);
          }
        }
      }
}

}  // namespace
}  // namespace eq::model
