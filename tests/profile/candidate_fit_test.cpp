// Candidates a model's experts cannot take are skipped for that model, never
// fatal (lib/profile/candidate_fit.h): on expert shapes 32 and 48 wide (the
// default policy's G = 64 formats, and at 48 its fp4_g32 standard format, do
// not fit) and 2880 wide (gpt-oss: no G = 128 format fits), the fitted policy
// names what was skipped and why, a class whose format does not fit gets the
// nearest wider format that does, and profiling tiny random models of those
// shapes classifies and budgets with fitting formats only.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "profile/bit_budget.h"
#include "profile/candidate_fit.h"
#include "profile/run.h"
#include "support/random_moe.h"
#include "support/small_profile_request.h"
#include "test_support.h"

namespace eq::profile {
namespace {

using Strings = std::vector<std::string>;

Strings skipped_formats(const CandidateFit& fit) {
  Strings v;
  for (const auto& s : fit.skipped) v.push_back(s.format);
  return v;
}

// The default policy with a G = 128 standard format and two more G = 128
// candidates. Its proxies are not calibrated: quantizing the 2880-wide tiny
// experts to three trellis formats would be most of the test's time.
Policy g128_policy() {
  nlohmann::json j = nlohmann::json::parse(default_policy().to_json().dump());
  j["sensitivity"]["proxy_calibration_experts"] = 0;
  j["formats"]["standard"] = "int4_g128";
  j["candidates"].push_back("fp4_g128");
  j["candidates"].push_back("int3_g128");
  return parse_policy(j, "g128 policy");
}

TEST(CandidateFit, Intermediate32SkipsTheG64CandidatesAndTheirProxies) {
  const CandidateFit fit = fit_policy(default_policy(), 64, 32);
  EXPECT_EQ(skipped_formats(fit), (Strings{"int4_g64", "int3_g64", "int2_g64"}));
  for (const auto& s : fit.skipped) {
    EXPECT_EQ(s.misfit.matrices, Strings{"down"});
    EXPECT_EQ(s.misfit.reason, "down [64, 32] needs cols % 64 == 0");
  }
  EXPECT_TRUE(fit.substitutes.empty());
  EXPECT_EQ(fit.policy.candidates, (Strings{"int8_row", "fp4_g32", "trellis2", "nl4_g32", "trellis3", "trellis4"}));
  // The proxies were skipped: trellis2, trellis3 and trellis4 are measured themselves.
  ASSERT_EQ(fit.dropped_proxies.size(), 3u);
  EXPECT_EQ(fit.dropped_proxies[0].format, "trellis2");
  EXPECT_EQ(fit.dropped_proxies[0].proxy, "int2_g64");
  EXPECT_TRUE(fit.policy.proxies.empty());
  const Strings lines = describe_fit(fit, 8);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0],
            "candidate int4_g64 skipped: down [64, 32] needs cols % 64 == 0 (all 8 MoE layers, every expert)");
  EXPECT_EQ(lines[3],
            "proxy int2_g64 of trellis2 skipped: down [64, 32] needs cols % 64 == 0; trellis2 is measured itself");
}

TEST(CandidateFit, Intermediate48ReplacesTheStandardFormatWithTheNearestWider) {
  const CandidateFit fit = fit_policy(default_policy(), 64, 48);
  EXPECT_EQ(skipped_formats(fit), (Strings{"fp4_g32", "nl4_g32", "int4_g64", "int3_g64", "int2_g64"}));
  ASSERT_EQ(fit.substitutes.size(), 1u);
  EXPECT_EQ(fit.substitutes[0].cls, plan::ExpertClass::kStandard);
  EXPECT_EQ(fit.substitutes[0].wanted, "fp4_g32");
  // Of the formats with more bits than 4.5 that fit [48, 64] and [64, 48], fp4_g16 has the fewest (5).
  EXPECT_EQ(fit.substitutes[0].used, "fp4_g16");
  EXPECT_EQ(fit.policy.class_format[1], "fp4_g16");
  EXPECT_EQ(fit.policy.candidates, (Strings{"int8_row", "fp4_g16", "trellis2", "trellis3", "trellis4"}));
  const Strings lines = describe_fit(fit, 1);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "standard format fp4_g32 replaced by fp4_g16, the nearest wider format that fits: down [64, 48] "
                      "needs cols % 32 == 0"),
            lines.end());
  EXPECT_EQ(lines[0], "candidate fp4_g32 skipped: down [64, 48] needs cols % 32 == 0 (the 1 MoE layer, every expert)");
}

TEST(CandidateFit, Width2880TakesNoG128Format) {
  const CandidateFit fit = fit_policy(g128_policy(), 2880, 2880);
  EXPECT_EQ(skipped_formats(fit), (Strings{"int4_g128", "fp4_g128", "int3_g128"}));
  EXPECT_EQ(fit.skipped[0].misfit.reason,
            "gate/up [2880, 2880] need cols % 128 == 0; down [2880, 2880] needs cols % 128 == 0");
  EXPECT_EQ(fit.skipped[0].misfit.matrices, (Strings{"gate", "up", "down"}));
  // 4.5 bits: fp4_g32 and int4_g64 are both candidates; the tie goes to int4_g128's family.
  ASSERT_EQ(fit.substitutes.size(), 1u);
  EXPECT_EQ(fit.substitutes[0].used, "int4_g64");
  EXPECT_EQ(fit.policy.candidates,
            (Strings{"int8_row", "int4_g64", "trellis2", "fp4_g32", "nl4_g32", "trellis3", "int3_g64", "int2_g64", "trellis4"}));
  // Every default candidate takes 2880 (a multiple of 16, 32 and 64): nothing else changes.
  EXPECT_FALSE(fit_policy(default_policy(), 2880, 2880).changed());
}

