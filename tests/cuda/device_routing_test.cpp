// The router on the GPU (exec/cuda/device_routing.h) against the host's
// model::route_tokens on the same logits: every rule (softmax, with pruned
// experts masked, renormalized or not; sigmoid with a correction bias and
// group limits; top-k then softmax), logits on a coarse grid so that exact
// ties are common. The ids must be equal; the weights within 4 ulp (an
// exponential of the GPU's may differ by one ulp from the C library's, and
// the weights divide by a sum of them). ctest label `cuda`; builds without
// EQ_CUDA and machines without a GPU skip with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_routing.h"
#include "model/routing.h"

namespace eq::exec::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    const std::string why = unavailable_reason();                                \
    if (!why.empty()) GTEST_SKIP() << "no GPU for the router kernel: " << why;   \
  } while (0)

struct Case {
  std::string name;
  model::RouterRule rule;
  int64_t experts = 0, top_k = 0;
  bool bias = false, pruned = false;
};

std::vector<Case> cases() {
  using S = model::RouterScoring;
  std::vector<Case> c;
  for (int64_t E : {8, 60, 128, 256, 512})
    for (int64_t k : {1, 2, 8}) {
      if (k > E / 2) continue;
      const std::string at = " E=" + std::to_string(E) + " k=" + std::to_string(k);
      c.push_back({"softmax" + at, {S::kSoftmax, false, 1, 1, 1.0f}, E, k});
      c.push_back({"softmax renormalized, pruned" + at, {S::kSoftmax, true, 1, 1, 1.0f}, E, k, false, true});
      c.push_back({"top-k softmax" + at, {S::kTopKSoftmax, false, 1, 1, 1.0f}, E, k});
      c.push_back({"top-k softmax, pruned, scaled" + at, {S::kTopKSoftmax, true, 1, 1, 2.5f}, E, k, false, true});
      c.push_back({"sigmoid, bias" + at, {S::kSigmoid, true, 1, 1, 1.0f}, E, k, true});
      if (E % 8 == 0 && E / 8 >= 2)
        c.push_back({"sigmoid, 8 groups of which 4, bias, scaled, pruned" + at, {S::kSigmoid, true, 8, 4, 2.5f}, E, k,
                     true, true});
    }
  // The kernel's largest sizes: 1,024 experts (its shared memory), top_k 32,
  // and more groups than a warp has lanes.
  c.push_back({"softmax E=1024 k=32", {S::kSoftmax, true, 1, 1, 1.0f}, 1024, 32, false, true});
  c.push_back({"top-k softmax E=1024 k=32", {S::kTopKSoftmax, false, 1, 1, 1.0f}, 1024, 32});
  c.push_back({"sigmoid, 64 groups of which 20, E=1024 k=32", {S::kSigmoid, true, 64, 20, 2.5f}, 1024, 32, true,
               true});
  return c;
}

TEST(DeviceRouting, MatchesRouteTokens) {
  SKIP_WITHOUT_GPU();
  const int64_t tokens = 7;
  int checked = 0;
  for (const Case& c : cases()) {
    const int64_t E = c.experts, K = c.top_k;
    std::mt19937_64 rng(static_cast<uint64_t>(E * 131 + K * 7 + c.name.size()));
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(static_cast<size_t>(tokens * E)), bias(static_cast<size_t>(E));
    for (float& v : logits) v = std::round(normal(rng) * 4.0f) / 4.0f;  // a coarse grid: exact ties
    for (float& v : bias) v = std::round(normal(rng) * 8.0f) / 64.0f;
    std::vector<uint8_t> allowed(static_cast<size_t>(E), 1);
    if (c.pruned)
      for (int64_t e = 1; e < E; e += 3) allowed[static_cast<size_t>(e)] = 0;
    const float* b = c.bias ? bias.data() : nullptr;
    const uint8_t* a = c.pruned ? allowed.data() : nullptr;
    const model::Routing host = model::route_tokens(logits.data(), tokens, E, K, c.rule, b, a);

    const DeviceRouter router = make_device_router(c.rule, E, K, b, a);
    DeviceBuffer dl(logits.size() * sizeof(float)), dids(static_cast<size_t>(tokens * K) * sizeof(int32_t)),
        dw(static_cast<size_t>(tokens * K) * sizeof(float));
    dl.upload(logits.data(), logits.size() * sizeof(float));
    route_on_device(router, dl.floats(), tokens, static_cast<int32_t*>(dids.data()), dw.floats());
    synchronize();
    std::vector<int32_t> ids(static_cast<size_t>(tokens * K));
    std::vector<float> w(ids.size());
    dids.download(ids.data(), ids.size() * sizeof(int32_t));
    dw.download(w.data(), w.size() * sizeof(float));
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(ids[i], host.expert_ids[i]) << c.name << ": token " << i / K << " choice " << i % K;
      const float h = host.weights[i];
      EXPECT_NEAR(w[i], h, 4 * std::fabs(h) * 0x1p-23f + 1e-30f) << c.name << ": token " << i / K << " choice "
                                                                  << i % K;
      if (c.pruned) {
        EXPECT_EQ(allowed[static_cast<size_t>(ids[i])], 1) << c.name;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 82);
}

TEST(DeviceRouting, RefusesWhatRouteTokensRefuses) {
  SKIP_WITHOUT_GPU();
  const model::RouterRule softmax;
  EXPECT_THROW(make_device_router(softmax, 8, 9, nullptr, nullptr), eq::Error);
  model::RouterRule groups{model::RouterScoring::kSigmoid, true, 3, 1, 1.0f};
  EXPECT_THROW(make_device_router(groups, 8, 2, nullptr, nullptr), eq::Error);  // 3 groups of 8 experts
  const std::vector<uint8_t> none(8, 0);
  EXPECT_THROW(make_device_router(softmax, 8, 2, nullptr, none.data()), eq::Error);  // no expert allowed
  EXPECT_THROW(make_device_router(softmax, kMaxDeviceRouterExperts + 8, 2, nullptr, nullptr), eq::Error);
}

// Logits of -inf leave fewer than top_k experts to choose (the host throws):
// the rest are the lowest allowed ids not chosen, at weight 0.
TEST(DeviceRouting, NothingLeftTakesLowestIdsAtWeightZero) {
  SKIP_WITHOUT_GPU();
  const model::RouterRule rule{model::RouterScoring::kTopKSoftmax, false, 1, 1, 1.0f};
  std::vector<float> logits(8, -INFINITY);
  logits[5] = 1.0f;
  const DeviceRouter router = make_device_router(rule, 8, 3, nullptr, nullptr);
  DeviceBuffer dl(8 * sizeof(float)), dids(3 * sizeof(int32_t)), dw(3 * sizeof(float));
  dl.upload(logits.data(), 8 * sizeof(float));
  route_on_device(router, dl.floats(), 1, static_cast<int32_t*>(dids.data()), dw.floats());
  synchronize();
  int32_t ids[3];
  float w[3];
  dids.download(ids, sizeof ids);
  dw.download(w, sizeof w);
  EXPECT_EQ(ids[0], 5);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(ids[1], 0);
  EXPECT_EQ(ids[2], 1);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[2], 0.0f);
}

}  // namespace
}  // namespace eq::exec::cuda
