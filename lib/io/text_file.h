// Reading whole input files, transparently decompressing zstd (".zst"): the
// bundled corpus in data/ is stored compressed, and users may point any text
// or token input at a .zst file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eq::io {

// Reads `path` (decompressing when it ends in ".zst" or starts with the zstd
// magic). Throws eq::Error naming the path on failure; refuses inputs whose
// decompressed size would exceed `max_bytes`.
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = (1ull << 34));

// zstd helpers for traces and sidecars.
std::vector<uint8_t> zstd_compress(const void* data, size_t n, int level = 3);
std::vector<uint8_t> zstd_decompress(const void* data, size_t n, const std::string& label,
                                     uint64_t max_bytes = (1ull << 34));

}  // namespace eq::io
