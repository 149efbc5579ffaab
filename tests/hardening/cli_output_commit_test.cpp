// The commit of a pack/merge output folder (lib/pack/output.h), end to end on
// data/tinymoe: one run per destination (a second one fails at once and
// touches nothing), a staging folder never holds a manifest.json, --force
// never leaves OUT missing (RENAME_EXCHANGE), and a run killed or failing at
// any step of the commit leaves OUT as it was or as the new output once the
// next run has recovered. The steps are hit exactly by the rename hooks
// (EQ_FAULT_RENAME_AFTER, EQ_FAULT_KILL_AFTER_RENAMES, EQ_FAULT_NO_EXCHANGE;
// lib/io/commit_rename.h).
#include <gtest/gtest.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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

// The files that identify which pack a folder holds: shards and index (the
// manifest's timing fields differ between runs of the same pack).
std::map<std::string, std::string> pack_data(const fs::path& dir) {
  auto files = test::snapshot(dir);
  std::erase_if(files, [](const auto& kv) { return !kv.first.ends_with(".safetensors"); });
  return files;
}

std::string pack_command(const fs::path& out, const std::string& format, const std::string& extra = "") {
  return test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() + " --uniform " + format +
         " --threads 1 -o " + out.string() + " " + extra;
}

int verify(const fs::path& dir, std::string* output) {
  return test::run_command(test::binary() + " verify " + dir.string(), output);
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// No folder beside OUT but OUT itself holds a manifest.json.
void expect_only_out_has_a_manifest(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    if (e.is_directory() && e.path() != out) {
      EXPECT_FALSE(fs::exists(e.path() / "manifest.json")) << e.path() << " looks like a complete pack";
    }
}

class OutputCommit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = test::temp_dir("commit-ref");
    old_ = new fs::path(dir / "old");
    new_ = new fs::path(dir / "new");
    std::string output;
    ASSERT_EQ(test::run_command(pack_command(*old_, "int8_row"), &output), 0) << output;
    ASSERT_EQ(test::run_command(pack_command(*new_, "bf16"), &output), 0) << output;
    ASSERT_NE(pack_data(*old_), pack_data(*new_));
  }
  static void TearDownTestSuite() {
    delete old_;
    delete new_;
  }
  // A fresh folder holding a copy of the previous output at <dir>/packed.
  static fs::path previous_output(const std::string& tag) {
    const fs::path out = test::temp_dir(tag) / "packed";
    fs::copy(*old_, out, fs::copy_options::recursive);
    return out;
  }
  static fs::path *old_, *new_;
};
fs::path *OutputCommit::old_ = nullptr, *OutputCommit::new_ = nullptr;

TEST_F(OutputCommit, RunOnALockedOutputFailsAndTouchesNothing) {
  const fs::path out = previous_output("commit-locked");
  const auto before = test::snapshot(out);
  // Another run holds the lock (as a live pack or merge does for its whole run).
  const fs::path lock = out.parent_path() / ".packed.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  std::string output;
  for (const std::string& cmd : {pack_command(out, "bf16", "--force"),
                                test::binary() + " merge " + old_->string() + " -o " + out.string() + " --force"}) {
    SCOPED_TRACE(cmd);
    const int rc = test::run_command(cmd, &output);
    EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << output;
    EXPECT_EQ(count_lines(output), 1) << output;
    EXPECT_NE(output.find("output " + out.string() + " is being written by another run"), std::string::npos) << output;
    EXPECT_TRUE(test::snapshot(out) == before) << "the loser changed the winner's output";
    EXPECT_TRUE(test::output_leftovers(out).empty()) << "the loser created a staging folder";
  }
  ::close(fd);
  ASSERT_EQ(test::run_command(pack_command(out, "bf16", "--force"), &output), 0) << output;
  EXPECT_EQ(pack_data(out), pack_data(*new_));
}

// Two runs started together: one wins; the other fails cleanly (locked) or,
// when it started after the winner had finished, replaces the output whole.
// Either way OUT holds exactly one run's pack and verifies.
TEST_F(OutputCommit, ConcurrentPacksNeverMix) {
  const fs::path out = previous_output("commit-race");
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const fs::path logs = out.parent_path();
    std::string output;
    const std::string a = pack_command(out, "int8_row", "--force") + " >" + (logs / "a.log").string() + " 2>&1",
                      b = pack_command(out, "bf16", "--force") + " >" + (logs / "b.log").string() + " 2>&1";
    ASSERT_EQ(test::run_command("(" + a + "; echo $? >" + (logs / "a.rc").string() + ") & (" + b + "; echo $? >" +
                                    (logs / "b.rc").string() + ") & wait",
                                &output),
              0)
        << output;
    int winners = 0;
    for (const char* who : {"a", "b"}) {
      std::ifstream rc_in(logs / (std::string(who) + ".rc"));
      int rc = -1;
      rc_in >> rc;
      std::ifstream log_in(logs / (std::string(who) + ".log"));
      const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
      if (rc == 0) {
        ++winners;
      } else {
        EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << who << ": " << log;
        EXPECT_NE(log.find("is being written by another run"), std::string::npos) << who << ": " << log;
        EXPECT_EQ(count_lines(log), 1) << log;
      }
    }
    EXPECT_GE(winners, 1);
    EXPECT_EQ(verify(out, &output), 0) << output;
    const auto data = pack_data(out);
    EXPECT_TRUE(data == pack_data(*old_) || data == pack_data(*new_)) << "OUT holds shards of both runs";
    EXPECT_TRUE(test::output_leftovers(out).empty());
  }
}

