// A tokenizer read from a HuggingFace tokenizer.json: added tokens, then
// normalizer, pre-tokenizer and BPE model on the text between them; decoding
// through the decoder; special tokens from the post-processor.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace eq::tokenizer {

// What tokenizer_config.json adds: bos/eos switches and the eos token.
struct TokenizerConfig {
  std::optional<bool> add_bos, add_eos;
  std::string bos_token, eos_token;  // empty: none named
};

class HfTokenizer : public Tokenizer {
 public:
  // `root`: the parsed tokenizer.json. The config's add_bos_token /
  // add_eos_token, when it sets them, decide the special tokens around a
  // sequence instead of the post-processor (what the reference's Llama-family
  // tokenizers do with them).
  HfTokenizer(const JsonNode& root, const TokenizerConfig& config, std::string source);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::vector<int32_t> encode_parallel(std::string_view text, bool add_special, ThreadPool& pool) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string source() const override { return source_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }

 private:
  // Shorter texts are not worth a batch on the pool.
  static constexpr size_t kParallelMinBytes = size_t{1} << 16;
  // Words per pool thread per batch: enough to amortize waking the pool.
  static constexpr size_t kParallelBatchWords = size_t{1} << 15;

  struct WordCache;
  // Where split_words sends what it finds, in text order.
  struct WordSink {
    std::function<void(std::string_view)> word;  // a piece for the BPE model
    std::function<void(int32_t)> added;          // an added token's id
  };
  // Added tokens, normalizer and pre-tokenizer over `text` (what is not UTF-8
  // read as U+FFFD): everything before the model.
  void split_words(std::string_view text, const WordSink& sink) const;
  void split_section(std::string_view section, bool at_text_start, const WordSink& sink) const;
  void encode_word(std::string_view word, WordCache& cache, std::vector<int32_t>& ids) const;
  WordCache& thread_cache() const;
  std::optional<int32_t> token_id(const std::string& token) const;
  // Added tokens whose id or content the model's vocabulary contradicts (exit 2).
  void check_added_ids(const JsonNode& list) const;

  std::string source_;
  uint64_t serial_;  // names this tokenizer's word caches
  AddedTokens added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<PostProcessor> post_;
  std::vector<std::string> labels_;  // of the normalizer and pre-tokenizer (or the file)
  std::optional<int32_t> eos_id_;
  int64_t vocab_size_ = 0;
};

}  // namespace eq::tokenizer
