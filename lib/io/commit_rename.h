// The renames that publish an output: the last steps of a commit
// (io::write_files_atomic, pack::OutputFolder::commit). They go through here
// so that the hardening tests can make any one of them fail or kill the
// process just before it (test hooks, docs/reliability.md "Fault injection"):
//   EQ_FAULT_RENAME_AFTER=N        the rename after N successful ones fails (EIO)
//   EQ_FAULT_KILL_AFTER_RENAMES=N  SIGKILL just before the rename after N ones
//   EQ_FAULT_NO_EXCHANGE=1         commit_exchange reports EINVAL (no RENAME_EXCHANGE)
// Rollback steps use the plain functions below (undo_*): never counted, never failed.
#pragma once

#include <string>

namespace eq::io {

// rename(2); false with errno set on failure.
bool commit_rename(const std::string& from, const std::string& to);
// Swaps two existing paths in one step (renameat2 RENAME_EXCHANGE): neither
// name is ever missing. false with errno set; see exchange_unsupported.
bool commit_exchange(const std::string& a, const std::string& b);
// errno values of commit_exchange that mean "this kernel or filesystem cannot
// exchange" (callers then fall back to a pair of renames).
bool exchange_unsupported(int err);

// Best-effort steps of a rollback (errors ignored: the caller reports the
// original failure).
void undo_rename(const std::string& from, const std::string& to);
void undo_exchange(const std::string& a, const std::string& b);

}  // namespace eq::io
