// profile on models whose experts cannot take some candidate formats: the
// default policy used to exit 2 on an expert intermediate size of 32 ("field
// 'candidates' (int4_g64): needs ... cols % 64 == 0, expert matrix is [64,
// 32]") and nothing could be packed. Now those candidates are skipped: the
// summary and --json say which, where and why, the classification uses the
// formats that fit, and the profile packs and verifies.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "support/random_moe.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

std::string calib() { return (test::data_dir() / "corpus" / "calib_small.txt.zst").string(); }

// Both tests check threshold classification: --thresholds.
std::string profile_command(const std::filesystem::path& model, const std::filesystem::path& out,
                            const std::string& extra) {
  return test::binary() + " profile --model " + model.string() + " --calib " + calib() +
         " --max-tokens 256 --ctx 128 --min-tokens 8 --thresholds " + extra + " -o " + out.string();
}

// The formats profile.json's allocation uses (pruned experts have none).
std::set<std::string> allocated_formats(const json& profile) {
  std::set<std::string> formats;
  for (const auto& layer : profile.at("allocation").at("layers"))
    for (const auto& e : layer.at("experts"))
      if (e.contains("format") && e.at("format").is_string()) formats.insert(e.at("format").get<std::string>());
  return formats;
}

TEST(CandidateSkipCli, Intermediate32ProfilesWithTheDefaultPolicyPacksAndVerifies) {
  const auto dir = test::temp_dir("candidate_skip32");
  test::RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 32;
  spec.layers = 2;
  const auto model = test::write_random_moe(dir / "model", spec);
  std::string out;
  ASSERT_EQ(test::run_command(profile_command(model, dir / "profile.json", "--summary") + " 2>&1", &out), 0) << out;
  for (const char* f : {"int4_g64", "int3_g64", "int2_g64"})
    EXPECT_NE(out.find(std::string("candidate ") + f +
                       " skipped: down [64, 32] needs cols % 64 == 0 (all 2 MoE layers, every expert)"),
              std::string::npos)
        << out;
  EXPECT_NE(out.find("proxy int2_g64 of trellis2 skipped: down [64, 32] needs cols % 64 == 0; trellis2 is measured "
                     "itself"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("formats: critical int8_row, standard fp4_g32, deprioritized trellis2;"), std::string::npos)
      << out;

  const json p = json::parse(std::ifstream(dir / "profile.json"));
  EXPECT_EQ(p.at("sensitivity_formats"), json({"int8_row", "fp4_g32", "trellis2", "nl4_g32", "trellis3", "trellis4"}));
  EXPECT_TRUE(p.at("sensitivity_proxies").empty());
  // The policy is recorded as given: the profile can be re-classified with it.
  EXPECT_EQ(p.at("policy").at("candidates").size(), 9u);
  for (const auto& f : allocated_formats(p))
    EXPECT_TRUE(f == "int8_row" || f == "fp4_g32" || f == "trellis2") << f;

  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + model.string() + " --profile " +
                                  (dir / "profile.json").string() + " -o " + (dir / "packed").string() + " 2>&1",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_command(test::binary() + " verify " + (dir / "packed").string() + " 2>&1", &out), 0) << out;
}

TEST(CandidateSkipCli, Intermediate48JsonNamesSkippedCandidatesAndTheReplacedStandardFormat) {
  const auto dir = test::temp_dir("candidate_skip48");
  test::RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 48;
  const auto model = test::write_random_moe(dir / "model", spec);
  std::string out;
  ASSERT_EQ(test::run_command(profile_command(model, dir / "profile.json", "--json") + " 2>/dev/null", &out), 0)
      << out;
  const json j = json::parse(out);
  const json& fit = j.at("format_fit");
  ASSERT_EQ(fit.at("skipped_candidates").size(), 5u) << fit.dump();
  const json& first = fit.at("skipped_candidates")[0];
  EXPECT_EQ(first.at("format"), "fp4_g32");
  EXPECT_EQ(first.at("matrices"), json({"down"}));
  EXPECT_EQ(first.at("reason"), "down [64, 48] needs cols % 32 == 0");
  EXPECT_EQ(first.at("layers"), json({0}));
  ASSERT_EQ(fit.at("class_substitutes").size(), 1u);
  EXPECT_EQ(fit.at("class_substitutes")[0].at("class"), "standard");
  EXPECT_EQ(fit.at("class_substitutes")[0].at("policy_format"), "fp4_g32");
  EXPECT_EQ(fit.at("class_substitutes")[0].at("format"), "fp4_g16");

  // Threshold classification: standard experts get fp4_g16 and their rule says why.
  const json p = json::parse(std::ifstream(dir / "profile.json"));
  EXPECT_EQ(p.at("sensitivity_formats"), json({"int8_row", "fp4_g16", "trellis2", "trellis3", "trellis4"}));
  int standard = 0;
  for (const auto& e : p.at("layers")[0].at("experts"))
    if (e.at("class") == "standard") {
      ++standard;
      EXPECT_EQ(e.at("format"), "fp4_g16");
      EXPECT_NE(e.at("rule").get<std::string>().find(
                    "; fp4_g16 in place of fp4_g32, which the expert matrices cannot take"),
                std::string::npos)
          << e.dump();
    }
  EXPECT_GT(standard, 0);

  // A bit budget re-classifies the same measurements among the formats that fit.
  ASSERT_EQ(test::run_command(test::binary() + " profile --merge " + (dir / "profile.json").string() +
                                  " --target-bits 4 -o " + (dir / "budget.json").string() + " 2>&1",
                              &out),
            0)
      << out;
  const json b = json::parse(std::ifstream(dir / "budget.json"));
  EXPECT_EQ(b.at("classification").at("mode"), "budget");
  EXPECT_LE(b.at("classification").at("achieved_bits").get<double>(), 4.0 + 1e-9);
  for (const auto& f : allocated_formats(b))
    EXPECT_TRUE(f == "int8_row" || f == "fp4_g16" || f == "trellis2" || f == "trellis3" || f == "trellis4") << f;
}

}  // namespace
}  // namespace eq
