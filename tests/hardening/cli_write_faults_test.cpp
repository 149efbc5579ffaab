// Fault injection on writes, end to end: the expertquant binary runs with
// EQ_FAULT_WRITE_AFTER_BYTES=N (the disk "fills up" after N bytes, see
// lib/io/atomic_file.cpp) or under `ulimit -f`. For every cut point: a clear
// one-line error, a non-zero exit, no output under the final name and no
// manifest.json anywhere, and a previous output of the same name untouched
// and still verifying.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

uint64_t total_bytes(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

std::string pack_command(const fs::path& out, const std::string& extra = "") {
  return test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() +
         " --uniform int8_row --threads 1 -o " + out.string() + " " + extra;
}

std::string with_fault(uint64_t bytes, const std::string& command) {
  return "EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(bytes) + " " + command;
}

// What every failed write must look like from outside.
void expect_clean_failure(int rc, const std::string& output, const fs::path& out) {
  EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << output;
  EXPECT_NE(output.find("expertquant: error:"), std::string::npos) << output;
  EXPECT_NE(output.find("write failed"), std::string::npos) << output;
  EXPECT_TRUE(test::output_leftovers(out).empty()) << "a failed run left its staging folder behind";
}

class PackFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = new fs::path(test::temp_dir("pack-faults") / "packed");
    std::string output;
    ASSERT_EQ(test::run_command(pack_command(*reference_), &output), 0) << output;
    written_ = total_bytes(*reference_);
    manifest_bytes_ = fs::file_size(*reference_ / "manifest.json");
  }
  static void TearDownTestSuite() { delete reference_; }
  static fs::path* reference_;
  static uint64_t written_, manifest_bytes_;
};
fs::path* PackFaults::reference_ = nullptr;
uint64_t PackFaults::written_ = 0, PackFaults::manifest_bytes_ = 0;

TEST_F(PackFaults, NewOutputNeverAppearsComplete) {
  ASSERT_GT(written_, manifest_bytes_);
  const fs::path out = test::temp_dir("pack-new") / "packed";
  // Cut points: nothing, inside the first shard header, mid-shards, inside the
  // manifest, and its last lines (the manifest is written last; its timing
  // fields vary by a few bytes between runs, hence the margin of 64).
  for (uint64_t budget : {uint64_t(0), uint64_t(100), written_ / 2, written_ - manifest_bytes_ / 2, written_ - 64}) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_fault(budget, pack_command(out)), &output);
    expect_clean_failure(rc, output, out);
    EXPECT_FALSE(fs::exists(out)) << "the final output folder exists after a failed pack";
  }
  // The same pack with enough room succeeds (the hook only counts, it does not break anything).
  std::string output;
  ASSERT_EQ(test::run_command(with_fault(written_ + 4096, pack_command(out)), &output), 0) << output;
  EXPECT_EQ(test::snapshot(out).size(), test::snapshot(*reference_).size());
}

TEST_F(PackFaults, PreviousOutputUntouchedByFailedForcedPack) {
  const fs::path out = test::temp_dir("pack-previous") / "packed";
  fs::copy(*reference_, out, fs::copy_options::recursive);
  const auto before = test::snapshot(out);
  for (uint64_t budget : {uint64_t(0), written_ / 3, written_ - 64}) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_fault(budget, pack_command(out, "--force")), &output);
    expect_clean_failure(rc, output, out);
    EXPECT_TRUE(test::snapshot(out) == before) << "the previous output changed";
  }
  std::string output;
  EXPECT_EQ(test::run_command(test::binary() + " verify " + out.string(), &output), 0) << output;
}

TEST_F(PackFaults, FileSizeLimitGivesAnErrorNotASignal) {
  // `ulimit -f` counts 512-byte blocks in dash, 1024 in bash: either way the
  // first shard (megabytes) goes past it.
  const fs::path out = test::temp_dir("pack-ulimit") / "packed";
  std::string output;
  const int rc = test::run_command("ulimit -f 512 && " + pack_command(out), &output);
  EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << output;
  EXPECT_NE(output.find("expertquant: error:"), std::string::npos) << output;
  EXPECT_NE(output.find("File too large"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(test::output_leftovers(out).empty());
}

// A killed pack cannot clean up: it may leave its staging folder
// OUT.partial-<pid>-<random>, which never holds a manifest.json, is refused
// as a pack, and is removed by the next run.
TEST_F(PackFaults, KilledPackLeavesNothingThatLooksComplete) {
  const fs::path out = test::temp_dir("pack-kill") / "packed";
  fs::copy(*reference_, out, fs::copy_options::recursive);
  const auto before = test::snapshot(out);
  for (uint64_t budget : {written_ / 2, written_ - 64}) {
    SCOPED_TRACE("EQ_FAULT_KILL_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc =
        test::run_command("EQ_FAULT_KILL_AFTER_BYTES=" + std::to_string(budget) + " " + pack_command(out, "--force"), &output);
    EXPECT_EQ(rc, 128 + 9) << "expected a SIGKILL: " << output;
    EXPECT_TRUE(test::snapshot(out) == before) << "the previous output changed";
    const auto leftovers = test::output_leftovers(out);
    ASSERT_EQ(leftovers.size(), 1u);
    EXPECT_FALSE(fs::exists(leftovers[0] / "manifest.json"));
    EXPECT_NE(test::run_command(test::binary() + " verify " + leftovers[0].string(), &output), 0)
        << "a killed pack's folder was accepted as a pack: " << output;
  }
  std::string output;
  ASSERT_EQ(test::run_command(pack_command(out, "--force"), &output), 0) << output;
  EXPECT_TRUE(test::output_leftovers(out).empty()) << "the next run did not clear the leftover";
  EXPECT_EQ(test::run_command(test::binary() + " verify " + out.string(), &output), 0) << output;
}

TEST_F(PackFaults, MergeFailsCleanly) {
  const fs::path dir = test::temp_dir("merge-faults");
  std::string output;
  ASSERT_EQ(test::run_command(pack_command(dir / "a", "--layers 0-1"), &output), 0) << output;
  ASSERT_EQ(test::run_command(pack_command(dir / "b", "--layers 2-3"), &output), 0) << output;
  auto merge_to = [&](const fs::path& out) {
    return test::binary() + " merge " + (dir / "a").string() + " " + (dir / "b").string() + " -o " + out.string();
  };
  ASSERT_EQ(test::run_command(merge_to(dir / "m"), &output), 0) << output;
  const uint64_t written = total_bytes(dir / "m");
  const auto before = test::snapshot(dir / "m");
  for (uint64_t budget : {uint64_t(0), written / 2, written - 64}) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    const int rc = test::run_command(with_fault(budget, merge_to(dir / "m") + " --force"), &output);
    expect_clean_failure(rc, output, dir / "m");
    EXPECT_TRUE(test::snapshot(dir / "m") == before) << "the previous merged output changed";
    const int rc_new = test::run_command(with_fault(budget, merge_to(dir / "m2")), &output);
    expect_clean_failure(rc_new, output, dir / "m2");
    EXPECT_FALSE(fs::exists(dir / "m2"));
  }
}

}  // namespace
}  // namespace eq
