// profile with no budget option is allocated at the policy's default budget
// and says so; --thresholds classifies by thresholds; --thresholds with a
// budget option is refused naming both.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/random_moe.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

std::string profile_command(const std::filesystem::path& model, const std::filesystem::path& out,
                            const std::string& extra) {
  return test::binary() + " profile --model " + model.string() + " --calib " +
         (test::data_dir() / "corpus" / "calib_small.txt.zst").string() +
         " --max-tokens 256 --ctx 128 --min-tokens 8 " + extra + " -o " + out.string() + " 2>&1";
}

TEST(DefaultBudgetCli, NoBudgetOptionAllocatesThePolicyDefaultAndThresholdsOptsOut) {
  const auto dir = test::temp_dir("default_budget_cli");
  test::RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 64;
  spec.experts = 8;
  const auto model = test::write_random_moe(dir / "model", spec);
  std::string out;
  ASSERT_EQ(test::run_command(profile_command(model, dir / "a.json", "--summary"), &out), 0) << out;
  EXPECT_NE(out.find("mode budget (target 4.500 bits)"), std::string::npos) << out;
  EXPECT_NE(out.find("budget: the policy's default of 4.5 bits per expert weight"), std::string::npos) << out;
  const json a = json::parse(std::ifstream(dir / "a.json"));
  EXPECT_EQ(a.at("classification").at("mode"), "budget") << a.at("classification").dump();

  ASSERT_EQ(test::run_command(profile_command(model, dir / "b.json", "--thresholds --summary"), &out), 0) << out;
  EXPECT_NE(out.find("mode thresholds"), std::string::npos) << out;
  EXPECT_EQ(out.find("the policy's default"), std::string::npos) << out;
  const json b = json::parse(std::ifstream(dir / "b.json"));
  EXPECT_EQ(b.at("classification").at("mode"), "thresholds");

  // A merge keeps the mode it is asked for.
  ASSERT_EQ(test::run_command(test::binary() + " profile --merge " + (dir / "a.json").string() + " --thresholds -o " +
                                  (dir / "c.json").string() + " --summary 2>&1",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("mode thresholds"), std::string::npos) << out;

  // A merge with another policy is classified by that policy: one naming a single format for every class,
  // pruning nothing and with no default budget puts every expert in it (the importance-weighted uniform pack
  // of bench/quality), although the profile was budgeted and measured other formats.
  const auto uniform = dir / "uniform.json";
  std::ofstream(uniform) << R"({"version": 1, "formats": {"critical": "nl4_g32", "standard": "nl4_g32",)"
                         << R"( "deprioritized": "nl4_g32"}, "candidates": ["nl4_g32"],)"
                         << R"( "thresholds": {"pruned": {"max_usage_ratio": 0, "max_reap_percentile": 0}},)"
                         << R"( "guard_rails": {"max_pruned_fraction": 0}})";
  ASSERT_EQ(test::run_command(test::binary() + " profile --merge " + (dir / "a.json").string() + " --policy " +
                                  uniform.string() + " -o " + (dir / "u.json").string() + " 2>&1",
                              &out),
            0)
      << out;
  const json u = json::parse(std::ifstream(dir / "u.json"));
  EXPECT_EQ(u.at("classification").at("mode"), "thresholds");
  int64_t experts = 0;
  for (const auto& layer : u.at("allocation").at("layers"))
    for (const auto& e : layer.at("experts")) {
      EXPECT_EQ(e.at("format"), "nl4_g32") << e.dump();
      ++experts;
    }
  EXPECT_EQ(experts, 8);
  // The same policy with a budget chooses among its candidates only.
  ASSERT_EQ(test::run_command(test::binary() + " profile --merge " + (dir / "a.json").string() + " --policy " +
                                  uniform.string() + " --target-bits 8 -o " + (dir / "v.json").string() + " 2>&1",
                              &out),
            0)
      << out;
  const json v = json::parse(std::ifstream(dir / "v.json"));  // named: the loop below refers into it
  for (const auto& layer : v.at("allocation").at("layers"))
    for (const auto& e : layer.at("experts")) EXPECT_EQ(e.at("format"), "nl4_g32") << e.dump();

  EXPECT_EQ(test::run_command(profile_command(model, dir / "d.json", "--thresholds --target-bits 4"), &out), 2);
  EXPECT_NE(out.find("--thresholds"), std::string::npos) << out;
  EXPECT_NE(out.find("--target-bits"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "d.json"));
}

}  // namespace
}  // namespace eq
