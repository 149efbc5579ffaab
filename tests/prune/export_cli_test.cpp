// expertquant export on the command line: its refusals (each a one-line
// error, exit 2, nothing written) and the export as an input to pack.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "export_support.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

fs::path tinymoe() { return test::data_dir() / "tinymoe"; }

std::string export_cmd(const fs::path& model, const fs::path& profile, const fs::path& out, const std::string& extra) {
  return test::binary() + " export --model " + model.string() + " --profile " + profile.string() + " -o " +
         out.string() + " " + extra;
}

// Runs a command that must fail with exit 2 and say `expected`, writing nothing at `out`.
void expect_refused(const std::string& cmd, const fs::path& out, const std::string& expected) {
  std::string log;
  EXPECT_EQ(test::run_command(cmd, &log), 2) << cmd << "\n" << log;
  EXPECT_NE(log.find(expected), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out)) << out;
  EXPECT_TRUE(test::output_leftovers(out).empty());
}

TEST(ExportCli, RefusesCountsThatCannotBeLoaded) {
  const fs::path profile = test::quick_profile(tinymoe());
  const fs::path out = test::temp_dir("export-cli") / "out";
  // tinymoe routes each token to 4 of 32 experts.
  expect_refused(export_cmd(tinymoe(), profile, out, "--keep-experts 3"), out, "fewer than num_experts_per_tok (4)");
  expect_refused(export_cmd(tinymoe(), profile, out, "--prune-fraction 0.95"), out, "fewer than num_experts_per_tok (4)");
  expect_refused(export_cmd(tinymoe(), profile, out, "--prune-fraction 1.5"), out, "--prune-fraction: 1.5");
  expect_refused(export_cmd(tinymoe(), profile, out, "--prune-fraction -0.1"), out, "outside [0, 1)");
  expect_refused(export_cmd(tinymoe(), profile, out, "--keep-experts 40"), out, "--keep-experts: 40 is outside");
  expect_refused(export_cmd(tinymoe(), profile, out, "--keep-experts 8 --rank-by size"), out,
                 "--rank-by: 'size' is not a ranking");
  // The quick profile classes no expert pruned: without a count there is nothing to go by.
  expect_refused(export_cmd(tinymoe(), profile, out, ""), out, "prunes no expert");
}

TEST(ExportCli, RefusesAProfileOfOtherWeights) {
  const fs::path profile = test::quick_profile(tinymoe());
  const fs::path dir = test::temp_dir("export-other");
  // The same architecture and tensor index, one weight byte changed where
  // the sample hashes do not look: only the full hash taken while exporting
  // tells the weights apart.
  const fs::path other = dir / "other";
  fs::create_directories(other);
  for (const auto& e : fs::directory_iterator(tinymoe()))
    if (e.is_regular_file()) fs::copy_file(e.path(), other / e.path().filename());
  {
    auto f = io::SafetensorsFile::open((other / "model.safetensors").string());
    const io::TensorInfo* t = f->find("model.embed_tokens.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_GT(t->nbytes(), 3u * 8192u);
    const uint64_t offset = 8 + f->header_size() + t->begin + 4096 + 100;
    f.reset();
    test::flip_byte(other / "model.safetensors", offset, 0x01);
  }
  const fs::path out = dir / "out";
  expect_refused(export_cmd(other, profile, out, "--keep-experts 16"), out,
                 "tensor 'model.embed_tokens.weight' has xxh64");
  // A changed config.json is told apart before any work.
  {
    std::ofstream cfg(other / "config.json", std::ios::app);
    cfg << "\n";
  }
  expect_refused(export_cmd(other, profile, out, "--keep-experts 16"), out, "was made from a different checkpoint");
}

TEST(ExportCli, ReplacesOnlyWithForceAndPacks) {
  const fs::path profile = test::quick_profile(tinymoe());
  const fs::path dir = test::temp_dir("export-force");
  const fs::path out = dir / "pruned";
  std::string log;
  const std::string cmd = export_cmd(tinymoe(), profile, out, "--keep-experts 16 --summary");
  ASSERT_EQ(test::run_command(cmd, &log), 0) << log;
  EXPECT_NE(log.find("32 -> 16 experts per MoE layer"), std::string::npos) << log;
  EXPECT_NE(log.find("dropped experts"), std::string::npos) << log;
  const auto before = test::snapshot(out);
  std::string again;
  EXPECT_EQ(test::run_command(export_cmd(tinymoe(), profile, out, "--keep-experts 8"), &again), 2);
  EXPECT_NE(again.find("already exists (use --force to replace it)"), std::string::npos) << again;
  EXPECT_EQ(test::snapshot(out), before);
  ASSERT_EQ(test::run_command(export_cmd(tinymoe(), profile, out, "--keep-experts 8 --force --json"), &log), 0) << log;
  EXPECT_NE(log.find("\"experts_after\": 8"), std::string::npos) << log;
  EXPECT_TRUE(test::output_leftovers(out).empty());
  // The export is a checkpoint like any other: pack reads it, eval runs the pack.
  const fs::path packed = dir / "packed";
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + out.string() + " --uniform int8_row -o " +
                                  packed.string(), &log), 0)
      << log;
  ASSERT_EQ(test::run_command(test::binary() + " perplexity --model " + out.string() + " --text " +
                                  (test::data_dir() / "corpus" / "eval_prose.txt.zst").string() +
                                  " --max-tokens 256 --ctx 128", &log), 0)
      << log;
}

}  // namespace
}  // namespace eq
