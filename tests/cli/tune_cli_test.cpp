// `expertquant tune` writes the runtime config to -o or to the user's config
// folder, never into the source tree; eval and generate read it from there.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string text() { return (test::data_dir() / "corpus" / "eval_python.txt.zst").string(); }

const fs::path& packed() {
  static const fs::path out = [] {
    const fs::path p = test::temp_dir("tune-cli-pack") / "packed";
    std::string log;
    EXPECT_EQ(test::run_command(test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() +
                                    " --uniform int8_row --threads 1 -o " + p.string(),
                                &log),
              0)
        << log;
    return p;
  }();
  return out;
}

// Runs from the repository (where the runtime config used to be written),
// with only the given config locations in the environment.
std::string in_repo(const std::string& env, const std::string& args) {
  return "cd " + test::source_dir().string() + " && env -u EXPERTQUANT_RUNTIME_CONFIG -u XDG_CONFIG_HOME " + env +
         " " + test::binary() + " " + args;
}

std::string tune_args() {
  return "tune --packed " + packed().string() + " --text " + text() +
         " --max-tokens 300 --sweep 1,2 --reps 1 --warmup 0 --threads 1";
}

TEST(TuneCli, WritesToTheUserConfigFolderNeverTheRepository) {
  const fs::path dir = test::temp_dir("tune-cli-user");
  const fs::path configs = test::source_dir() / "configs";
  const auto configs_before = test::snapshot(configs);
  std::string out;

  // $XDG_CONFIG_HOME/expertquant/runtime.json, its folder created.
  const fs::path xdg_file = dir / "xdg" / "expertquant" / "runtime.json";
  ASSERT_EQ(test::run_command(in_repo("HOME=" + (dir / "home").string() + " XDG_CONFIG_HOME=" + (dir / "xdg").string(),
                                      tune_args()),
                              &out),
            0)
      << out;
  ASSERT_TRUE(fs::exists(xdg_file)) << out;
  EXPECT_NE(out.find("wrote " + xdg_file.string()), std::string::npos) << out;
  const json j = json::parse(std::ifstream(xdg_file));
  EXPECT_EQ(j["schema"], "expertquant.runtime");
  EXPECT_TRUE(j["sort_cutoff"].is_number_integer());
  EXPECT_FALSE(fs::exists(dir / "home" / ".config"));

  // Without $XDG_CONFIG_HOME: ~/.config/expertquant/runtime.json.
  const fs::path home_file = dir / "home" / ".config" / "expertquant" / "runtime.json";
  ASSERT_EQ(test::run_command(in_repo("HOME=" + (dir / "home").string(), tune_args() + " --json"), &out), 0) << out;
  ASSERT_TRUE(fs::exists(home_file)) << out;

  // Nothing in the source tree was written or replaced.
  EXPECT_FALSE(fs::exists(configs / "runtime.json"));
  EXPECT_TRUE(test::snapshot(configs) == configs_before) << "configs/ changed";

  // With neither variable there is no default location: one line, exit 2, nothing written.
  EXPECT_EQ(test::run_command(in_repo("-u HOME", tune_args()), &out), 2) << out;
  EXPECT_NE(out.find("-o: no default location for the runtime config"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(TuneCli, EvalReadsTheUserConfigElseTheBuiltInDefaults) {
  const fs::path dir = test::temp_dir("tune-cli-read");
  const std::string eval = "eval --packed " + packed().string() + " --text " + text() +
                           " --max-tokens 100 --ctx 64 --no-quality --no-collapse --no-latency -v";
  const std::string env = "HOME=" + (dir / "home").string();
  std::string out;
  ASSERT_EQ(test::run_command(in_repo(env, eval), &out), 0) << out;
  EXPECT_NE(out.find("auto sort_cutoff 1 from built-in default"), std::string::npos) << out;

  const fs::path user = dir / "home" / ".config" / "expertquant" / "runtime.json";
  fs::create_directories(user.parent_path());
  std::ofstream(user) << R"({"schema": "expertquant.runtime", "version": 1, "sort_cutoff": 37})";
  ASSERT_EQ(test::run_command(in_repo(env, eval), &out), 0) << out;
  EXPECT_NE(out.find("auto sort_cutoff 37 from " + user.string()), std::string::npos) << out;
  // --runtime-config names another file, read instead.
  const fs::path other = dir / "other.json";
  std::ofstream(other) << R"({"version": 1, "sort_cutoff": 5})";
  ASSERT_EQ(test::run_command(in_repo(env, eval + " --runtime-config " + other.string()), &out), 0) << out;
  EXPECT_NE(out.find("auto sort_cutoff 5 from " + other.string()), std::string::npos) << out;
}

// tune and eval's latency count timed points: two per M of tune's sweep (the
// dispatch crossover, then the kernel crossover), one per M of eval's sweep
// plus one decode/prefill per dispatch.
TEST(TuneCli, TuneAndLatencyProgressEndAt100PercentOfTheirMeasurements) {
  const fs::path dir = test::temp_dir("tune-cli-progress");
  std::string out;
  ASSERT_EQ(test::run_command(in_repo("HOME=" + (dir / "home").string(), tune_args() + " -v"), &out), 0) << out;
  EXPECT_NE(out.find("tune 100%  4 measurements in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
  const std::string eval = "eval --packed " + packed().string() + " --text " + text() +
                           " --max-tokens 300 --ctx 64 --no-quality --no-collapse --no-model-step --sweep 1,2,4"
                           " --reps 1 --warmup 0 --dispatch mask-combine,sorted --threads 1 -v";
  ASSERT_EQ(test::run_command(in_repo("HOME=" + (dir / "home").string(), eval), &out), 0) << out;
  EXPECT_NE(out.find("latency packed 100%  5 measurements in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq
