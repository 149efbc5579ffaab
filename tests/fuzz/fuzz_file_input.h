// For readers that only take a path (profile.json, routing traces): the
// input is written to one temporary file per process, then read back.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>


namespace eq::fuzz {

class TempInputFile {
 public:
  explicit TempInputFile(const std::string& name) {
    folder_ = (std::filesystem::temp_directory_path() / "eq_fuzz_file_XXXXXX").string();
    if (!::mkdtemp(folder_.data())) std::abort();
    path_ = folder_ + "/" + name;
  }
  ~TempInputFile() {
    std::error_code ec;
    std::filesystem::remove_all(folder_, ec);
  }
  // A plain write: no fsync, which would dominate the time per input.
  const std::string& write(std::span<const uint8_t> bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path_;
  }

 private:
  std::string folder_, path_;
};

}  // namespace eq::fuzz
