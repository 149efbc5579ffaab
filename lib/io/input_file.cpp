#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace eq::io {

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(ErrorKind::kIo, path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    fail(ErrorKind::kIo, path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    invalid(path + ": not a regular file");
  }
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(fd_);
    fail(ErrorKind::kIo, path + ": cannot clear O_NONBLOCK: " + std::strerror(e));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

bool optional_input_present(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    fail(ErrorKind::kIo, path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) InputFile refuse(path);  // throws "not a regular file"
  return true;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read(void* buf, size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd_, buf, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) fail(ErrorKind::kIo, path_ + ": cannot read: " + std::strerror(errno));
  }
}

size_t InputFile::read_full(void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t r = read(static_cast<char*>(buf) + got, n - got);
    if (r == 0) break;
    got += r;
  }
  return got;
}

}  // namespace eq::io
