// Writing files so that a reader never sees a partial result: data goes to
// "<path>.tmp", is fsynced, then renamed over <path> (and the folder fsynced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eq::io {

// Writes all bytes to fd or throws eq::Error (kIo) naming `path`.
void write_all(int fd, const void* data, size_t n, const std::string& path);
// fsync + close + rename(tmp, path) + fsync(parent folder); throws on failure.
// Always closes fd, also when it throws.
void commit_file(int fd, const std::string& tmp_path, const std::string& path);
// Creates/truncates a file for writing; throws naming the path.
int create_file(const std::string& path);
// Writes a whole small file atomically (JSON reports, manifests, configs).
void write_file_atomic(const std::string& path, std::string_view contents);

// Writes one output made of several files (profile.json + its importance
// sidecar, an eval report's JSON + HTML) all or nothing: every file is written
// and fsynced as "<path>.tmp"; only when all are complete are the `staged`
// files (already complete under a temporary name, e.g. a safetensors sidecar
// written to "<final>.partial") and then the temporaries renamed into place, in
// order. A failed write removes every temporary and staged file: no final name
// changes. An existing final file is swapped with its replacement
// (RENAME_EXCHANGE; a rename aside where the filesystem cannot), so that a
// rename failing part-way puts back every file already replaced: all files are
// replaced or none. Only a kill inside the rename loop (a few syscalls) can
// leave some files renamed and others not.
struct FileText {
  std::string path;
  std::string contents;
};
struct StagedFile {
  std::string staged_path, final_path;
};
void write_files_atomic(const std::vector<FileText>& files, const std::vector<StagedFile>& staged = {});
// fsyncs a directory (after creating or renaming entries in it).
void fsync_dir(const std::string& dir);

}  // namespace eq::io
