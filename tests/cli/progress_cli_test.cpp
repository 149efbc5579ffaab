// Progress of the commands that show it: each phase ends at 100% of the
// total the work itself counts, in the unit of that work (layers for a
// layer-major pass, tokens for a window-major one); a terminal gets the bar
// and its final line, a pipe nothing unless -v.
#include <gtest/gtest.h>

#include <fstream>

#include <filesystem>
#include <string>

#include "exec/packed_fixture.h"
#include "test_support.h"

namespace eq {
namespace {

std::string corpus(const std::string& name) { return (test::data_dir() / "corpus" / name).string(); }

// Two texts of 256 tokens in windows of 128: 2 x 2 x 127 = 508 scored tokens
// (each window's first token predicts nothing) of 512 read.
std::string eval_command(const std::string& extra) {
  return test::binary() + " eval --packed " + test::mixed_pack() + " --model " + test::tinymoe_path() +
         " --text " + corpus("eval_prose.txt.zst") + " --text " + corpus("eval_c.txt.zst") +
         " --max-tokens 256 --ctx 128 --no-latency --no-collapse --threads 1 " + extra;
}

// A byte rate anywhere but in a pass's "N MiB/s read" step, which says how fast
// the checkpoint is read (KiB/s on a slow machine or under a sanitizer): the
// passes themselves count layers or tokens, never bytes.
bool has_byte_rate_outside_read_steps(std::string out) {
  const std::string read_rate = "iB/s read";
  for (size_t at; (at = out.find(read_rate)) != std::string::npos;) out.erase(at, read_rate.size());
  return out.find("iB/s") != std::string::npos;
}

// The reference model's pass, then the packed model's, each over tinymoe's 4 layers.
TEST(ProgressCli, EvalQualityEndsAt100PercentOfEachPass) {
  std::string out;
  ASSERT_EQ(test::run_command(eval_command("-v"), &out), 0) << out;
  EXPECT_NE(out.find("quality reference 100%  4 layers in "), std::string::npos) << out;
  EXPECT_NE(out.find("quality packed 100%  4 layers in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
  EXPECT_FALSE(has_byte_rate_outside_read_steps(out)) << out;
}

TEST(ProgressCli, EvalQualityWindowOrderEndsAt100PercentOfTheTokens) {
  std::string out;
  ASSERT_EQ(test::run_command(eval_command("-v --pass-order window"), &out), 0) << out;
  // Both passes read the 4 windows of 128 tokens.
  EXPECT_NE(out.find("quality reference 100%  512 tokens in "), std::string::npos) << out;
  EXPECT_NE(out.find("quality packed 100%  512 tokens in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
  EXPECT_FALSE(has_byte_rate_outside_read_steps(out)) << out;
}

TEST(ProgressCli, TerminalGetsTheBarAndItsFinal100PercentLine) {
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "/usr/bin/script (a pseudo-terminal) not installed";
  std::string out;
  ASSERT_EQ(test::run_command("/usr/bin/script -qec '" + eval_command("") + "' /dev/null", &out), 0) << out;
  EXPECT_NE(out.find("\r\033[Kquality reference ["), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[Kquality packed 100%  4 layers in "), std::string::npos) << out;
  EXPECT_NE(out.find(" tokens/s"), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
}

TEST(ProgressCli, QuietOnAPipeWithoutVerbose) {
  std::string out;
  ASSERT_EQ(test::run_command("{ " + eval_command("") + " 2>&1 >/dev/null; }", &out), 0) << out;
  EXPECT_EQ(out, "");
}

TEST(ProgressCli, PerplexityEndsAt100Percent) {
  std::string out;
  const std::string cmd = test::binary() + " perplexity --model " + test::tinymoe_path() + " --text " +
                          corpus("eval_prose.txt.zst") + " --max-tokens 300 --ctx 128 --threads 1 -v";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("perplexity 100%  4 layers in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(cmd + " --pass-order window", &out), 0) << out;
  EXPECT_NE(out.find("perplexity 100%  300 tokens in "), std::string::npos) << out;  // 128 + 128 + 44
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
}

TEST(ProgressCli, PackEndsAt100PercentOfItsBytes) {
  const auto dir = test::temp_dir("progress-pack");
  std::string out;
  const std::string cmd = test::binary() + " pack --model " + test::tinymoe_path() +
                          " --uniform int8_row --threads 1 -v -o " + (dir / "out").string();
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("\npack 100%  "), std::string::npos) << out;
  EXPECT_NE(out.find("iB/s\n"), std::string::npos) << out;  // bytes: a byte rate
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
}

TEST(ProgressCli, ProfileEndsEachPhaseAt100PercentInItsUnit) {
  const auto dir = test::temp_dir("progress-profile");
  std::string out;
  // Three fast formats: the phases' progress is under test, not which formats are measured.
  const auto policy = dir / "policy.json";
  std::ofstream(policy) << R"({"version": 1, "formats": {"critical": "int8_row", "standard": "nl4_g32",)"
                        << R"( "deprioritized": "int2_g64"}, "default_target_bits": 4.5})";
  const std::string cmd = test::binary() + " profile --model " + test::tinymoe_path() + " --calib " +
                          corpus("calib_small.txt.zst") + " --max-tokens 128 --ctx 64 --threads 1 -v --policy " +
                          policy.string() + " -o " + (dir / "profile.json").string();
  // Layer order: sensitivity inside the pass, which counts layers.
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("profile pass 100%  4 layers in "), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(cmd + " --pass-order window --force", &out), 0) << out;
  EXPECT_NE(out.find("profile pass 100%  128 tokens in "), std::string::npos) << out;
  EXPECT_NE(out.find("profile sensitivity 100%  "), std::string::npos) << out;
  EXPECT_NE(out.find(" experts/s\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped at"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq
