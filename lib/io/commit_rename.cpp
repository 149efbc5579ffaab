#include "io/commit_rename.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "io/fault_env.h"

namespace eq::io {

namespace {

struct RenameHook {
  uint64_t after = std::numeric_limits<uint64_t>::max();
  bool kill = false;
  bool no_exchange = false;
};

// Read once per process; a malformed value disables the hook.
const RenameHook& rename_hook() {
  static const RenameHook hook = [] {
    RenameHook h;
    if (!env_u64("EQ_FAULT_RENAME_AFTER", &h.after) && env_u64("EQ_FAULT_KILL_AFTER_RENAMES", &h.after)) h.kill = true;
    const char* nx = std::getenv("EQ_FAULT_NO_EXCHANGE");
    h.no_exchange = nx && *nx && *nx != '0';
    return h;
  }();
  return hook;
}

std::atomic<uint64_t> g_renames{0};

// false (errno = EIO) when the hook fails this step; kills the process when
// the hook says so; otherwise counts the step.
bool step_allowed() {
  const RenameHook& h = rename_hook();
  if (h.after == std::numeric_limits<uint64_t>::max()) return true;
  if (g_renames.fetch_add(1) < h.after) return true;
  if (h.kill) ::kill(::getpid(), SIGKILL);
  errno = EIO;
  return false;
}

int exchange(const std::string& a, const std::string& b) {
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
}

}  // namespace

bool commit_rename(const std::string& from, const std::string& to) {
  if (!step_allowed()) return false;
  return std::rename(from.c_str(), to.c_str()) == 0;
}

bool commit_exchange(const std::string& a, const std::string& b) {
  if (rename_hook().no_exchange) {
    errno = EINVAL;
    return false;
  }
  if (!step_allowed()) return false;
  return exchange(a, b) == 0;
}

bool exchange_unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

void undo_rename(const std::string& from, const std::string& to) { (void)std::rename(from.c_str(), to.c_str()); }

void undo_exchange(const std::string& a, const std::string& b) { (void)exchange(a, b); }

}  // namespace eq::io
