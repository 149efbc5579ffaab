// Read-only memory mapping of a whole file (empty files map to an empty span).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace eq::io {

class MappedFile {
 public:
  MappedFile() = default;
  // Opens through InputFile (never blocks; regular files only). Throws
  // eq::Error naming the path on failure.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // madvise(DONTNEED) on a byte range: lets the OS drop pages we streamed through.
  void release(uint64_t offset, uint64_t length) const;
  // Read-ahead for faults in a byte range: off (random: a fault reads its
  // page alone) or the kernel's default (normal). A few pages read from a
  // tensor otherwise bring in the default read-around of megabytes.
  void set_random_access(uint64_t offset, uint64_t length, bool random) const;

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace eq::io
