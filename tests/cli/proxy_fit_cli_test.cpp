// profile with the default policy's calibrated proxies: --summary prints one
// line per proxied format (ratio, experts fitted on, leave-one-out quality),
// --json-out carries the record profile.json holds, and `--merge` of a profile
// whose record is damaged exits 2 naming the file and the field, writing nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/random_moe.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string profile_command(const fs::path& model, const fs::path& out, const std::string& extra) {
  return test::binary() + " profile --model " + model.string() + " --calib " +
         (test::data_dir() / "corpus" / "calib_small.txt.zst").string() +
         " --max-tokens 256 --ctx 128 --min-tokens 8 " + extra + " -o " + out.string();
}

TEST(ProxyFitCli, SummaryAndJsonShowEachFitAndADamagedRecordIsRefused) {
  const auto dir = test::temp_dir("proxy_fit_cli");
  test::RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 64;  // every default proxy (G = 64) fits
  spec.experts = 8;
  spec.layers = 2;
  const auto model = test::write_random_moe(dir / "model", spec);
  std::string out;
  const fs::path summary_json = dir / "summary.json";
  ASSERT_EQ(test::run_command(
                profile_command(model, dir / "profile.json", "--summary --json-out " + summary_json.string()) + " 2>&1",
                &out),
            0)
      << out;
  // The default's 12 experts, 6 in each of the 2 layers, measured in each trellis format.
  for (const auto& [format, proxy] : {std::pair<std::string, std::string>{"trellis2", "int2_g64"},
                                      {"trellis3", "int3_g64"},
                                      {"trellis4", "int4_g64"}}) {
    const size_t at = out.find("\n" + format + " \u2248 ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(" \u00d7 " + proxy + " (fitted on 12 experts; predicted vs measured, leave-one-out: median "),
              std::string::npos)
        << line;
  }

  const json j = json::parse(std::ifstream(summary_json));
  const json p = json::parse(std::ifstream(dir / "profile.json"));
  const json& fit = j.at("sensitivity_proxy_fits").at("trellis4");
  EXPECT_EQ(fit, p.at("sensitivity_proxy_fits").at("trellis4"));
  EXPECT_EQ(fit.at("proxy"), "int4_g64");
  EXPECT_EQ(fit.at("experts"), 12);
  EXPECT_EQ(fit.at("measured").size(), 12u);
  EXPECT_GT(fit.at("ratio").get<double>(), 0.0);
  EXPECT_EQ(fit.at("predicted_vs_measured").at("compared"), 12);

  json bad = p;
  bad["sensitivity_proxy_fits"]["trellis3"]["measured"][2]["expert"] = 8;
  std::ofstream(dir / "bad.json") << bad.dump();
  const int rc = test::run_command(test::binary() + " profile --merge " + (dir / "bad.json").string() + " -o " +
                                       (dir / "merged.json").string() + " 2>&1",
                                   &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("profile " + (dir / "bad.json").string() +
                     ": field 'sensitivity_proxy_fits.trellis3.measured[2].expert': must be an integer in [0, 8)"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir / "merged.json"));
}

}  // namespace
}  // namespace eq
