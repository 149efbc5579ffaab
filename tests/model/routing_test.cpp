// Every router scoring rule against an independent float64 implementation,
// and against the routing the reference implementation recorded for the
// shared models of each router family.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/routing.h"
#include "test_support.h"

namespace eq::model {
namespace {

// The rule written out in float64, plainly: no shared code with routing.cpp.
struct Expected {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

Expected route64(const float* l, int64_t E, int64_t K, const RouterRule& r, const float* bias,
                 const std::vector<bool>& allowed) {
  std::vector<double> value(E), score(E);
  const auto ok = [&](int64_t e) { return allowed.empty() || allowed[e]; };
  if (r.scoring == RouterScoring::kSoftmax) {
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; ++e)
      if (ok(e)) mx = std::max(mx, double(l[e]));
    for (int64_t e = 0; e < E; ++e)
      if (ok(e)) sum += std::exp(double(l[e]) - mx);
    for (int64_t e = 0; e < E; ++e) value[e] = score[e] = ok(e) ? std::exp(double(l[e]) - mx) / sum : 0.0;
  } else if (r.scoring == RouterScoring::kSigmoid) {
    for (int64_t e = 0; e < E; ++e) {
      value[e] = 1.0 / (1.0 + std::exp(-double(l[e])));
      score[e] = value[e] + (bias ? bias[e] : 0.0);
    }
    const int64_t per = E / r.groups;
    std::vector<std::pair<double, int64_t>> groups;
    for (int64_t g = 0; g < r.groups; ++g) {
      std::vector<double> v;
      for (int64_t e = g * per; e < (g + 1) * per; ++e)
        if (ok(e)) v.push_back(score[e]);
      std::sort(v.rbegin(), v.rend());
      const double s = v.empty() ? -INFINITY : v.size() == 1 ? v[0] : v[0] + v[1];
      groups.push_back({-s, g});
    }
    std::sort(groups.begin(), groups.end());
    std::vector<bool> kept(r.groups, false);
    for (int64_t j = 0; j < r.topk_groups; ++j) kept[groups[j].second] = true;
    for (int64_t e = 0; e < E; ++e)
      if (!kept[e / per]) score[e] = 0.0;
  } else {
    for (int64_t e = 0; e < E; ++e) score[e] = l[e];
  }
  std::vector<int64_t> order;
  for (int64_t e = 0; e < E; ++e)
    if (ok(e)) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  Expected x;
  for (int64_t j = 0; j < K; ++j) x.ids.push_back(int32_t(order[j]));
  for (int32_t id : x.ids) x.weights.push_back(value[id]);
  if (r.scoring == RouterScoring::kTopKSoftmax) {
    double sum = 0;
    for (int32_t id : x.ids) sum += std::exp(double(l[id]) - l[x.ids[0]]);
    for (int64_t j = 0; j < K; ++j) x.weights[j] = std::exp(double(l[x.ids[j]]) - l[x.ids[0]]) / sum;
  }
  if (r.renormalize) {
    const double sum = std::accumulate(x.weights.begin(), x.weights.end(), 0.0);
    for (double& w : x.weights) w /= sum;
  }
  for (double& w : x.weights) w *= r.scaling;
  return x;
}

struct Case {
  const char* name;
  RouterRule rule;
  int64_t experts, top_k;
  bool bias;
};

class RouterRules : public ::testing::TestWithParam<Case> {};

TEST_P(RouterRules, MatchFloat64) {
  const Case& c = GetParam();
  std::mt19937 rng(11);
  std::normal_distribution<float> n01(0.0f, 2.0f);
  const int64_t T = 300, E = c.experts, K = c.top_k;
  std::vector<float> logits(T * E), bias(E);
  for (float& v : logits) v = n01(rng);
  for (float& v : bias) v = 0.3f * n01(rng);
  for (bool pruned : {false, true}) {
    std::vector<bool> allowed;
    std::vector<uint8_t> mask;
    if (pruned) {  // every third expert pruned
      for (int64_t e = 0; e < E; ++e) allowed.push_back(e % 3 != 1);
      for (int64_t e = 0; e < E; ++e) mask.push_back(allowed[e]);
    }
    const Routing r = route_tokens(logits.data(), T, E, K, c.rule, c.bias ? bias.data() : nullptr,
                                   pruned ? mask.data() : nullptr);
    for (int64_t t = 0; t < T; ++t) {
      const Expected x = route64(logits.data() + t * E, E, K, c.rule, c.bias ? bias.data() : nullptr, allowed);
      for (int64_t j = 0; j < K; ++j) {
        ASSERT_EQ(r.expert_ids[t * K + j], x.ids[j]) << c.name << " token " << t << " slot " << j;
        ASSERT_NEAR(r.weights[t * K + j], x.weights[j], 2e-6 * std::max(1.0, std::fabs(x.weights[j])))
            << c.name << " token " << t << " slot " << j;
      }
    }
  }
}

RouterRule rule(RouterScoring s, bool renorm, int64_t groups = 1, int64_t topk_groups = 1, float scaling = 1.0f) {
  RouterRule r;
  r.scoring = s;
  r.renormalize = renorm;
  r.groups = groups;
  r.topk_groups = topk_groups;
  r.scaling = scaling;
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    Routing, RouterRules,
    ::testing::Values(Case{"softmax", rule(RouterScoring::kSoftmax, false), 64, 8, false},
                      Case{"softmax_renorm", rule(RouterScoring::kSoftmax, true), 60, 4, false},
                      Case{"sigmoid_grouped", rule(RouterScoring::kSigmoid, true, 8, 4, 2.5f), 64, 8, true},
                      Case{"sigmoid_one_group", rule(RouterScoring::kSigmoid, true, 1, 1, 1.5f), 48, 6, true},
                      Case{"sigmoid_plain", rule(RouterScoring::kSigmoid, false), 30, 3, false},
                      Case{"topk_softmax", rule(RouterScoring::kTopKSoftmax, false), 32, 4, false}),
    [](const auto& info) { return std::string(info.param.name); });

// Compacting the logits to the allowed experts is what pruning meant before
// the mask: both must give the same bits.
TEST(Routing, SoftmaxMaskEqualsCompactedLogitsBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n01;
  const int64_t T = 100, E = 24, K = 4;
  std::vector<float> logits(T * E);
  for (float& v : logits) v = n01(rng);
  std::vector<uint8_t> mask(E);
  std::vector<int32_t> survivors;
  for (int64_t e = 0; e < E; ++e)
    if ((mask[e] = e % 4 != 0)) survivors.push_back(int32_t(e));
  const int64_t S = int64_t(survivors.size());
  std::vector<float> compact(T * S);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < S; ++i) compact[t * S + i] = logits[t * E + survivors[i]];
  const RouterRule r = rule(RouterScoring::kSoftmax, true);
  const Routing masked = route_tokens(logits.data(), T, E, K, r, nullptr, mask.data());
  const Routing small = route_tokens(compact.data(), T, S, K, r);
  for (int64_t s = 0; s < T * K; ++s) {
    EXPECT_EQ(masked.expert_ids[s], survivors[small.expert_ids[s]]);
    EXPECT_EQ(masked.weights[s], small.weights[s]);
  }
}

// Dropped groups score 0.0, not -inf: when every kept expert's biased score
// is negative, an expert of a dropped group is chosen before them.
TEST(Routing, DroppedGroupsScoreZeroNotMinusInfinity) {
  const int64_t E = 4, K = 2;
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};  // s = 0.5 each
  const std::vector<float> bias = {-0.6f, -0.7f, -0.9f, -0.9f};  // c: -0.1, -0.2 | -0.4, -0.4
  const Routing r = route_tokens(logits.data(), 1, E, K, rule(RouterScoring::kSigmoid, false, 2, 1), bias.data());
  // Group 1 (experts 2, 3) is dropped; its c become 0.0, above the kept -0.1 and -0.2.
  EXPECT_EQ(r.expert_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(r.weights, (std::vector<float>{0.5f, 0.5f}));
}

// The routing each shared model's reference recorded (router_logits.i ->
// topk_ids.i / topk_weights.i), one model per router family.
struct SharedRouter {
  const char* model;
  RouterRule rule;
  bool correction_bias;
};

TEST(Routing, MatchesTheSharedReferences) {
  EQ_REQUIRE_SHARED();
  const SharedRouter models[] = {
      {"deepseek_v3-small", rule(RouterScoring::kSigmoid, true, 8, 4, 2.5f), true},
      {"glm4_moe-small", rule(RouterScoring::kSigmoid, true, 1, 1, 2.5f), true},
      {"gpt_oss-small", rule(RouterScoring::kTopKSoftmax, false), false},
      {"qwen3_next-small", rule(RouterScoring::kSoftmax, true), false},
      {"qwen3_5_moe-small", rule(RouterScoring::kSoftmax, true), false},
  };
  for (const SharedRouter& m : models) {
    const auto dir = test::shared_dir() / "models" / m.model;
    if (!std::filesystem::exists(dir)) {
      std::printf("  %s: not in ../shared, skipped\n", m.model);
      continue;
    }
    const auto ref = io::SafetensorsFile::open((dir / "reference" / "reference.safetensors").string());
    int layers = 0;
    for (int l = 0; l < 64; ++l) {
      const io::TensorInfo* logits_t = ref->find("router_logits." + std::to_string(l));
      if (!logits_t) continue;
      const io::TensorInfo* ids_t = ref->find("topk_ids." + std::to_string(l));
      const io::TensorInfo* w_t = ref->find("topk_weights." + std::to_string(l));
      ASSERT_TRUE(ids_t && w_t) << m.model << " layer " << l;
      const std::vector<float> logits = ref->view(*logits_t).to_f32();
      const std::vector<float> want_w = ref->view(*w_t).to_f32();
      const auto ids_view = ref->view(*ids_t);
      const int64_t T = logits_t->shape[0], E = logits_t->shape[1], K = ids_t->shape[1];
      std::vector<float> bias;
      if (m.correction_bias) {
        const std::string name = "model.layers." + std::to_string(l) + ".mlp.gate.e_score_correction_bias";
        const auto weights = io::SafetensorsFile::open((dir / "model.safetensors").string());
        const io::TensorInfo* b = weights->find(name);
        ASSERT_TRUE(b) << m.model << ": " << name;
        bias = weights->view(*b).to_f32();
      }
      const Routing r = route_tokens(logits.data(), T, E, K, m.rule, bias.empty() ? nullptr : bias.data());
      const int32_t* want_ids = reinterpret_cast<const int32_t*>(ids_view.data);
      int64_t differ = 0;
      for (int64_t t = 0; t < T; ++t) {
        // The reference lists the chosen experts in descending score, as we do.
        for (int64_t j = 0; j < K; ++j) {
          if (r.expert_ids[t * K + j] != want_ids[t * K + j]) {
            ++differ;
            break;
          }
          EXPECT_NEAR(r.weights[t * K + j], want_w[t * K + j], 1e-6 * std::max(1.0f, std::fabs(want_w[t * K + j])))
              << m.model << " layer " << l << " token " << t;
        }
      }
      EXPECT_EQ(differ, 0) << m.model << " layer " << l << ": tokens routed differently";
      ++layers;
    }
    EXPECT_GT(layers, 0) << m.model;
    std::printf("  %s: %d MoE layers routed as the reference\n", m.model, layers);
  }
}

}  // namespace
}  // namespace eq::model
