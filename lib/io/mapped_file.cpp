#include "io/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "io/input_file.h"

namespace eq::io {

MappedFile::MappedFile(const std::string& path) {
  const InputFile file(path);
  size_ = file.size();
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (p == MAP_FAILED) fail(ErrorKind::kIo, path + ": cannot mmap: " + std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
  }
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
  if (!data_ || length == 0) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t begin = (offset + page - 1) / page * page;  // only whole pages inside the range
  uint64_t end = (offset + length) / page * page;
  if (end > begin) madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

void MappedFile::set_random_access(uint64_t offset, uint64_t length, bool random) const {
  if (!data_ || length == 0 || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;  // every page the range touches
  const uint64_t end = std::min(size_, offset + length);
  madvise(const_cast<uint8_t*>(data_) + begin, end - begin, random ? MADV_RANDOM : MADV_NORMAL);
}

}  // namespace eq::io
