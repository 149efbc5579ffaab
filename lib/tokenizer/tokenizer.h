// Text to token ids and back, for any model: the model's own tokenizer.json
// (HfTokenizer) or, for byte-level models without one, bytes as ids
// (ByteTokenizer). Callers hold a Tokenizer and never ask which it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eq {
class ThreadPool;
}  // namespace eq

namespace eq::tokenizer {

// The most text one document may hold when a tokenizer.json encodes it
// (encode refuses more; commands that read text refuse a longer document
// naming the file): the model's BPE takes about 28 bytes of memory per byte
// of its longest word, and every component is bounded relative to this.
inline constexpr size_t kMaxDocumentBytes = size_t{16} << 20;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Ids of `text` (any bytes: what is not UTF-8 is read as U+FFFD first).
  // add_special: put the special tokens around it the reference puts there
  // (its add_special_tokens). Safe to call from several threads at once.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  // The same ids as encode, using `pool` for a long text. Not safe to call
  // from several threads at once with the same pool (the pool runs one job).
  virtual std::vector<int32_t> encode_parallel(std::string_view text, bool add_special, ThreadPool& pool) const {
    (void)pool;
    return encode(text, add_special);
  }
  // Text of `ids`; skip_special leaves special tokens out. Throws eq::Error
  // (exit 2) naming the position of an id that has no token.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // One more than the largest id it can produce.
  virtual int64_t vocab_size() const = 0;
  // "bytes", or the tokenizer file it was read from.
  virtual std::string source() const = 0;
  // End-of-sequence token, where the tokenizer names one.
  virtual std::optional<int32_t> eos_id() const { return std::nullopt; }
};

// Reads a tokenizer.json (zstd-compressed when it ends in .zst) and, when
// `config_path` is not empty, the tokenizer_config.json beside it. Malformed
// files: exit 2 naming the file and field; components not implemented: exit 4.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path, const std::string& config_path = "");

// A tokenizer.json on its own, with the tokenizer_config.json beside it when
// there is one.
std::unique_ptr<Tokenizer> load_tokenizer_file_beside_config(const std::string& path);

// The same from the bytes of a tokenizer.json (no config); `label` names it in errors.
std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view json, const std::string& label);

// The tokenizer of the model in `model_dir`: its tokenizer.json (with
// tokenizer_config.json when present) or, when there is none and the model's
// vocabulary is 256, the byte tokenizer. model_vocab_size > 0: a tokenizer
// whose ids reach past it is refused (exit 2 naming both).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir, int64_t model_vocab_size);

// Whether load_tokenizer would find one (a tokenizer file, or a vocabulary of
// 256): commands given token ids use the tokenizer only where there is one.
bool has_tokenizer(const std::string& model_dir, int64_t model_vocab_size);

// vocab_size of <model_dir>/config.json (top level, or text_config for
// multimodal configs), without the rest of the model config: tokenizing needs
// no architecture this build can run. Exit 2 naming the file and field.
int64_t read_model_vocab_size(const std::string& model_dir);

}  // namespace eq::tokenizer
