// Fault injection on the outputs of `expertquant profile` (profile.json, its
// importance sidecar, the --heatmap SVG) and `expertquant eval` (--json-out,
// --html), end to end on the bundled model with small settings. Writes fail
// through EQ_FAULT_WRITE_AFTER_BYTES (ENOSPC after N bytes), `ulimit -f`
// (EFBIG), or the process is killed mid-write (EQ_FAULT_KILL_AFTER_BYTES,
// SIGKILL). Every case: non-zero exit; for the failures a one-line error naming
// the file; no final-named output appears; previous outputs stay byte-identical.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[e.path().filename().string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

// The snapshot without the temporaries a killed process may leave
// (<name>.tmp, <name>.partial): what a reader looking for the outputs sees.
std::map<std::string, std::string> final_names(std::map<std::string, std::string> files) {
  std::erase_if(files, [](const auto& kv) { return kv.first.ends_with(".tmp") || kv.first.ends_with(".partial"); });
  return files;
}

std::string with_env(const std::string& var, uint64_t bytes, const std::string& command) {
  return var + "=" + std::to_string(bytes) + " " + command;
}

void expect_write_error(int rc, const std::string& output, const std::string& file_stem) {
  EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << output;
  EXPECT_NE(output.find("expertquant: error:"), std::string::npos) << output;
  EXPECT_NE(output.find(file_stem), std::string::npos) << "the error names the file: " << output;
}

// ---------------------------------------------------------------- profile ---

// `tokens` differs between the previous output and the failing run, so that a
// file replaced by the failing run cannot happen to be byte-identical.
std::string profile_command(const fs::path& dir, int tokens = 128) {
  return test::binary() + " profile --model " + (test::data_dir() / "tinymoe").string() + " --calib " +
         (test::data_dir() / "corpus" / "calib_small.txt.zst").string() + " --max-tokens " + std::to_string(tokens) +
         " --ctx 64 --no-sensitivity --threads 1 --force -o " + (dir / "profile.json").string() + " --heatmap " +
         (dir / "heatmap.svg").string();
}

class ProfileOutputFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path sizes = test::temp_dir("profile-faults-sizes");
    std::string output;
    ASSERT_EQ(test::run_command(profile_command(sizes), &output), 0) << output;
    const auto files = snapshot(sizes);
    ASSERT_EQ(files.size(), 3u) << "profile.json, the sidecar and the heatmap";
    ASSERT_TRUE(files.count("profile.importance.safetensors")) << output;
    sidecar_ = files.at("profile.importance.safetensors").size();
    json_ = files.at("profile.json").size();
    for (const auto& [name, bytes] : files) total_ += bytes.size();
    // The previous output: another calibration length, so every file differs.
    reference_ = new fs::path(test::temp_dir("profile-faults-ref"));
    ASSERT_EQ(test::run_command(profile_command(*reference_, 64), &output), 0) << output;
    for (const auto& [name, bytes] : snapshot(*reference_)) ASSERT_NE(bytes, files.at(name)) << name;
  }
  static void TearDownTestSuite() { delete reference_; }
  // Cut points: nothing, inside the sidecar's header, mid-sidecar, inside
  // profile.json, inside the heatmap (written last; timing fields in
  // profile.json vary by a few bytes between runs, hence the margin).
  static std::vector<uint64_t> cut_points() {
    return {0, 100, sidecar_ / 2, sidecar_ + json_ / 2, total_ - 64};
  }
  static fs::path* reference_;
  static uint64_t sidecar_, json_, total_;
};
fs::path* ProfileOutputFaults::reference_ = nullptr;
uint64_t ProfileOutputFaults::sidecar_ = 0, ProfileOutputFaults::json_ = 0, ProfileOutputFaults::total_ = 0;

TEST_F(ProfileOutputFaults, FailedWriteLeavesNoOutput) {
  const fs::path dir = test::temp_dir("profile-faults-new");
  for (uint64_t budget : cut_points()) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_WRITE_AFTER_BYTES", budget, profile_command(dir)), &output);
    expect_write_error(rc, output, dir.string() + "/");
    EXPECT_NE(output.find("write failed"), std::string::npos) << output;
    EXPECT_TRUE(snapshot(dir).empty()) << "a file of the failed profile output (or a temporary) survived";
  }
  std::string output;
  ASSERT_EQ(test::run_command(with_env("EQ_FAULT_WRITE_AFTER_BYTES", total_ + 4096, profile_command(dir)), &output), 0)
      << output;
  EXPECT_EQ(snapshot(dir).size(), 3u);
}

