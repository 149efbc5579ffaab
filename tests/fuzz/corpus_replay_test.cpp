// Replays tests/fuzz/corpus/<target>/* through every fuzz target (see
// fuzz_target.h): seeds and the reproducers of fixed crashes stay covered by
// the ordinary test suite, with any compiler and under EQ_SANITIZE.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "test_support.h"

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryTargetHasSeeds) {
  ASSERT_FALSE(eq::fuzz::registry().empty());
  for (const auto& [name, fn] : eq::fuzz::registry()) {
    const fs::path dir = eq::test::source_dir() / "tests/fuzz/corpus" / name;
    EXPECT_TRUE(fs::is_directory(dir) && !fs::is_empty(dir)) << "no seeds in " << dir;
  }
}

TEST(FuzzCorpus, ReplayWithoutCrash) {
  for (const auto& [name, fn] : eq::fuzz::registry()) {
    const fs::path dir = eq::test::source_dir() / "tests/fuzz/corpus" / name;
    if (!fs::is_directory(dir)) continue;
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // valid_* seeds must pass their parser (they are there to reach the deep
      // checks); everything else may be rejected, but only with eq::Error.
      const bool must_pass = entry.path().filename().string().rfind("valid_", 0) == 0;
      try {
        if (must_pass) fn(bytes);
        else eq::fuzz::run_target(fn, bytes);
      } catch (const eq::Error& e) {
        ADD_FAILURE() << name << ": " << entry.path() << " should be accepted but: " << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ": " << entry.path() << " threw a non-eq::Error exception: " << e.what();
      }
      ++files;
    }
    EXPECT_GT(files, 0u) << name;
  }
}
