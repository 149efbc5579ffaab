// Fault injection on writes, in-process: a forked child writes under a file
// size limit (RLIMIT_FSIZE, the kernel's EFBIG) and the parent checks that the
// writer failed with a clear error and left neither a final-named file nor a
// temporary behind, and that a previous file of the same name is untouched.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ChildResult {
  int exit_code = -1;
  std::string message;  // what the child's eq::Error said
};

// Runs `write` in a forked child limited to `max_file_bytes` per file. Exit
// code 0: it succeeded; the eq::Error exit code otherwise; 99: another exception.
ChildResult run_limited(uint64_t max_file_bytes, const std::function<void()>& write) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);  // as apps/expertquant/main.cpp: EFBIG instead of a kill
    struct rlimit limit = {max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 0;
    std::string message;
    try {
      write();
    } catch (const Error& e) {
      code = e.exit_code();
      message = e.what();
    } catch (const std::exception& e) {
      code = 99;
      message = e.what();
    }
    if (!message.empty() && ::write(pipe_fds[1], message.data(), message.size()) < 0) code = 98;
    ::close(pipe_fds[1]);
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) r.message.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Two tensors, 4 KiB of data in all: limits below cut the header, the first or
// the second tensor.
void write_sample(const fs::path& path, uint8_t fill) {
  static std::vector<uint8_t> a(1024 * 3), b(1024);
  std::fill(a.begin(), a.end(), fill);
  std::fill(b.begin(), b.end(), static_cast<uint8_t>(fill + 1));
  const io::TensorToWrite tensors[] = {{"a", DType::kF32, {768}, a}, {"b", DType::kU8, {1024}, b}};
  io::write_safetensors(path.string(), tensors);
}

TEST(WriteFaults, SafetensorsFailsCleanlyAtEveryStage) {
  const fs::path dir = test::temp_dir("st-faults");
  const fs::path path = dir / "model.safetensors";
  for (uint64_t limit : {0ull, 5ull, 64ull, 200ull, 1024ull, 3000ull, 4000ull}) {
    SCOPED_TRACE("RLIMIT_FSIZE " + std::to_string(limit));
    const ChildResult r = run_limited(limit, [&] { write_sample(path, 7); });
    EXPECT_EQ(r.exit_code, static_cast<int>(ErrorKind::kIo)) << r.message;
    EXPECT_NE(r.message.find("write failed"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(".tmp"), std::string::npos) << "the error names the file: " << r.message;
    EXPECT_FALSE(fs::exists(path)) << "a final-named file survived the failure";
    EXPECT_FALSE(fs::exists(path.string() + ".tmp")) << "the temporary file was left behind";
  }
  // Without a limit the same write succeeds and validates.
  EXPECT_EQ(run_limited(RLIM_INFINITY, [&] { write_sample(path, 7); }).exit_code, 0);
  EXPECT_NO_THROW(io::SafetensorsFile::open(path.string()));
}

TEST(WriteFaults, SafetensorsFailureLeavesPreviousFileUntouched) {
  const fs::path dir = test::temp_dir("st-previous");
  const fs::path path = dir / "model.safetensors";
  write_sample(path, 1);
  const std::string before = slurp(path);
  for (uint64_t limit : {0ull, 100ull, 2500ull, 4000ull}) {
    SCOPED_TRACE("RLIMIT_FSIZE " + std::to_string(limit));
    const ChildResult r = run_limited(limit, [&] { write_sample(path, 2); });
    EXPECT_EQ(r.exit_code, static_cast<int>(ErrorKind::kIo)) << r.message;
    EXPECT_EQ(slurp(path), before) << "the previous file changed";
    EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  }
}

TEST(WriteFaults, AtomicSmallFileFailsCleanly) {
  const fs::path dir = test::temp_dir("atomic-faults");
  const fs::path path = dir / "report.json";
  io::write_file_atomic(path.string(), "{\"previous\": true}\n");
  const std::string big(10000, 'x');
  for (uint64_t limit : {0ull, 1ull, 4096ull, 9999ull}) {
    SCOPED_TRACE("RLIMIT_FSIZE " + std::to_string(limit));
    const ChildResult r = run_limited(limit, [&] { io::write_file_atomic(path.string(), big); });
    EXPECT_EQ(r.exit_code, static_cast<int>(ErrorKind::kIo)) << r.message;
    EXPECT_EQ(slurp(path), "{\"previous\": true}\n");
    EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  }
}

// One output made of several files (profile.json + sidecar, report JSON +
// HTML): a failure in any of them changes none of the final names.
TEST(WriteFaults, MultiFileOutputIsAllOrNothing) {
  const fs::path dir = test::temp_dir("multi-faults");
  const fs::path a = dir / "report.json", b = dir / "report.html", side = dir / "p.importance.safetensors";
  auto write_all_three = [&](char fill) {
    write_sample(side.string() + ".partial", static_cast<uint8_t>(fill));  // 4 KiB + header, staged
    io::write_files_atomic({{a.string(), std::string(3000, fill)}, {b.string(), std::string(6000, fill)}},
                           {{side.string() + ".partial", side.string()}});
  };
  write_all_three('o');
  const std::string before_a = slurp(a), before_b = slurp(b), before_side = slurp(side);
  // Per-file limits: 0 and 2000 cut the staged sidecar; 5000 lets the sidecar
  // (4.2 KB) and the first file through and cuts the second.
  for (uint64_t limit : {0ull, 2000ull, 5000ull}) {
    SCOPED_TRACE("RLIMIT_FSIZE " + std::to_string(limit));
    const ChildResult r = run_limited(limit, [&] { write_all_three('n'); });
    EXPECT_EQ(r.exit_code, static_cast<int>(ErrorKind::kIo)) << r.message;
    EXPECT_NE(r.message.find("write failed"), std::string::npos) << r.message;
    EXPECT_EQ(slurp(a), before_a) << "a file of the failed output replaced its previous version";
    EXPECT_EQ(slurp(b), before_b);
    EXPECT_EQ(slurp(side), before_side);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    EXPECT_EQ(entries, 3u) << "a temporary or staged file was left behind";
  }
  // Without a limit all three are replaced.
  ASSERT_EQ(run_limited(RLIM_INFINITY, [&] { write_all_three('n'); }).exit_code, 0);
  EXPECT_EQ(slurp(a), std::string(3000, 'n'));
  EXPECT_EQ(slurp(b), std::string(6000, 'n'));
  EXPECT_NE(slurp(side), before_side);
  EXPECT_FALSE(fs::exists(side.string() + ".partial"));
}

}  // namespace
}  // namespace eq
