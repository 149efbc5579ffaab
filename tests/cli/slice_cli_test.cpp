// profile --slice I/N and --skip-tokens from the command line: two halves of a
// text merge into a profile of all its tokens; merging a profile with itself
// or with an overlapping slice is refused with exit 2, naming both files and
// the tokens they share; a bad --slice is refused naming the option.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

std::string profile_command(const std::filesystem::path& out, const std::string& extra) {
  return test::binary() + " profile --model " + (test::data_dir() / "tinymoe").string() + " --calib " +
         (test::data_dir() / "corpus" / "calib_small.txt.zst").string() + " --ctx 128 --no-sensitivity " + extra +
         " -o " + out.string() + " 2>&1";
}

TEST(SliceCli, HalvesMergeAndOverlapsAreRefused) {
  const auto dir = test::temp_dir("slice_cli");
  std::string out;
  // 1,024 tokens as two slices of 512: --max-tokens, then --skip-tokens.
  ASSERT_EQ(test::run_command(profile_command(dir / "a.json", "--max-tokens 512"), &out), 0) << out;
  ASSERT_EQ(test::run_command(profile_command(dir / "b.json", "--skip-tokens 512 --max-tokens 512"), &out), 0) << out;
  const json b = json::parse(std::ifstream(dir / "b.json"));
  const json& slice = b.at("calibration").at("slices").at(0);
  EXPECT_EQ(slice.at("first_token"), 512);
  EXPECT_EQ(slice.at("tokens"), 512);
  EXPECT_EQ(slice.at("file_xxh64").get<std::string>().size(), 16u);

  const std::string merge = test::binary() + " profile --merge ";
  ASSERT_EQ(test::run_command(merge + (dir / "a.json").string() + " " + (dir / "b.json").string() + " -o " +
                                  (dir / "ab.json").string() + " 2>&1",
                              &out),
            0)
      << out;
  EXPECT_EQ(json::parse(std::ifstream(dir / "ab.json")).at("calibration").at("tokens"), 1024);

  // The same profile twice, and a slice overlapping the merge of both.
  EXPECT_EQ(test::run_command(merge + (dir / "a.json").string() + " " + (dir / "a.json").string() + " -o " +
                                  (dir / "aa.json").string() + " 2>&1",
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("both hold tokens [0, 512) of "), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "aa.json"));
  ASSERT_EQ(test::run_command(profile_command(dir / "c.json", "--skip-tokens 256 --max-tokens 512"), &out), 0)
      << out;
  EXPECT_EQ(test::run_command(merge + (dir / "ab.json").string() + " " + (dir / "c.json").string() + " -o " +
                                  (dir / "abc.json").string() + " 2>&1",
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("both hold tokens [256, 512) of "), std::string::npos) << out;

  // Bad slices: inside a window, and an index past the count.
  EXPECT_EQ(test::run_command(profile_command(dir / "d.json", "--skip-tokens 200"), &out), 2) << out;
  EXPECT_NE(out.find("--skip-tokens 200: falls inside a window of 128 tokens"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(profile_command(dir / "e.json", "--slice 2/2"), &out), 2) << out;
  EXPECT_NE(out.find("--slice: expected I/N with 0 <= I < N (e.g. 0/4), got '2/2'"), std::string::npos) << out;
}

// Finding: `--slice ''` was taken as no slice (the whole file profiled).
TEST(SliceCli, EmptySliceIsRefusedNamingTheOption) {
  const auto dir = test::temp_dir("slice_cli_empty");
  std::string out;
  EXPECT_EQ(test::run_command(profile_command(dir / "e.json", "--slice ''"), &out), 2) << out;
  EXPECT_NE(out.find("--slice: expected I/N with 0 <= I < N (e.g. 0/4), got ''"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "e.json"));
}

}  // namespace
}  // namespace eq
