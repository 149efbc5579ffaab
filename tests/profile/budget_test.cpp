// Bit-budget allocation on qwen3moe-small (shared), profiled from the
// reference captures (--hidden: 512 tokens, so the test stays fast): the
// achieved average bits land within 0.05 of the target, and the predicted
// error beats every uniform assignment of about the same size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "profile/bit_budget.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

const Profile& small_profile() {
  static const Profile p = [] {
    ProfileRequest r;
    r.model_path = (test::shared_dir() / "models/qwen3moe-small").string();
    r.source = SourceKind::kHidden;
    r.input_path = (test::shared_dir() / "models/qwen3moe-small/reference/reference.safetensors").string();
    r.policy = default_policy();
    r.policy.max_samples = 64;
    // The allocation is under test, not the proxy fit (tests/profile/proxy_fit_test.cpp) nor fp4's scale search:
    // copied proxies and nl4_g32 as the standard format (fp4_g32 not measured) keep each of the three processes of
    // this suite from its slowest quantizers.
    r.policy.proxy_calibration_experts = 0;
    r.policy.class_format[1] = "nl4_g32";
    r.policy.candidates.erase(std::find(r.policy.candidates.begin(), r.policy.candidates.end(), "fp4_g32"));
    r.min_tokens = 8;
    return run_profile(r);
  }();
  return p;
}

void check_budget(double target) {
  const Profile& p = small_profile();
  const model::ModelConfig c = p.dims();
  Classification cls = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c, BitBudget{target, 0});
  summarize(cls, p.stats, p.sensitivity, p.policy, c);
  EXPECT_NEAR(cls.avg_bits, target, 0.05);
  EXPECT_LE(cls.avg_bits, target + 1e-9);  // a budget is a ceiling
  // Uniform assignments: one no larger than the allocation must predict more
  // error; one somewhat larger (there is rarely a format of exactly B bits) is
  // compared with the allocation at exactly its size.
  int compared = 0;
  for (const auto& f : p.sensitivity.formats) {
    Classification u = cls;
    for (auto& row : u.layers)
      for (auto& d : row) d = {class_of_format(p.policy, f), f, "uniform"};
    summarize(u, p.stats, p.sensitivity, p.policy, c);
    if (u.avg_bits > target + 0.5) continue;
    Classification same = cls;
    if (u.avg_bits > cls.avg_bits + 0.05) {
      same = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c, BitBudget{0, u.expert_bytes});
      summarize(same, p.stats, p.sensitivity, p.policy, c);
      EXPECT_LE(same.expert_bytes, u.expert_bytes);
    }
    ++compared;
    std::printf("target %.1f: uniform %-9s %.3f bits predicts %.5f; allocation %.3f bits predicts %.5f\n", target,
                f.c_str(), u.avg_bits, u.predicted_error, same.avg_bits, same.predicted_error);
    EXPECT_LT(same.predicted_error, u.predicted_error) << "uniform " << f;
  }
  EXPECT_GE(compared, 2);
  // Guard rails: never more pruned than allowed, never an under-covered expert pruned.
  const auto metrics = expert_metrics(p.stats, p.policy);
  for (size_t li = 0; li < cls.layers.size(); ++li) {
    int64_t pruned = 0;
    for (size_t e = 0; e < cls.layers[li].size(); ++e)
      if (cls.layers[li][e].format.empty()) {
        ++pruned;
        EXPECT_FALSE(metrics[li][e].under_covered);
        EXPECT_LE(metrics[li][e].share, p.policy.max_pruned_usage_share);
      }
    EXPECT_LE(pruned, int64_t(p.policy.max_pruned_fraction * double(p.stats.num_experts)));
  }
}

