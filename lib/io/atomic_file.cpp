#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "io/commit_rename.h"

#include "io/fault_env.h"

namespace eq::io {

namespace {

// Test hooks (docs/reliability.md, "Fault injection"): with
// EQ_FAULT_WRITE_AFTER_BYTES=N in the environment, write_all behaves as if the
// disk filled up after N bytes written by this process: the write that would
// pass N writes what fits, then fails with ENOSPC. EQ_FAULT_KILL_AFTER_BYTES=N
// instead kills the process with SIGKILL at that point (a crash or `kill -9`
// in the middle of writing an output). Read once per process; a malformed
// value disables the hook. Lets the hardening tests check that every writer
// (shards, index, manifest, configs, profiles, reports) fails cleanly at any byte.
struct FaultHook {
  uint64_t budget = std::numeric_limits<uint64_t>::max();
  bool kill = false;
};

const FaultHook& fault_hook() {
  static const FaultHook hook = [] {
    FaultHook h;
    if (!env_u64("EQ_FAULT_WRITE_AFTER_BYTES", &h.budget) && env_u64("EQ_FAULT_KILL_AFTER_BYTES", &h.budget)) h.kill = true;
    return h;
  }();
  return hook;
}

uint64_t fault_write_budget() { return fault_hook().budget; }

std::atomic<uint64_t> g_bytes_written{0};

// How many of the next `n` bytes the fault hook lets through (all of them
// when the hook is off), and charges them.
size_t fault_allowance(size_t n) {
  const uint64_t budget = fault_write_budget();
  if (budget == std::numeric_limits<uint64_t>::max()) return n;
  uint64_t done = g_bytes_written.load();
  uint64_t allowed;
  do {
    allowed = done >= budget ? 0 : std::min<uint64_t>(n, budget - done);
  } while (!g_bytes_written.compare_exchange_weak(done, done + allowed));
  return static_cast<size_t>(allowed);
}

}  // namespace

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t allowed = fault_allowance(n);
    if (allowed == 0) {
      if (fault_hook().kill) ::kill(::getpid(), SIGKILL);
      fail(ErrorKind::kIo, path + ": write failed: " + std::strerror(ENOSPC) +
                               " (injected by EQ_FAULT_WRITE_AFTER_BYTES)");
    }
    ssize_t w = ::write(fd, p, allowed);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::kIo, path + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

int create_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorKind::kIo, path + ": cannot create: " + std::strerror(errno));
  return fd;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems do not allow opening folders
  ::fsync(fd);
  ::close(fd);
}

void commit_file(int fd, const std::string& tmp_path, const std::string& path) {
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    fail(ErrorKind::kIo, tmp_path + ": fsync failed: " + std::strerror(e));
  }
  if (::close(fd) != 0) fail(ErrorKind::kIo, tmp_path + ": close failed: " + std::strerror(errno));
  if (std::rename(tmp_path.c_str(), path.c_str()) != 0)
    fail(ErrorKind::kIo, "cannot rename " + tmp_path + " to " + path + ": " + std::strerror(errno));
  fsync_dir(std::filesystem::path(path).parent_path().string());
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  int fd = create_file(tmp);
  try {
    write_all(fd, contents.data(), contents.size(), tmp);
  } catch (...) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  try {
    commit_file(fd, tmp, path);  // closes fd whatever happens
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

void write_files_atomic(const std::vector<FileText>& files, const std::vector<StagedFile>& staged) {
  std::vector<std::string> tmps;
  auto discard = [&] {
    for (const auto& t : tmps) std::remove(t.c_str());
    for (const auto& s : staged) std::remove(s.staged_path.c_str());
  };
  try {
    for (const auto& f : files) {
      const std::string tmp = f.path + ".tmp";
      const int fd = create_file(tmp);
      tmps.push_back(tmp);
      try {
        write_all(fd, f.contents.data(), f.contents.size(), tmp);
        if (::fsync(fd) != 0) fail(ErrorKind::kIo, tmp + ": fsync failed: " + std::strerror(errno));
      } catch (...) {
        ::close(fd);
        throw;
      }
      if (::close(fd) != 0) fail(ErrorKind::kIo, tmp + ": close failed: " + std::strerror(errno));
    }
  } catch (...) {
    discard();
    throw;
  }
  // Everything is complete on disk: now the renames, staged files first. An
  // existing final file is swapped with its temporary (RENAME_EXCHANGE), so
  // the original stays under the temporary name until every file is in place:
  // a failed rename puts every earlier one back, and no final name changes.
  std::vector<std::pair<std::string, std::string>> renames;
  for (const auto& s : staged) renames.emplace_back(s.staged_path, s.final_path);
  for (size_t i = 0; i < files.size(); ++i) renames.emplace_back(tmps[i], files[i].path);
  for (const auto& [from, to] : renames) {
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      discard();
      fail(ErrorKind::kIo, "cannot replace " + to + ": it is a folder");
    }
  }
  // How each final name was reached, for the rollback.
  enum class Done { kCreated, kExchanged, kMovedAside };
  struct Step {
    std::string from, to, aside;
    Done done;
  };
  std::vector<Step> steps;
  auto roll_back = [&] {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (it->done == Done::kExchanged) {
        undo_exchange(it->from, it->to);  // the new file goes back to the temporary name
      } else {
        undo_rename(it->to, it->from);
        if (it->done == Done::kMovedAside) undo_rename(it->aside, it->to);
      }
    }
    discard();
  };
  for (const auto& [from, to] : renames) {
    struct stat st;
    const bool exists = ::lstat(to.c_str(), &st) == 0;
    Step step{from, to, "", Done::kCreated};
    bool ok;
    if (!exists) {
      ok = commit_rename(from, to);
    } else {
      step.done = Done::kExchanged;
      ok = commit_exchange(from, to);
      if (!ok && exchange_unsupported(errno)) {
        // No exchange here: keep the original under another name while the
        // new file takes its place (a window of one rename without it).
        step.done = Done::kMovedAside;
        step.aside = to + ".old-" + std::to_string(::getpid());
        ok = commit_rename(to, step.aside);
        if (ok) {
          ok = commit_rename(from, to);
          if (!ok) {
            const int e = errno;
            undo_rename(step.aside, to);
            errno = e;
          }
        }
      }
    }
    if (!ok) {
      const int e = errno;
      roll_back();
      fail(ErrorKind::kIo, "cannot rename " + from + " to " + to + ": " + std::strerror(e) +
                               (steps.empty() ? "" : " (the files renamed before it were put back)"));
    }
    steps.push_back(std::move(step));
  }
  // Every file is in place: drop the originals.
  for (const auto& s : steps) {
    if (s.done == Done::kExchanged) std::remove(s.from.c_str());
    if (s.done == Done::kMovedAside) std::remove(s.aside.c_str());
  }
  std::vector<std::string> dirs;
  for (const auto& [from, to] : renames) {
    const std::string d = std::filesystem::path(to).parent_path().string();
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  for (const auto& d : dirs) fsync_dir(d);
}

}  // namespace eq::io
