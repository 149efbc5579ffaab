// Reading whole input files, transparently decompressing zstd (".zst"): the
// bundled corpus in data/ is stored compressed, and users may point any text
// or token input at a .zst file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/hash.h"

namespace eq::io {

// Reads `path` (decompressing when it ends in ".zst" or starts with the zstd
// magic). Throws eq::Error naming the path on failure; refuses inputs whose
// decompressed size would exceed `max_bytes`.
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = (1ull << 34));

// A text input whose content is larger than this is refused (kResource)
// when it would be read whole: as byte tokens it takes 5 bytes of memory per
// byte (the text and its int32 ids).
inline constexpr uint64_t kMaxTextBytes = 1ull << 30;

class InputFile;

// The content of a text input (zstd decompressed as it goes) read a chunk at
// a time: memory is what the caller asks for, whatever the file holds.
// Throws eq::Error naming the path for unreadable, corrupt or truncated input.
class TextReader {
 public:
  explicit TextReader(const std::string& path);
  ~TextReader();
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;

  // Appends up to `n` more bytes of content to `out`; fewer only at the end
  // (0 there). The bytes are not hashed: see hash().
  size_t read(std::string& out, size_t n);
  // The content's size where the file tells it before reading: a plain
  // file's, or what its first zstd frame declares (more frames may follow).
  std::optional<uint64_t> declared_size() const { return declared_; }
  const std::string& path() const;
  bool compressed() const { return zstd_ != nullptr; }
  // The streaming XXH64 a caller feeds with the bytes it has read, and
  // hash_rest() finishes with the ones left (adding their count to *bytes).
  Xxhash64& hash() { return hash_; }
  uint64_t hash_rest(uint64_t* bytes);

 private:
  struct Zstd;
  size_t read_plain(char* dst, size_t n);
  size_t read_zstd(char* dst, size_t n);

  std::unique_ptr<InputFile> in_;
  std::unique_ptr<Zstd> zstd_;
  unsigned char head_[32];
  size_t head_bytes_ = 0, head_used_ = 0;
  std::optional<uint64_t> declared_;
  Xxhash64 hash_;
};

// XXH64 of a text input's content (decompressed), read a chunk at a time.
uint64_t text_content_xxh64(const std::string& path);
// Its content's size: the declared one, else counted by reading a chunk at a
// time, stopping once past `stop_after`.
uint64_t text_content_size(const std::string& path, uint64_t stop_after);

// Reads the first `want` bytes of a text input (0 = all of it), in chunks,
// decompressing zstd as it goes, and stops there: the start of a corpus of
// any size costs only the bytes asked for. When the whole text is wanted (or
// more than `cap` bytes of it), a content larger than `cap` is refused with
// kResource naming the file and the cap, before more than cap + 1 bytes are
// held (at once when the file declares its size). Throws eq::Error naming
// the path for unreadable or corrupt input.
std::string read_text_prefix(const std::string& path, uint64_t want, uint64_t cap = kMaxTextBytes);

// zstd helpers for traces and sidecars.
std::vector<uint8_t> zstd_compress(const void* data, size_t n, int level = 3);
std::vector<uint8_t> zstd_decompress(const void* data, size_t n, const std::string& label,
                                     uint64_t max_bytes = (1ull << 34));

}  // namespace eq::io
