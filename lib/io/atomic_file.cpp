#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace eq::io {

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
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

}  // namespace eq::io
