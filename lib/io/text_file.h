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

// A text input whose content is larger than this is refused (kResource)
// when it would be read whole: as byte tokens it takes 5 bytes of memory per
// byte (the text and its int32 ids). --max-tokens reads only the start.
inline constexpr uint64_t kMaxTextBytes = 1ull << 30;

// Reads the first `want` bytes of a text input (0 = all of it), in chunks,
// decompressing zstd as it goes, and stops there: the start of a corpus of
// any size costs only the bytes asked for. When the whole text is wanted (or
// more than `cap` bytes of it), a content larger than `cap` is refused with
// kResource naming the file and the cap, before more than cap + 1 bytes are
// held. Throws eq::Error naming the path for unreadable or corrupt input.
std::string read_text_prefix(const std::string& path, uint64_t want, uint64_t cap = kMaxTextBytes);

// zstd helpers for traces and sidecars.
std::vector<uint8_t> zstd_compress(const void* data, size_t n, int level = 3);
std::vector<uint8_t> zstd_decompress(const void* data, size_t n, const std::string& label,
                                     uint64_t max_bytes = (1ull << 34));

}  // namespace eq::io
