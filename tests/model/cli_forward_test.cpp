// End-to-end: `expertquant perplexity` (JSON, peak memory bound, token-range
// errors) and `expertquant generate` on qwen3moe-small.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/build_info.h"
#include "test_support.h"

namespace eq::test {
namespace {

std::string qwen_small() { return (shared_dir() / "models" / "qwen3moe-small").string(); }

TEST(ForwardCli, PerplexityJsonAndPeakMemory) {
  EQ_REQUIRE_SHARED();
  std::string out;
  const std::string cmd = binary() + " perplexity --model " + qwen_small() + " --text " +
                          (shared_dir() / "corpus" / "eval_python.txt").string() +
                          " --max-tokens 8192 --json 2>/dev/null";
  ASSERT_EQ(run_command(cmd, &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["windows"].get<int64_t>(), 16);
  EXPECT_EQ(j["scored_tokens"].get<int64_t>(), 8192 - 16);
  EXPECT_GT(j["bits_per_byte"].get<double>(), 0.5);
  EXPECT_LT(j["bits_per_byte"].get<double>(), 2.0);
  // Routed experts are converted per use, so a forward's peak RSS over qwen3moe-small stays < 3x the
  // checkpoint (29.98 MB of bf16 tensors).
  // Not under ASan: its shadow memory and quarantine inflate RSS by a large constant.
  if (!eq::built_with_sanitizers()) {
    EXPECT_LT(j["peak_rss_bytes"].get<double>(), 3 * 29.98e6);
  }
}

TEST(ForwardCli, GenerateReferenceContinuation) {
  EQ_REQUIRE_SHARED();
  std::string out;
  // A real newline inside the quotes (the shell passes it through).
  const std::string cmd =
      binary() + " generate --model " + qwen_small() + " --prompt \"import os\nimport\" --max-new-tokens 32 2>/dev/null";
  ASSERT_EQ(run_command(cmd, &out), 0) << out;
  EXPECT_EQ(out.substr(0, 32), " sys\nimport sys\nimport sys\nimpor");
  // As a user types it: backslash-n inside the quotes is decoded to a newline.
  const std::string typed = binary() + " generate --model " + qwen_small() +
                            " --prompt 'import os\\nimport' --max-new-tokens 32 2>/dev/null";
  ASSERT_EQ(run_command(typed, &out), 0) << out;
  EXPECT_EQ(out.substr(0, 32), " sys\nimport sys\nimport sys\nimpor");
}

TEST(ForwardCli, OutOfRangeTokenIsAnErrorNamingThePosition) {
  EQ_REQUIRE_SHARED();
  const auto path = temp_dir("cli-tokens") / "ids.json";
  std::ofstream(path) << "[[1, 2, 3], [4, 5, 300]]";
  std::string out;
  const int rc = run_command(binary() + " perplexity --model " + qwen_small() + " --tokens " + path.string(), &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("sequence 1, position 2"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq::test
