// The profile's expert evaluation (routing saliency, activation energies and
// sensitivity all read it) carries the expert's own shape: gate/up/down biases
// and the clamped SwiGLU, against a float64 loop; without biases and with
// plain SwiGLU it is silu(gate) * up as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "profile/expert_output.h"

namespace eq::profile {
namespace {

model::Tensor32Ptr random_tensor(std::vector<int64_t> shape, std::mt19937& rng, float sigma) {
  auto t = std::make_shared<model::Tensor32>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t->shape = std::move(shape);
  t->data.resize(n);
  std::normal_distribution<float> dist(0.0f, sigma);
  for (auto& v : t->data) v = dist(rng);
  return t;
}

double silu_like(const model::Activation& act, double g, double u) {
  if (act.kind == model::ActivationKind::kSwiGlu) return g / (1.0 + std::exp(-g)) * u;
  g = std::min(g, double(act.limit));
  u = std::clamp(u, -double(act.limit), double(act.limit));
  return (u + 1.0) * g / (1.0 + std::exp(-double(act.alpha) * g));
}

void check(bool biases, model::ActivationKind kind) {
  const int64_t H = 24, I = 10, rows = 7;
  std::mt19937 rng(5);
  model::MlpWeights w;
  w.intermediate = I;
  // Wide enough that some gate and up values pass the clamp limit.
  w.gate = random_tensor({I, H}, rng, 1.5f);
  w.up = random_tensor({I, H}, rng, 1.5f);
  w.down = random_tensor({H, I}, rng, 0.3f);
  if (biases) {
    w.gate_bias = random_tensor({I}, rng, 2.0f);
    w.up_bias = random_tensor({I}, rng, 2.0f);
    w.down_bias = random_tensor({H}, rng, 0.5f);
  }
  w.act = {.kind = kind, .alpha = 1.702f, .limit = 7.0f};
  const model::Tensor32Ptr x = random_tensor({rows, H}, rng, 1.0f);
  const ExpertOutput out = expert_output(w, x->data.data(), rows, H);
  int clamped = 0;
  double max_mid = 0, max_y = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> mid(I);
    for (int64_t i = 0; i < I; ++i) {
      double g = biases ? w.gate_bias->data[i] : 0.0, u = biases ? w.up_bias->data[i] : 0.0;
      for (int64_t h = 0; h < H; ++h) {
        g += double(w.gate->data[i * H + h]) * x->data[r * H + h];
        u += double(w.up->data[i * H + h]) * x->data[r * H + h];
      }
      clamped += g > w.act.limit || std::abs(u) > w.act.limit;
      mid[i] = silu_like(w.act, g, u);
      max_mid = std::max(max_mid, std::abs(mid[i] - out.mid(r, i)) / (1.0 + std::abs(mid[i])));
    }
    for (int64_t h = 0; h < H; ++h) {
      double y = biases ? w.down_bias->data[h] : 0.0;
      for (int64_t i = 0; i < I; ++i) y += double(w.down->data[h * I + i]) * mid[i];
      max_y = std::max(max_y, std::abs(y - out.y(r, h)) / (1.0 + std::abs(y)));
    }
  }
  EXPECT_LT(max_mid, 1e-5);
  EXPECT_LT(max_y, 1e-5);
  if (kind == model::ActivationKind::kSwiGluClamped) {
    EXPECT_GT(clamped, 0) << "no value reached the clamp";
  }
}

TEST(ExpertOutput, BiasesAndClampedSwiGluMatchFloat64) { check(true, model::ActivationKind::kSwiGluClamped); }
TEST(ExpertOutput, PlainSwiGluMatchesFloat64) { check(false, model::ActivationKind::kSwiGlu); }

}  // namespace
}  // namespace eq::profile
