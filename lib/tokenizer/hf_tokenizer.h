// A tokenizer read from a HuggingFace tokenizer.json: added tokens, then
// normalizer, pre-tokenizer and BPE model on the text between them; decoding
// through the decoder; special tokens from the post-processor.
#pragma once

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
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string source() const override { return source_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }

 private:
  struct WordCache;
  void encode_section(std::string_view text, bool at_text_start, WordCache& cache, std::vector<int32_t>& ids) const;
  std::optional<int32_t> token_id(const std::string& token) const;

  std::string source_;
  AddedTokens added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<PostProcessor> post_;
  std::optional<int32_t> eos_id_;
  int64_t vocab_size_ = 0;
};

}  // namespace eq::tokenizer