TEST_F(ProfileOutputFaults, FailedWriteLeavesPreviousOutputUntouched) {
  const fs::path dir = test::temp_dir("profile-faults-previous");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (uint64_t budget : cut_points()) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_WRITE_AFTER_BYTES", budget, profile_command(dir)), &output);
    expect_write_error(rc, output, dir.string() + "/");
    EXPECT_TRUE(snapshot(dir) == before) << "the previous profile output changed";
  }
}

TEST_F(ProfileOutputFaults, FileSizeLimitGivesAnErrorAndKeepsPreviousOutput) {
  // `ulimit -f 1`: 512 or 1024 bytes, below the sidecar's size.
  ASSERT_GT(sidecar_, 1024u);
  const fs::path dir = test::temp_dir("profile-faults-ulimit");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  std::string output;
  const int rc = test::run_command("ulimit -f 1 && " + profile_command(dir), &output);
  expect_write_error(rc, output, dir.string() + "/");
  EXPECT_NE(output.find("File too large"), std::string::npos) << output;
  EXPECT_TRUE(snapshot(dir) == before);
}

TEST_F(ProfileOutputFaults, KillDuringOutputLeavesPreviousProfileIntact) {
  const fs::path dir = test::temp_dir("profile-faults-kill");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (uint64_t budget : cut_points()) {
    SCOPED_TRACE("EQ_FAULT_KILL_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_KILL_AFTER_BYTES", budget, profile_command(dir)), &output);
    EXPECT_EQ(rc, 128 + 9) << "expected a SIGKILL: " << output;
    // Temporaries may remain; every final name holds exactly the previous bytes.
    EXPECT_TRUE(final_names(snapshot(dir)) == before) << "a kill during output changed the previous profile";
  }
  // The next run replaces everything and leaves no temporaries.
  std::string output;
  ASSERT_EQ(test::run_command(profile_command(dir), &output), 0) << output;
  const auto after = snapshot(dir);
  EXPECT_EQ(after.size(), 3u) << "temporaries left after a successful run";
  EXPECT_TRUE(final_names(after) == after);
}

// A rename failing part-way through the commit (the sidecar, profile.json and
// the heatmap are renamed in that order): the files already renamed are put
// back, so every previous file stays byte-identical and no temporary remains.
// EQ_FAULT_NO_EXCHANGE=1 runs the same on the fallback without RENAME_EXCHANGE
// (originals moved aside, two renames per file).
TEST_F(ProfileOutputFaults, FailedRenameRollsBackEveryReplacedFile) {
  const fs::path dir = test::temp_dir("profile-faults-rename");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (const std::string mode : {"", "EQ_FAULT_NO_EXCHANGE=1 "}) {
    for (uint64_t after = 0; after < (mode.empty() ? 3u : 6u); ++after) {
      SCOPED_TRACE(mode + "EQ_FAULT_RENAME_AFTER=" + std::to_string(after));
      std::string output;
      const int rc = test::run_command(mode + with_env("EQ_FAULT_RENAME_AFTER", after, profile_command(dir)), &output);
      expect_write_error(rc, output, dir.string() + "/");
      EXPECT_NE(output.find("cannot rename"), std::string::npos) << output;
      EXPECT_TRUE(snapshot(dir) == before) << "a failed rename left a file of the new output (or a temporary)";
    }
  }
  std::string output;
  ASSERT_EQ(test::run_command("EQ_FAULT_RENAME_AFTER=3 " + profile_command(dir), &output), 0) << output;
  const auto after = snapshot(dir);
  EXPECT_EQ(after.size(), 3u) << "originals or temporaries left after a successful run";
  for (const auto& [name, bytes] : after) EXPECT_NE(bytes, before.at(name)) << name << " was not replaced";
}

// ------------------------------------------------------------------- eval ---

class EvalOutputFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = test::temp_dir("eval-faults-ref");
    packed_ = new fs::path(dir / "packed");
    std::string output;
    ASSERT_EQ(test::run_command(test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() +
                                    " --uniform int8_row --threads 1 -o " + packed_->string(),
                                &output),
              0)
        << output;
    const fs::path sizes = dir / "sizes";
    fs::create_directories(sizes);
    ASSERT_EQ(test::run_command(eval_command(sizes), &output), 0) << output;
    const auto files = snapshot(sizes);
    ASSERT_EQ(files.size(), 2u);
    json_ = files.at("report.json").size();
    total_ = json_ + files.at("report.html").size();
    // The previous report: fewer tokens, so both files differ from a new one.
    reference_ = new fs::path(dir / "report");
    fs::create_directories(*reference_);
    ASSERT_EQ(test::run_command(eval_command(*reference_, 100), &output), 0) << output;
  }
  static void TearDownTestSuite() {
    delete packed_;
    delete reference_;
  }
  static std::string eval_command(const fs::path& dir, int tokens = 200) {
    return test::binary() + " eval --packed " + packed_->string() + " --model " +
           (test::data_dir() / "tinymoe").string() + " --text " +
           (test::data_dir() / "corpus" / "eval_python.txt.zst").string() +
           " --max-tokens " + std::to_string(tokens) + " --ctx 64 --no-latency --no-collapse --threads 1 --json-out " +
           (dir / "report.json").string() + " --html " + (dir / "report.html").string();
  }
  // Nothing, inside the JSON, just after it (inside the HTML), the HTML's end.
  static std::vector<uint64_t> cut_points() { return {0, json_ / 2, json_ + 100, total_ - 64}; }
  static fs::path *packed_, *reference_;
  static uint64_t json_, total_;
};
fs::path *EvalOutputFaults::packed_ = nullptr, *EvalOutputFaults::reference_ = nullptr;
uint64_t EvalOutputFaults::json_ = 0, EvalOutputFaults::total_ = 0;

TEST_F(EvalOutputFaults, FailedWriteLeavesNoReport) {
  const fs::path dir = test::temp_dir("eval-faults-new");
  for (uint64_t budget : cut_points()) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_WRITE_AFTER_BYTES", budget, eval_command(dir)), &output);
    expect_write_error(rc, output, (dir / "report.").string());
    EXPECT_NE(output.find("write failed"), std::string::npos) << output;
    EXPECT_TRUE(snapshot(dir).empty()) << "a report file (or a temporary) survived the failed eval";
  }
}

TEST_F(EvalOutputFaults, FailedWriteLeavesPreviousReportUntouched) {
  const fs::path dir = test::temp_dir("eval-faults-previous");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (uint64_t budget : cut_points()) {
    SCOPED_TRACE("EQ_FAULT_WRITE_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_WRITE_AFTER_BYTES", budget, eval_command(dir)), &output);
    expect_write_error(rc, output, (dir / "report.").string());
    EXPECT_TRUE(snapshot(dir) == before) << "the previous report changed (JSON and HTML are replaced together or not at all)";
  }
  std::string output;
  const int rc = test::run_command("ulimit -f 1 && " + eval_command(dir), &output);
  expect_write_error(rc, output, (dir / "report.").string());
  EXPECT_NE(output.find("File too large"), std::string::npos) << output;
  EXPECT_TRUE(snapshot(dir) == before);
}

TEST_F(EvalOutputFaults, KillDuringReportLeavesPreviousReportIntact) {
  const fs::path dir = test::temp_dir("eval-faults-kill");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (uint64_t budget : {json_ / 2, json_ + 100}) {
    SCOPED_TRACE("EQ_FAULT_KILL_AFTER_BYTES=" + std::to_string(budget));
    std::string output;
    const int rc = test::run_command(with_env("EQ_FAULT_KILL_AFTER_BYTES", budget, eval_command(dir)), &output);
    EXPECT_EQ(rc, 128 + 9) << "expected a SIGKILL: " << output;
    EXPECT_TRUE(final_names(snapshot(dir)) == before) << "a kill during the report changed the previous report";
  }
}

TEST_F(EvalOutputFaults, FailedRenameRollsBackTheJson) {
  const fs::path dir = test::temp_dir("eval-faults-rename");
  fs::copy(*reference_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto before = snapshot(dir);
  for (const std::string mode : {"", "EQ_FAULT_NO_EXCHANGE=1 "}) {
    for (uint64_t after = 0; after < (mode.empty() ? 2u : 4u); ++after) {
      SCOPED_TRACE(mode + "EQ_FAULT_RENAME_AFTER=" + std::to_string(after));
      std::string output;
      const int rc = test::run_command(mode + with_env("EQ_FAULT_RENAME_AFTER", after, eval_command(dir)), &output);
      expect_write_error(rc, output, (dir / "report.").string());
      EXPECT_TRUE(snapshot(dir) == before) << "a failed rename replaced the JSON without the HTML (or left a temporary)";
    }
  }
}

}  // namespace
}  // namespace eq