void check_three_four_and_five_bits() {
  for (double target : {3.0, 4.0}) {
    SCOPED_TRACE(target);
    check_budget(target);
  }
  // A budget is reached whatever the critical guard rail says: it bounds
  // threshold classification only (with the cap, 5.0 stopped at 4.854 bits).
  SCOPED_TRACE(5.0);
  check_budget(5.0);
  const Profile& p = small_profile();
  Classification cls = allocate_bit_budget(p.stats, p.sensitivity, p.policy, p.dims(), BitBudget{5.0, 0});
  int64_t above = 0, max_in_a_layer = 0;
  for (const auto& row : cls.layers) {
    int64_t n = 0;
    for (const auto& d : row) n += d.cls == plan::ExpertClass::kCritical;
    above += n;
    max_in_a_layer = std::max(max_in_a_layer, n);
  }
  EXPECT_GT(max_in_a_layer, int64_t(p.policy.max_critical_fraction * double(p.stats.num_experts))) << above;
}

// The pruning rails never change a budget silently: when the same budget
// without them prunes experts the rails keep, a note names the rail and the
// two allocations' pruned counts; an allocation without rails has no note.
void check_binding_rails_are_reported_with_their_cost() {
  const Profile& p = small_profile();
  const model::ModelConfig c = p.dims();
  Policy open = p.policy;
  open.max_pruned_fraction = 1.0;
  open.max_pruned_usage_share = 1.0;
  open.min_kept_experts = 0;
  Policy tight = p.policy;
  tight.max_pruned_fraction = 0.0;  // no pruning at all
  int noted = 0;
  for (double target : {2.5, 3.0, 3.5}) {
    for (const Policy* pol : {&p.policy, static_cast<const Policy*>(&tight)}) {
      Classification railed = allocate_bit_budget(p.stats, p.sensitivity, *pol, c, BitBudget{target, 0});
      Classification free = allocate_bit_budget(p.stats, p.sensitivity, open, c, BitBudget{target, 0});
      EXPECT_TRUE(free.budget_notes.empty()) << free.budget_notes.front();
      int64_t pruned_railed = 0, pruned_free = 0;
      for (size_t li = 0; li < railed.layers.size(); ++li)
        for (size_t e = 0; e < railed.layers[li].size(); ++e) {
          pruned_railed += railed.layers[li][e].format.empty();
          pruned_free += free.layers[li][e].format.empty();
        }
      if (pol == &tight) {
        EXPECT_EQ(pruned_railed, 0);
        if (pruned_free > 0) {
          EXPECT_EQ(railed.budget_notes.size(), 1u) << target;
        }
      }
      if (railed.budget_notes.empty()) continue;
      ++noted;
      ASSERT_EQ(railed.budget_notes.size(), 1u);
      const std::string& note = railed.budget_notes.front();
      EXPECT_NE(note.find("% above the "), std::string::npos) << note;
      EXPECT_NE(note.find(std::to_string(pruned_railed) + " experts pruned where " + std::to_string(pruned_free) +
                          " would be without them"),
                std::string::npos)
          << note;
      if (pol == &tight) {
        EXPECT_NE(note.find("max_pruned_fraction"), std::string::npos) << note;
      }
    }
  }
  EXPECT_GT(noted, 0) << "no budget on this profile was bound by a pruning rail";
}

// One test, so one process: ctest runs every test in a process of its own,
// and the profile the checks share takes a minute and a half (more under the
// sanitizers).
TEST(BitBudget, OnQwen3MoeSmall) {
  EQ_REQUIRE_SHARED();
  {
    SCOPED_TRACE("3, 4 and 5 bits");
    check_three_four_and_five_bits();
  }
  {
    SCOPED_TRACE("binding guard rails are reported with their cost");
    check_binding_rails_are_reported_with_their_cost();
  }
  SCOPED_TRACE("an unreachable target is an error");
  const Profile& p = small_profile();
  EXPECT_THROW(allocate_bit_budget(p.stats, p.sensitivity, p.policy, p.dims(), BitBudget{0.5, 0}), Error);
}

}  // namespace
}  // namespace eq::profile