TEST(CandidateFit, NearestWiderIsDefinedByBitsThenCandidatesThenFamily) {
  // [40, 64] / [64, 40]: no group size of the registry divides 40, no 16-row tile fits 40 rows.
  EXPECT_EQ(nearest_wider_fit("trellis2", {}, 64, 40), "int8_row");
  EXPECT_EQ(nearest_wider_fit("fp4_g32", {}, 64, 48), "fp4_g16");
  EXPECT_EQ(nearest_wider_fit("int4_g128", {}, 2880, 2880), "int4_g64");
  // A candidate wins a tie at equal bits over the wanted format's family.
  EXPECT_EQ(nearest_wider_fit("int4_g128", {"fp4_g32"}, 2880, 2880), "fp4_g32");
  // Always strictly wider, even when a format of equal bits fits (nvfp4, 4.5 bits, 16 along K).
  EXPECT_EQ(nearest_wider_fit("fp4_g32", {"nvfp4"}, 64, 48), "fp4_g16");
}

TEST(CandidateFit, FittingAFittedPolicyChangesNothing) {
  for (const auto& [h, i] : {std::pair<int64_t, int64_t>{64, 32}, {64, 48}, {2880, 2880}, {64, 40}}) {
    const CandidateFit once = fit_policy(g128_policy(), h, i);
    const CandidateFit twice = fit_policy(once.policy, h, i);
    EXPECT_FALSE(twice.changed()) << h << "x" << i;
    EXPECT_EQ(twice.policy.to_json(), once.policy.to_json()) << h << "x" << i;
  }
}

struct ShapeCase {
  int64_t hidden, intermediate, experts;
  bool g128_policy;
  Strings measured;  // the fitted candidates, in order
};

// Profiles a tiny random model of the shape (256 calibration tokens), then
// checks the threshold classification and a 4-bit budget.
void profile_and_budget(const ShapeCase& sc) {
  SCOPED_TRACE(std::to_string(sc.hidden) + " x " + std::to_string(sc.intermediate));
  test::RandomMoeSpec spec;
  spec.hidden = sc.hidden;
  spec.intermediate = sc.intermediate;
  spec.experts = sc.experts;
  const auto model = test::write_random_moe(
      test::temp_dir("candidate_fit") / (std::to_string(sc.hidden) + "x" + std::to_string(sc.intermediate)), spec);
  ProfileRequest r = test::small_profile_request(model);
  r.policy = sc.g128_policy ? g128_policy() : default_policy();
  r.thresholds = true;
  const Profile p = run_profile(r);
  EXPECT_EQ(p.sensitivity.formats, sc.measured);
  const model::ModelConfig c = p.dims();
  auto all_fit = [&](const Classification& cls) {
    int64_t kept = 0;
    for (const auto& row : cls.layers)
      for (const auto& d : row) {
        if (d.format.empty()) continue;
        ++kept;
        EXPECT_TRUE(fits_experts(d.format, c.hidden_size, c.moe_intermediate_size)) << d.format;
        EXPECT_NE(std::find(sc.measured.begin(), sc.measured.end(), d.format), sc.measured.end()) << d.format;
      }
    EXPECT_GT(kept, 0);
  };
  EXPECT_EQ(p.classification.mode, "thresholds");
  all_fit(p.classification);
  Classification budget = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c, BitBudget{4.0, 0});
  summarize(budget, p.stats, p.sensitivity, p.policy, c);
  all_fit(budget);
  EXPECT_LE(budget.avg_bits, 4.0 + 1e-9);
  EXPECT_GT(budget.avg_bits, 2.0);
}

TEST(CandidateFit, TinyModelOfIntermediate32ProfilesAndBudgetsWithFittingFormats) {
  profile_and_budget({64, 32, 4, false, {"int8_row", "fp4_g32", "trellis2", "nl4_g32", "trellis3", "trellis4"}});
}

TEST(CandidateFit, TinyModelOfIntermediate48ProfilesAndBudgetsWithFittingFormats) {
  profile_and_budget({64, 48, 4, false, {"int8_row", "fp4_g16", "trellis2", "trellis3", "trellis4"}});
}

TEST(CandidateFit, TinyModelOfIntermediate2880ProfilesAndBudgetsWithFittingFormats) {
  // Two experts: each measured format quantizes 3 x 64 x 2880 weights per expert.
  profile_and_budget(
      {64, 2880, 2, true,
       {"int8_row", "int4_g64", "trellis2", "fp4_g32", "nl4_g32", "trellis3", "int3_g64", "int2_g64", "trellis4"}});
}

}  // namespace
}  // namespace eq::profile
