// Writing files so that a reader never sees a partial result: data goes to
// "<path>.tmp", is fsynced, then renamed over <path> (and the folder fsynced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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
// fsyncs a directory (after creating or renaming entries in it).
void fsync_dir(const std::string& dir);

}  // namespace eq::io
