// The policy's default budget: a profile given no --target-bits/--target-size
// is allocated at Policy::default_target_bits (4.5 in the default policy),
// `thresholds` keeps threshold classification, a default below what the
// guard rails allow is allocated at that minimum (an explicit budget there is
// an error), and a profile without sensitivity falls back to thresholds.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "profile/bit_budget.h"
#include "profile/profile.h"
#include "profile/run.h"
#include "support/random_moe.h"
#include "support/small_profile_request.h"
#include "test_support.h"

namespace eq::profile {
namespace {

// A tiny random model (2 layers x 8 experts of 64 x 64), profiled once with
// the default policy on 256 calibration tokens.
const Profile& tiny_profile() {
  static const Profile p = test::default_policy_profile("default_budget", 8);
  return p;
}

bool has_note(const Classification& c, const std::string& text) {
  for (const auto& n : c.budget_notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

TEST(DefaultBudget, PlainProfileIsAllocatedAtThePolicyDefault) {
  const Profile& p = tiny_profile();
  EXPECT_EQ(p.classification.mode, "budget");
  EXPECT_NEAR(p.classification.target_bits, 4.5, 1e-3);
  EXPECT_LE(p.classification.avg_bits, 4.5 + 1e-9);
  EXPECT_GT(p.classification.avg_bits, 4.0);  // within a step of the target on 16 experts
  EXPECT_TRUE(has_note(p.classification, "the policy's default of 4.5 bits"));
}

TEST(DefaultBudget, ThresholdsFlagAndExplicitBudgetsOverrideIt) {
  Profile p = tiny_profile();
  reclassify(p, 0, 0, /*thresholds=*/true);
  EXPECT_EQ(p.classification.mode, "thresholds");
  EXPECT_TRUE(p.classification.budget_notes.empty());
  reclassify(p, 3.5, 0);
  EXPECT_EQ(p.classification.mode, "budget");
  EXPECT_NEAR(p.classification.target_bits, 3.5, 1e-3);
  EXPECT_LE(p.classification.avg_bits, 3.5 + 1e-9);
  EXPECT_FALSE(has_note(p.classification, "the policy's default"));
}

TEST(DefaultBudget, ADefaultBelowTheMinimumIsAllocatedAtTheMinimum) {
  Profile p = tiny_profile();
  p.policy.default_target_bits = 0.5;  // below every format, and pruning is capped at 15%
  reclassify(p, 0, 0);
  EXPECT_EQ(p.classification.mode, "budget");
  EXPECT_GT(p.classification.avg_bits, 0.5);
  EXPECT_TRUE(has_note(p.classification, "below the minimum the guard rails allow; allocated at that minimum"));
  // Asked for explicitly, the same budget is an error stating the minimum.
  EXPECT_THROW(reclassify(p, 0.5, 0), Error);
}

TEST(DefaultBudget, WithoutSensitivityThresholdsClassifyAndSaySo) {
  Profile p = tiny_profile();
  p.sensitivity = SensitivityTable{};
  reclassify(p, 0, 0);
  EXPECT_EQ(p.classification.mode, "thresholds");
  EXPECT_TRUE(has_note(p.classification, "default budget needs a sensitivity table"));
}

// A format the budget picks takes the class whose format's bits are nearest.
TEST(DefaultBudget, ChosenFormatsTakeTheClassOfTheNearestBits) {
  const Policy p = default_policy();  // int8_row 8 / fp4_g32 4.5 / trellis2 2 bits
  EXPECT_EQ(class_of_format(p, "int8_row"), plan::ExpertClass::kCritical);
  EXPECT_EQ(class_of_format(p, "trellis4"), plan::ExpertClass::kStandard);
  EXPECT_EQ(class_of_format(p, "nl4_g32"), plan::ExpertClass::kStandard);
  EXPECT_EQ(class_of_format(p, "int4_g32"), plan::ExpertClass::kStandard);     // 5: 0.5 from 4.5, 3 from 8
  EXPECT_EQ(class_of_format(p, "trellis3"), plan::ExpertClass::kDeprioritized);  // 3: 1 from 2, 1.5 from 4.5
  EXPECT_EQ(class_of_format(p, "int8_g32"), plan::ExpertClass::kCritical);
  EXPECT_EQ(class_of_format(p, ""), plan::ExpertClass::kPruned);
}

}  // namespace
}  // namespace eq::profile
