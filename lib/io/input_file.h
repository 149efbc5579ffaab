// Opening a file the tool reads. Every reader (shards, index, config.json,
// manifest, profile, policy, token files, texts, traces, sidecars) opens its
// input here, so none can block: the file is opened with O_NONBLOCK (a FIFO
// or a device would otherwise wait forever for a writer in open()), checked
// to be a regular file, and only then switched back to blocking reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace eq::io {

class InputFile {
 public:
  // Throws eq::Error naming the path: kIo when it cannot be opened or read,
  // kInvalidInput ("not a regular file") for a FIFO, device, socket or folder.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open time
  const std::string& path() const { return path_; }
  // Reads up to n bytes at the current position (retrying on EINTR); returns
  // 0 at the end of the file. Throws kIo naming the path.
  size_t read(void* buf, size_t n);
  // Reads until n bytes or the end of the file; returns the count.
  size_t read_full(void* buf, size_t n);

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Whether an optional input (a side file that may or may not ship) is there:
// false when nothing is at `path`, true for a regular file; anything else (a
// FIFO, a folder, a device) is refused as InputFile refuses it, never taken
// for an absent file and silently skipped.
bool optional_input_present(const std::string& path);

}  // namespace eq::io
