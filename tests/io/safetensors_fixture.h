// Builds safetensors files byte by byte, so tests can make every malformed case.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace eq::test {

inline std::string raw_safetensors(const std::string& header_json, const std::string& data,
                                   int64_t declared_length = -1) {
  std::string out(8, '\0');
  uint64_t n = declared_length >= 0 ? static_cast<uint64_t>(declared_length) : header_json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace eq::test