// SIGKILL before each rename of the commit of `pack --force`. With
// RENAME_EXCHANGE: hide the old manifest, exchange, final manifest name (3
// steps); without: hide, move OUT aside, move the new folder in, manifest
// (4). After the kill: OUT exists (exchange) and no other folder holds a
// manifest.json; a staged OUT is refused by verify. The next run (here one
// without --force, which then refuses the existing OUT) recovers: OUT holds
// the previous or the new pack, whole, and verifies; nothing is left beside it.
TEST_F(OutputCommit, KillAtEachCommitStepIsRecoveredByTheNextRun) {
  for (const std::string mode : {"", "EQ_FAULT_NO_EXCHANGE=1 "}) {
    const int steps = mode.empty() ? 3 : 4;
    for (int n = 0; n < steps; ++n) {
      SCOPED_TRACE(mode + "EQ_FAULT_KILL_AFTER_RENAMES=" + std::to_string(n));
      const fs::path out = previous_output("commit-kill");
      std::string output;
      const int rc = test::run_command(
          mode + "EQ_FAULT_KILL_AFTER_RENAMES=" + std::to_string(n) + " " + pack_command(out, "bf16", "--force"), &output);
      ASSERT_EQ(rc, 128 + 9) << "expected a SIGKILL: " << output;
      if (mode.empty()) {
        EXPECT_TRUE(fs::is_directory(out)) << "--force left no OUT";
      }
      expect_only_out_has_a_manifest(out);
      if (fs::exists(out) && !fs::exists(out / "manifest.json")) {
        const int vrc = verify(out, &output);
        EXPECT_NE(vrc, 0) << "a folder without its final manifest was accepted: " << output;
        EXPECT_EQ(count_lines(output), 1) << output;
      }
      const int next = test::run_command(pack_command(out, "bf16"), &output);
      EXPECT_EQ(next, static_cast<int>(ErrorKind::kInvalidInput)) << output;
      EXPECT_NE(output.find("already exists"), std::string::npos) << output;
      EXPECT_EQ(verify(out, &output), 0) << output;
      const auto data = pack_data(out);
      EXPECT_TRUE(data == pack_data(*old_) || data == pack_data(*new_)) << "OUT is neither pack";
      EXPECT_TRUE(test::output_leftovers(out).empty()) << "the next run left the killed run's folders";
    }
  }
}

// A kill while committing a new OUT (no previous one): OUT appears before its
// manifest has its final name; verify refuses it until the next run finishes
// the rename.
TEST_F(OutputCommit, KillWhileCommittingANewOutput) {
  const fs::path out = test::temp_dir("commit-kill-new") / "packed";
  std::string output;
  ASSERT_EQ(test::run_command("EQ_FAULT_KILL_AFTER_RENAMES=1 " + pack_command(out, "bf16"), &output), 128 + 9) << output;
  ASSERT_TRUE(fs::exists(out / "manifest.json.staged"));
  EXPECT_FALSE(fs::exists(out / "manifest.json"));
  EXPECT_NE(verify(out, &output), 0) << output;
  EXPECT_EQ(test::run_command(pack_command(out, "bf16"), &output), static_cast<int>(ErrorKind::kInvalidInput)) << output;
  EXPECT_EQ(verify(out, &output), 0) << output;
  EXPECT_EQ(pack_data(out), pack_data(*new_));
}

// A rename failing at each commit step: exit 3, one line, OUT byte-identical.
TEST_F(OutputCommit, FailedCommitStepLeavesThePreviousOutput) {
  for (const std::string mode : {"", "EQ_FAULT_NO_EXCHANGE=1 "}) {
    const int steps = mode.empty() ? 3 : 4;
    for (int n = 0; n < steps; ++n) {
      SCOPED_TRACE(mode + "EQ_FAULT_RENAME_AFTER=" + std::to_string(n));
      const fs::path out = previous_output("commit-fail");
      const auto before = test::snapshot(out);
      std::string output;
      const int rc = test::run_command(
          mode + "EQ_FAULT_RENAME_AFTER=" + std::to_string(n) + " " + pack_command(out, "bf16", "--force"), &output);
      EXPECT_EQ(rc, static_cast<int>(ErrorKind::kIo)) << output;
      EXPECT_EQ(count_lines(output), 1) << output;
      EXPECT_NE(output.find("left as it was"), std::string::npos) << output;
      EXPECT_TRUE(test::snapshot(out) == before) << "the previous output changed";
      EXPECT_TRUE(test::output_leftovers(out).empty());
    }
  }
}

}  // namespace
}  // namespace eq
